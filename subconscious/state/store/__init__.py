"""The store of conversations and settings: read every source (:mod:`..sources`, :mod:`.reading`)
→ a pure plan (:mod:`.plan`) → apply (:mod:`.writing`, :mod:`..publish`), redone when it loses a
race; upkeep (gc, archives, folds) and retention. :class:`.core.Store` is the public surface.

May import the ground of :mod:`subconscious.state` (fs, files, order, clock, records, merge, seal),
:mod:`subconscious.state.conflicts` and :mod:`subconscious.state.sessions`.
"""
