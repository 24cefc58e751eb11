"""A small fake of the Anthropic Messages API, for driving the real Claude Code CLI offline.

It listens on 127.0.0.1 only (a free port picked by the OS), answers the streaming
``POST /v1/messages`` that Claude Code sends (``?beta=true``, Server-Sent Events) and the
non-streaming form, and records every request it receives so tests can search what reached
the model. Hook output arrives in different shapes depending on the CLI version (``role:
system`` messages on 2.1.3xx, ``<system-reminder>`` text blocks on older ones), so tests should
search whole request bodies: :meth:`FakeAnthropic.bodies_text` and :meth:`FakeAnthropic.seen`.

Replies are scripted by markers in the user's prompt text:

``[[tool:Read /abs/path]]``      a ``tool_use`` of Read with ``{"file_path": ...}``
``[[tool:Bash some command]]``   a ``tool_use`` of Bash with ``{"command": ..., "description": ...}``
``[[tool:Glob pattern]]`` / ``[[tool:Grep pattern]]``  ``{"pattern": ...}``
``[[tool:Name {json}]]``         any tool, input given as a JSON object
(a marker naming a tool the request does not offer is ignored: 2.1.3xx defers Glob/Grep)
``[[text:some words]]``          the final text answer (default: :attr:`FakeAnthropic.default_text`)
``[[thinking:some words]]``      a thinking block before the first reply of the turn
``[[agent:TYPE PROMPT]]``        a ``tool_use`` of the subagent tool (``Agent`` on 2.1.3xx, ``Task`` before) with
                                 ``subagent_type`` TYPE, run in the foreground; in PROMPT, ``((`` and ``))`` stand
                                 for ``[[`` and ``]]``, so the subagent's own turn is scripted by markers too

A compaction request (``/compact``, or Claude Code compacting on its own: the newest user message asks for "a
detailed summary of the conversation") is answered with ``<analysis>…</analysis><summary>…</summary>`` naming
the user's prompts, as a real summary would (see :func:`compaction_summary`), never with a tool call.

Several ``[[tool:...]]`` markers run one after another: the n-th reply of a turn uses the
n-th marker, counted by the ``tool_result`` blocks that came back after the prompt. The
"prompt" is the newest user text block that carries a marker, so ``--resume`` turns with new
markers work; a turn without markers gets a plain text answer.

Run standalone for manual poking: ``python -m tests.harness.fake_anthropic`` prints
``PORT=<n>`` and logs requests as JSON lines to ``$FAKE_ANTHROPIC_LOG`` if set.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeAnthropic", "RecordedRequest", "plan_reply"]

_MARKER = re.compile(r"\[\[(tool|text|thinking|agent):(.*?)\]\]", re.S)
SUBAGENT_TOOLS = ("Agent", "Task")  # the subagent tool's name: Agent on 2.1.3xx, Task on older releases
COMPACTION_ASK = "detailed summary of the conversation"


@dataclass
class RecordedRequest:
    """One HTTP request the fake received, and what it answered."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    reply: list[dict[str, Any]] | None = None
    ts: float = field(default_factory=time.time)

    @property
    def is_messages(self) -> bool:
        return self.method == "POST" and self.path.split("?")[0].endswith("/v1/messages")

    def body_text(self) -> str:
        """The whole JSON body as text (non-ASCII kept), for substring searches."""
        return json.dumps(self.body, ensure_ascii=False)

    def to_json(self) -> dict[str, Any]:
        return {"ts": self.ts, "method": self.method, "path": self.path,
                "headers": self.headers, "body": self.body, "reply": self.reply}


# --------------------------------------------------------------------------- reply planning

def _text_blocks(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    out = []
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                out.append(str(block.get("text", "")))
    return out


def _count_tool_results(messages: list[dict[str, Any]]) -> int:
    n = 0
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):
            n += sum(1 for b in content if isinstance(b, dict) and b.get("type") == "tool_result")
    return n


def _tool_input(name: str, arg: str) -> dict[str, Any]:
    arg = arg.strip()
    if arg.startswith("{"):
        return json.loads(arg)
    if name == "Bash":
        return {"command": arg, "description": "Run a scripted command"}
    if name in ("Glob", "Grep"):
        return {"pattern": arg}
    if name == "WebFetch":
        return {"url": arg, "prompt": "Summarise the page"}
    if name == "WebSearch":
        return {"query": arg}
    return {"file_path": arg}


def _is_compaction(messages: list[dict[str, Any]]) -> bool:
    """The newest user message asks for the summary (system messages, e.g. MCP instructions, may follow)."""
    last = next((m for m in reversed(messages) if m.get("role") == "user"), {})
    return any(COMPACTION_ASK in t for t in _text_blocks(last))


def compaction_summary(messages: list[dict[str, Any]]) -> str:
    """What the fake answers a compaction request with: the user's marked prompts, one a line."""
    prompts = []
    for m in messages:
        if m.get("role") == "user" and not any(COMPACTION_ASK in t for t in _text_blocks(m)):
            prompts += [t.strip() for t in _text_blocks(m) if _MARKER.search(t) and not t.startswith("<")]
    listed = "\n".join("- %s" % p for p in prompts) or "- (none)"
    return ("<analysis>\nThe fake model summarises the conversation.\n</analysis>\n<summary>\n"
            "1. Primary Request and Intent: the user's scripted prompts.\n6. All user messages:\n%s\n</summary>"
            % listed)


def _subagent_call(arg: str, offered: set) -> dict[str, Any] | None:
    name = next((n for n in SUBAGENT_TOOLS if n in offered), None)
    if name is None:
        return None
    kind, _, prompt = arg.strip().partition(" ")
    return {"type": "tool_use", "id": "toolu_fake_" + uuid.uuid4().hex[:20], "name": name,
            "input": {"description": "Scripted subagent", "subagent_type": kind or "general-purpose",
                      "prompt": prompt.replace("((", "[[").replace("))", "]]"), "run_in_background": False}}


def plan_reply(body: dict[str, Any], default_text: str) -> list[dict[str, Any]]:
    """The content blocks to answer one Messages request with (pure; see module doc)."""
    messages = [m for m in (body.get("messages") or []) if isinstance(m, dict)]
    if _is_compaction(messages):
        return [{"type": "text", "text": compaction_summary(messages)}]
    prompt_at, markers = None, []
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") != "user":
            continue
        # CLI versions merge consecutive user turns into one message: use its newest marked block.
        for text in reversed(_text_blocks(messages[i])):
            found = [(k, v.strip()) for k, v in _MARKER.findall(text)]
            if found:
                prompt_at, markers = i, found
                break
        if markers:
            break
    offered = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
    # Tools this CLI version does not offer (e.g. Glob/Grep are deferred on 2.1.3xx) are skipped.
    tools = [("tool", v) for k, v in markers if k == "tool" and v.partition(" ")[0] in offered]
    tools += [("agent", v) for k, v in markers if k == "agent"]  # after the plain tool calls
    texts = [v for k, v in markers if k == "text"]
    thinking = [v for k, v in markers if k == "thinking"]
    step = _count_tool_results(messages[prompt_at + 1:]) if prompt_at is not None else 0

    blocks: list[dict[str, Any]] = []
    if thinking and step == 0:
        blocks.append({"type": "thinking", "thinking": thinking[0],
                       "signature": "fake-signature-" + uuid.uuid4().hex[:16]})
    if step < len(tools) and tools[step][0] == "agent":
        call = _subagent_call(tools[step][1], offered)
        if call is not None:
            return [{"type": "text", "text": "Using a subagent."}, call]
        step = len(tools)  # no subagent tool offered (inside a subagent): answer
    if step < len(tools):
        name, _, arg = tools[step][1].partition(" ")
        blocks.append({"type": "text", "text": "Using %s." % name})
        blocks.append({"type": "tool_use", "id": "toolu_fake_" + uuid.uuid4().hex[:20],
                       "name": name, "input": _tool_input(name, arg)})
        return blocks
    blocks.append({"type": "text", "text": texts[0] if texts else default_text})
    return blocks


def _sse(blocks: list[dict[str, Any]], msg_id: str, model: str, in_tok: int, stop: str) -> bytes:
    usage = {"input_tokens": in_tok, "output_tokens": 1,
             "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {
        "type": "message_start",
        "message": {"id": msg_id, "type": "message", "role": "assistant", "model": model,
                    "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}})]
    for i, b in enumerate(blocks):
        if b["type"] == "text":
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": b["text"]}]
        elif b["type"] == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": b["thinking"]},
                      {"type": "signature_delta", "signature": b["signature"]}]
        else:
            start = {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(b["input"])}]
        events.append(("content_block_start",
                       {"type": "content_block_start", "index": i, "content_block": start}))
        for d in deltas:
            events.append(("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": stop, "stop_sequence": None},
                                     "usage": {"output_tokens": 12}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return "".join("event: %s\ndata: %s\n\n" % (n, json.dumps(o)) for n, o in events).encode()


# --------------------------------------------------------------------------- server

class FakeAnthropic:
    """The fake API server, run on a background thread of the test process.

    ``with FakeAnthropic() as fake: ... fake.base_url ... fake.requests``
    """

    def __init__(self, default_text: str = "Done (fake model).", log_path: str | None = None):
        self.default_text = default_text
        self.log_path = log_path
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle
    def start(self) -> "FakeAnthropic":
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-anthropic", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> "FakeAnthropic":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "FakeAnthropic not started"
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return "http://127.0.0.1:%d" % self.port

    # recorded traffic
    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def message_requests(self, since: int = 0) -> list[RecordedRequest]:
        return [r for r in self.requests[since:] if r.is_messages]

    def bodies_text(self, since: int = 0) -> str:
        """Every Messages request body since index ``since``, as one searchable string."""
        return "\n".join(r.body_text() for r in self.message_requests(since))

    def seen(self, needle: str, since: int = 0) -> bool:
        """Did ``needle`` reach the model in any request body?"""
        return any(needle in r.body_text() for r in self.message_requests(since))

    def _record(self, req: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(req)
            if self.log_path:
                with open(self.log_path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(req.to_json(), ensure_ascii=False) + "\n")


def _make_handler(fake: FakeAnthropic) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt: str, *args: object) -> None:  # keep test output quiet
            pass

        def _body(self) -> Any:
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n) if n else b""
            if not raw:
                return None
            try:
                return json.loads(raw)
            except ValueError:
                return {"_raw": raw.decode("utf-8", "replace")}

        def _send(self, status: int, data: bytes, ctype: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("request-id", "req_fake_" + uuid.uuid4().hex[:12])
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

        def _json(self, obj: Any, status: int = 200) -> None:
            self._send(status, json.dumps(obj).encode(), "application/json")

        def do_GET(self) -> None:
            fake._record(RecordedRequest("GET", self.path, dict(self.headers), None))
            self._json({})

        def do_HEAD(self) -> None:
            fake._record(RecordedRequest("HEAD", self.path, dict(self.headers), None))
            self._send(200, b"", "application/json")

        def do_POST(self) -> None:
            body = self._body()
            req = RecordedRequest("POST", self.path, dict(self.headers), body)
            path = self.path.split("?")[0]
            rough_tokens = max(1, len(json.dumps(body)) // 4)
            if path.endswith("/v1/messages/count_tokens"):
                fake._record(req)
                return self._json({"input_tokens": rough_tokens})
            if not path.endswith("/v1/messages") or not isinstance(body, dict):
                fake._record(req)
                return self._json({})
            blocks = plan_reply(body, fake.default_text)
            req.reply = blocks
            fake._record(req)
            stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
            model = body.get("model") or "claude-fake"
            msg_id = "msg_fake_" + uuid.uuid4().hex[:20]
            if body.get("stream"):
                return self._send(200, _sse(blocks, msg_id, model, rough_tokens, stop), "text/event-stream")
            self._json({"id": msg_id, "type": "message", "role": "assistant", "model": model,
                        "content": blocks, "stop_reason": stop, "stop_sequence": None,
                        "usage": {"input_tokens": rough_tokens, "output_tokens": 12,
                                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}})

    return Handler


def main(argv: list[str]) -> int:  # pragma: no cover - manual use
    fake = FakeAnthropic(log_path=os.environ.get("FAKE_ANTHROPIC_LOG"))
    fake.start()
    print("PORT=%d" % fake.port, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        fake.stop()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
