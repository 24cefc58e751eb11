"""``subconscious ui``: a read-only local page over what the subconscious knows (memory blocks and their
history, the agent's messages by session and machine, every machine's sessions, the shared home's health).

  guard    which requests are let in: the per-run token, the Host header, the methods (pure)
  server   the standard-library HTTP server (127.0.0.1 only) and its routes
  backend  the data behind the JSON API, read through subconscious.see and subconscious.doctor
  static/  the page: plain HTML, CSS and JS shipped in the package, no build step
"""
