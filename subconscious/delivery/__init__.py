"""What happens after a hook hands over: the detached worker, transcript → update XML, the cursor
that advances only on success, the keys that make delivery exactly-once, turns, daily budgets and the notices kept until
delivered (:mod:`.notices`).

May import :mod:`subconscious.agent_tools`, :mod:`subconscious.local`, :mod:`subconscious.privacy`, :mod:`subconscious.letta`,
:mod:`subconscious.state`, :mod:`subconscious.base` and :mod:`subconscious.config`; never
:mod:`subconscious.hooks`, :mod:`subconscious.injection` or a surface.
"""
