"""Machine-local state, never synced: this host's identity and directories (:mod:`.identity`),
per-session local records (:mod:`.sessions`), which hook shows which note (:mod:`.claims`), the log, the project a session belongs to, Claude
Code's settings file (:mod:`.settingsfile`), the wiring from environment to store (:mod:`.runtime`), and served
mode's per-user token (:mod:`.servetoken`) and self-start (:mod:`.autostart`), which the hooks use.

May import :mod:`subconscious.privacy`, :mod:`subconscious.state`, :mod:`subconscious.base` and
:mod:`subconscious.config`; nothing above.
"""
