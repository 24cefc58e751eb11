"""Sync engines' conflict copies as data with names (recognised by :mod:`subconscious.state.copynames`):
read as extra sources and folded away (:mod:`.copies`), whole-file merges for git's merge driver and
``doctor --fix`` (:mod:`.filemerge`), and a view copy read by what it does not share
(:mod:`.viewlines`).

May import the ground of :mod:`subconscious.state`; never the store or sessions.
"""
