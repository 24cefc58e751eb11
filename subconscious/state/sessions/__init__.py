"""Session state: ``session-<id>.json`` (the view upstream reads) and one version per host, merged
so the cursor never moves back; the session floor and retirement; the read-only caches that keep a
bulk read and a hook's read fast (:mod:`.cache`, :mod:`.listcache`).

May import the ground of :mod:`subconscious.state` and :mod:`subconscious.state.conflicts`.
"""
