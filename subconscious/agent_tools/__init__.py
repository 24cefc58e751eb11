"""Client-side tools for the subconscious agent (LETTA_SDK_TOOLS): Read, Grep and Glob in ``read-only``
mode, also Write, Edit and Bash in ``full``, none in ``off``; run by the worker on this machine,
confined to the session's project directory.

Modules (import what you need; this package imports nothing on its own):
  modes     which tools each mode offers, and the words that describe a mode (pure, no imports)
  limits    the caps (calls per turn, per-call timeout, sizes, matches)
  ignore    .gitignore rules (a documented subset of git's)
  confine   the project root: path checks, safe opening, the directory walk
  readers   Read, Grep, Glob;  writers  Write, Edit;  shell  Bash (bubblewrap sandbox only)
  registry  tool definitions (JSON schemas) and execute(): one request -> one ToolResult
  loop      run_turn(): one agent turn, tool calls answered until it ends
"""
