"""Served mode: one per-user process (``subconscious serve``) answering PreToolUse and UserPromptSubmit on
127.0.0.1, so a tool call costs a local HTTP round trip instead of a Python start: through ``client.bash``
(a command hook, bash's own /dev/tcp: silent whatever fails) or as Claude Code's ``http`` hooks.

- :mod:`subconscious.local.servetoken`: the per-user token (machine-local, 0600) every request must carry, and
  :mod:`subconscious.local.autostart`, which starts the server for the hooks (both machine-local, below the hooks);
- :mod:`.server`: the HTTP server; it runs the very handlers the command hooks run
  (``subconscious.hooks.events.pre_tool`` / ``prompt``) and records what was shown once the answer is sent;
- :mod:`.keepalive`: the server's Letta reads on kept-alive connections.

This module is imported by ``install`` too: nothing heavy here.
"""

from __future__ import annotations

import os

PORT_VAR = "SUBCONSCIOUS_SERVE_PORT"
# The client sends no hook input larger than this (read with this bound, never whole): a larger one (a Write of
# a big file) goes without served context rather than hold the hook (bash reads a pipe a byte at a time).
CLIENT_STDIN_LIMIT = 1 << 20
# event in the URL path → (handler module, seconds the server waits for it: as hookrun.EVENTS, under the
# hook timeouts of hooks.json, 10 and 5 s)
ROUTES = {
    "/subconscious/hook/user-prompt-submit": ("user-prompt-submit", "subconscious.hooks.events.prompt", 8.0),
    "/subconscious/hook/pre-tool-use": ("pre-tool-use", "subconscious.hooks.events.pre_tool", 4.0),
}


def client_script() -> str:
    """The bash client (``client.bash``) that ``install --served`` writes into the settings file: its
    ``@NAME@`` places filled from :mod:`subconscious.local.settingsfile` (the token header and variable, the
    forwarded settings and their header prefix, as the server reads them), its comment lines left out (the
    settings file names it by ``$0``, ``subconscious-served``)."""
    from pathlib import Path

    from ..local.settingsfile import ENV_HEADER, FORWARDED_VARS, TOKEN_HEADER, TOKEN_VAR

    text = Path(__file__).with_name("client.bash").read_text(encoding="utf-8")
    text = "".join(line for line in text.splitlines(keepends=True) if not line.lstrip().startswith("#"))
    for name, value in (("TOKEN_HEADER", TOKEN_HEADER), ("TOKEN_VAR", TOKEN_VAR), ("ENV_HEADER", ENV_HEADER),
                        ("FORWARDED_VARS", " ".join(FORWARDED_VARS)),
                        ("STDIN_LIMIT_PLUS_1", str(CLIENT_STDIN_LIMIT + 1)), ("STDIN_LIMIT", str(CLIENT_STDIN_LIMIT))):
        text = text.replace(f"@{name}@", value)
    if "@" in text:
        raise RuntimeError("client.bash has a place client_script does not fill")
    return text


def default_port(env=os.environ) -> int:
    """``SUBCONSCIOUS_SERVE_PORT``, else one port per user (20000 + uid mod 10000: below Linux's
    ephemeral range, so no outgoing connection sits on it)."""
    raw = (env.get(PORT_VAR) or "").strip()
    if raw:
        if not raw.isdigit() or not 0 < int(raw) < 65536:
            raise ValueError(f"{PORT_VAR}={raw!r} is not a TCP port")
        return int(raw)
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return 20000 + uid % 10000
