"""subconscious: a background Letta agent for Claude Code, whose state is one synced directory.

The package's stories, top to bottom (each package's docstring says what it owns and may import):
the entry points (``__main__``, ``hotpath``), ``cli`` and ``commands`` (the verbs), the long-running
surfaces (``viewer``, ``mcp``, ``served``, ``demo``), the read models (``see``, ``doctor``), the hook
corridor (``hooks``), ``sync``, ``injection``, ``delivery``, ``agent_tools``, ``letta``, ``local``,
``privacy``, the shared home (``state``), and the leaves (``base``, ``config``). An import points down
this list only; tests/unit/test_import_layers.py holds the contract.
"""

__version__ = "0.1.0"
