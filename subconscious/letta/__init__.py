"""Letta client for subconscious.

Modules (import what you need; only ``client`` pulls in httpx):
  config    settings from the environment, base URL normalisation, id validation (pure)
  errors    the LettaError family and secret redaction
  sse       SSE parser and Letta stream interpretation (pure)
  messages  payload builders, TurnResult, approval/tool-result helpers (pure)
  client    LettaClient (httpx, ~75 ms to import)
  lite      stdlib-only GETs for the per-tool hot path (list_messages, get_agent; ~20-30 ms to import)
  agent     agent and model resolution (pure decisions + a thin shell over a client)
"""
