"""Tooling around the sync engines: the watcher that folds conflict copies as they appear, git's
set-up, export/import archives and gc.

May import :mod:`subconscious.delivery`, :mod:`subconscious.local`, :mod:`subconscious.privacy`,
:mod:`subconscious.letta`, :mod:`subconscious.state`, :mod:`subconscious.base`; never a surface.
"""
