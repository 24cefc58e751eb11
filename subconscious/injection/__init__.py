"""What is shown to Claude: the agent's messages and memory blocks as injected context, escaped,
with the block values last shown (sealed when the home says so).

Pure where it can be. May import :mod:`subconscious.delivery`, :mod:`subconscious.agent_tools`,
:mod:`subconscious.local`, :mod:`subconscious.privacy`, :mod:`subconscious.letta`,
:mod:`subconscious.state`, :mod:`subconscious.base`; never :mod:`subconscious.hooks` or a surface.
"""
