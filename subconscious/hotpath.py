"""The entry users' settings files and the plugin's ``hooks/run`` name: ``subconscious.hotpath.launch``.

The hook's cheap path itself lives in :mod:`subconscious.hooks.hotentry` (what it reads, in
:mod:`subconscious.hooks.hotinput`); anything that is not a hook goes to the CLI, reached here by name only
when it is needed. The names below are re-exported for callers of this module's earlier form.
"""

from __future__ import annotations

from .hooks.hotentry import handed_over, hook_event, run_hook, within_ttl  # noqa: F401 (re-exported)
from .hooks.hotinput import fetch_ttl_ms, state_dir  # noqa: F401 (re-exported)


def launch(argv: list[str]) -> None:
    """The entry ``hooks/run`` gives the interpreter (``python -c '…launch(sys.argv[3:])' <version> <script>
    hook <event>``), in place of the console script, whose ``import re`` alone costs a hook ~5 ms: the same as
    ``subconscious ARGV``, except that a hook the shortcut finished ends with ``os._exit`` once stdout and
    stderr are flushed (nothing else is open then; the interpreter's clean-up is another ~1.5 ms)."""
    event = hook_event(argv)
    if event is not None:
        code = run_hook(event, fast_exit=True)
    else:
        from .cli import main

        code = main(argv)
    raise SystemExit(code)
