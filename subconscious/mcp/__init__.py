"""The MCP server the plugin declares (stdio): ``ask_subconscious`` and ``search_memory``.

A surface: may import the read models (:mod:`subconscious.see`) and everything below them.
"""
