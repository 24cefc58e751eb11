"""A scripted OpenAI-compatible model for driving a real Letta server in tests (stdlib only).

Run: ``python tests/harness/fake_llm.py --port 0 --ready-file PATH`` (writes the bound port to PATH).

Model endpoints (with or without the ``/v1`` prefix):
  GET  /v1/models              the fake model ids (``--models``, default ``fake-model``)
  POST /v1/chat/completions    streaming (SSE) or not, with tool calls
  POST /v1/embeddings          deterministic vectors (float lists or base64 float32)
Control endpoints (used by tests through ``FakeLLMControl``):
  POST /_fake/queue   {"replies": [reply, ...]}  replies used, in order, by the next completions
  POST /_fake/reset   forget queue and request log
  GET  /_fake/requests  every request received: {"path", "body", "decision", "t"}

A reply is ``{"text": str}``, ``{"tool": name, "args": {...}}`` or ``{"error": status}``, each with an
optional ``"delay": seconds`` and ``"times": n`` (the reply answers the next n requests, default 1: Letta's
OpenAI client tries a failed request 3 times, so ``{"error": 500, "times": 3}`` fails one agent step).
  POST /_fake/fail    {"status": 500}  every completion fails with that status until {"status": null} Without a queued reply the model follows directives found in the latest
user text Letta forwards (XML entities are decoded first, so directives survive inside transcripts):

  REMEMBER <label>: <text>            memory_insert into block <label>
  REPLACE <label>: <old> => <new>     memory_replace in block <label>
  CALL <ToolName> {json args}         call any offered tool, e.g. a client tool ``CALL Read {"file_path": "x"}``
  SAY <text>                          the final answer is exactly <text>
  LLM_ERROR <status>                  answer with that HTTP error
  LLM_SLEEP <seconds>                 wait before answering
  LLM_WAIT_FOR <absolute path>        wait before answering until that file exists (at most 300 s): an agent
                                      slower than the user however loaded the machine

Directives end at a newline or '<'. Tool directives run one per step, in order; once all ran (tool calls
after the latest user message are counted) the answer is SAY's text or ``Done: <tools>`` followed by the
text of the tool results; with no directive at all the answer is ``ECHO: <user text>``.
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import html
import json
import os
import re
import struct
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_END = r"(?=\n|<|$)"
_LABEL = r"([A-Za-z0-9_\-./]+)"
DIRECTIVE_RE = re.compile(
    r"\b(?:"
    rf"REMEMBER\s+{_LABEL}\s*:\s*(?P<rem>[^\n<]+?)\s*{_END}"
    rf"|REPLACE\s+{_LABEL}\s*:\s*(?P<old>[^\n<]+?)\s*=>\s*(?P<new>[^\n<]*?)\s*{_END}"
    rf"|CALL\s+(?P<tool>[A-Za-z_][A-Za-z0-9_\-]*)\s*(?P<args>\{{[^\n]*\}})?\s*{_END}"
    rf"|SAY\s+(?P<say>[^\n<]+?)\s*{_END}"
    rf"|LLM_ERROR\s+(?P<status>\d{{3}})"
    rf"|LLM_SLEEP\s+(?P<sleep>\d+(?:\.\d+)?)"
    r"|LLM_WAIT_FOR\s+(?P<wait>/[^\s<]+)"
    r")"
)
SKIP_USER_TYPES = {"heartbeat", "system_alert", "login"}


# ---------------------------------------------------------------- pure decision logic

def text_of(content) -> str:
    """Plain text of an OpenAI message content (string or list of parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, dict):
                t = part.get("text", part.get("content"))
                if isinstance(t, str):
                    out.append(t)
            elif isinstance(part, str):
                out.append(part)
        return "\n".join(out)
    return str(content)


def unwrap_user_text(text: str) -> str | None:
    """Letta may wrap user input as JSON ({"type": "user_message", "message": ...}); heartbeats are not users."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            obj = json.loads(stripped)
        except ValueError:
            return text
        if isinstance(obj, dict):
            if obj.get("type") in SKIP_USER_TYPES:
                return None
            if isinstance(obj.get("message"), str):
                return obj["message"]
    return text


def latest_user(messages: list) -> tuple[int | None, str | None]:
    """Index and text of the latest genuine user message (skipping heartbeats and system alerts)."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if isinstance(m, dict) and m.get("role") == "user":
            t = unwrap_user_text(text_of(m.get("content")))
            if t is not None:
                return i, t
    return None, None


def parse_directives(text: str) -> dict:
    """Directives in user text: {"actions": [(tool, args)], "say", "error", "sleep", "wait_for"}."""
    out: dict = {"actions": [], "say": None, "error": None, "sleep": None, "wait_for": None}
    for m in DIRECTIVE_RE.finditer(html.unescape(text)):
        g = m.groupdict()
        if g["rem"] is not None:
            out["actions"].append(("memory_insert", {"label": m.group(1), "new_string": g["rem"]}))
        elif g["old"] is not None:
            out["actions"].append(("memory_replace", {"label": m.group(3), "old_string": g["old"],
                                                      "new_string": g["new"]}))
        elif g["tool"] is not None:
            try:
                args = json.loads(g["args"]) if g["args"] else {}
            except ValueError:
                args = {"_unparsed": g["args"]}
            out["actions"].append((g["tool"], args if isinstance(args, dict) else {"value": args}))
        elif g["say"] is not None:
            out["say"] = g["say"]
        elif g["status"] is not None:
            out["error"] = int(g["status"])
        elif g["sleep"] is not None:
            out["sleep"] = float(g["sleep"])
        elif g["wait"] is not None:
            out["wait_for"] = g["wait"]
    return out


def tool_result_text(content: str) -> str:
    """Letta wraps tool results as JSON {"status", "message", "time"}; the message is what the tool said."""
    try:
        obj = json.loads(content)
    except ValueError:
        return content
    if isinstance(obj, dict) and "message" in obj:
        return obj["message"] if isinstance(obj["message"], str) else json.dumps(obj["message"])
    return content


def offered_tools(tools) -> dict:
    """{name: JSON schema of parameters} for the tools of a chat request."""
    out = {}
    for t in tools or []:
        fn = t.get("function", t) if isinstance(t, dict) else {}
        if isinstance(fn, dict) and fn.get("name"):
            out[fn["name"]] = fn.get("parameters") or {}
    return out


def fill_required(schema: dict, args: dict) -> dict:
    """Give every required parameter a value, as a model that follows the schema would."""
    props = (schema or {}).get("properties") or {}
    args = dict(args)
    if "request_heartbeat" in props:
        args.setdefault("request_heartbeat", True)
    for name in (schema or {}).get("required") or []:
        if name not in args:
            typ = (props.get(name) or {}).get("type")
            args[name] = {"boolean": True, "integer": 0, "number": 0, "array": [], "object": {}}.get(typ, "")
    return args


def decide(body: dict) -> dict:
    """What to answer to one chat request: {"kind": "text"|"tool"|"error", ...}."""
    messages = body.get("messages") or []
    tools = offered_tools(body.get("tools"))
    idx, user_text = latest_user(messages)
    if user_text is None:
        return {"kind": "text", "text": "ECHO: (no user message)"}
    d = parse_directives(user_text)
    base = {"sleep": d["sleep"]} if d["sleep"] else {}
    if d["wait_for"]:
        base["wait_for"] = d["wait_for"]
    if d["error"] is not None:
        return {"kind": "error", "status": d["error"], **base}
    after = messages[idx + 1:]
    calls_made = [((tc.get("function") or {}).get("name") or "?")
                  for m in after if isinstance(m, dict) and m.get("role") == "assistant"
                  for tc in (m.get("tool_calls") or [])]
    results = [tool_result_text(text_of(m.get("content")))
               for m in after if isinstance(m, dict) and m.get("role") == "tool"]
    pending = d["actions"][len(calls_made):]
    if pending:
        name, args = pending[0]
        if name not in tools:
            return {"kind": "text", "text": f"ERROR: tool {name} not offered (offered: {sorted(tools)})", **base}
        return {"kind": "tool", "name": name, "args": fill_required(tools[name], args), **base}
    if d["say"] is not None:
        return {"kind": "text", "text": d["say"], **base}
    if calls_made:
        text = "Done: " + ", ".join(calls_made)
        if results:
            text += " | results: " + " || ".join(r.strip()[:300] for r in results)
        return {"kind": "text", "text": text, **base}
    return {"kind": "text", "text": "ECHO: " + user_text.strip()[:500], **base}


def from_queued(reply: dict, tools: dict) -> dict:
    base = {"sleep": float(reply["delay"])} if reply.get("delay") else {}
    if "error" in reply:
        return {"kind": "error", "status": int(reply["error"]), **base}
    if "tool" in reply:
        name = reply["tool"]
        return {"kind": "tool", "name": name, "args": fill_required(tools.get(name, {}), reply.get("args") or {}),
                **base}
    return {"kind": "text", "text": str(reply.get("text", "")), **base}


def embedding(text: str, dim: int) -> list[float]:
    seed = hashlib.sha256(text.encode()).digest()
    return [((seed[j % 32] + j) % 97) / 97.0 - 0.5 for j in range(dim)]


# ---------------------------------------------------------------- HTTP shell

class State:
    def __init__(self, models: list[str]):
        self.models = models
        self.lock = threading.Lock()
        self.queue: list[dict] = []
        self.log: list[dict] = []
        self.fail: int | None = None  # every completion answers this HTTP status (an outage), until cleared


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: State  # set on the subclass made by serve()

    def log_message(self, fmt, *args):
        sys.stderr.write("[fake-llm] " + (fmt % args) + "\n")

    def _json(self, obj, code: int = 200) -> None:
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _route(self) -> str:
        p = self.path.split("?", 1)[0].rstrip("/")
        return p[3:] if p.startswith("/v1/") or p == "/v1" else p

    def do_GET(self):
        p = self._route()
        if p == "/models":
            return self._json({"object": "list", "data": [
                {"id": m, "object": "model", "created": 0, "owned_by": "fake-llm"} for m in self.state.models]})
        if p == "/_fake/requests":
            with self.state.lock:
                return self._json(list(self.state.log))
        if p in ("", "/health", "/_fake/health"):
            return self._json({"ok": True})
        self._json({"error": {"message": f"fake-llm: no route GET {self.path}"}}, 404)

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"_raw": raw.decode(errors="replace")}
        p = self._route()
        if p == "/_fake/reset":
            with self.state.lock:
                self.state.queue.clear()
                self.state.log.clear()
                self.state.fail = None
            return self._json({"ok": True})
        if p == "/_fake/queue":
            replies = body.get("replies") if isinstance(body, dict) else None
            if not isinstance(replies, list) or not all(isinstance(r, dict) for r in replies):
                return self._json({"error": {"message": "expected {\"replies\": [objects]}"}}, 400)
            with self.state.lock:
                self.state.queue.extend(replies)
                return self._json({"queued": len(self.state.queue)})
        if p == "/_fake/fail":
            status = body.get("status") if isinstance(body, dict) else None
            if status is not None and not (isinstance(status, int) and 400 <= status <= 599):
                return self._json({"error": {"message": "expected {\"status\": 4xx|5xx|null}"}}, 400)
            with self.state.lock:
                self.state.fail = status
            return self._json({"fail": status})
        if p == "/chat/completions":
            return self._chat(body)
        if p == "/embeddings":
            return self._embeddings(body)
        self._json({"error": {"message": f"fake-llm: no route POST {self.path}"}}, 404)

    def _embeddings(self, body: dict) -> None:
        with self.state.lock:
            self.state.log.append({"path": "/embeddings", "body": body, "decision": None, "t": time.time()})
        inp = body.get("input")
        items = inp if isinstance(inp, list) else [inp]
        dim = int(body.get("dimensions") or 1536)
        data = []
        for i, s in enumerate(items):
            vec = embedding(str(s), dim)
            emb = base64.b64encode(struct.pack(f"<{dim}f", *vec)).decode() \
                if body.get("encoding_format") == "base64" else vec
            data.append({"object": "embedding", "index": i, "embedding": emb})
        self._json({"object": "list", "data": data, "model": body.get("model", "fake-embed"),
                    "usage": {"prompt_tokens": 1, "total_tokens": 1}})

    def _chat(self, body: dict) -> None:
        with self.state.lock:
            queued = None
            if self.state.fail is not None:
                queued = {"error": self.state.fail}
            elif self.state.queue:
                head = self.state.queue[0]
                times = int(head.get("times") or 1)
                if times > 1:
                    head["times"] = times - 1
                    queued = dict(head)
                else:
                    queued = self.state.queue.pop(0)
        d = from_queued(queued, offered_tools(body.get("tools"))) if queued else decide(body)
        with self.state.lock:
            self.state.log.append({"path": "/chat/completions", "body": body, "decision": d, "t": time.time()})
        sys.stderr.write(f"[fake-llm] decision {json.dumps(d)[:300]}\n")
        if d.get("sleep"):
            time.sleep(d["sleep"])
        if d.get("wait_for"):
            deadline = time.monotonic() + 300
            while not os.path.exists(d["wait_for"]) and time.monotonic() < deadline:
                time.sleep(0.05)
        if d["kind"] == "error":
            return self._json({"error": {"message": f"fake-llm scripted error {d['status']}",
                                         "type": "fake_error", "code": str(d["status"])}}, d["status"])
        model = body.get("model") or self.state.models[0]
        digest = hashlib.sha1(json.dumps(body.get("messages", []), sort_keys=True).encode()).hexdigest()
        cid, call_id, created = "chatcmpl-" + digest[:24], "call_" + digest[24:40], int(time.time())
        text = d.get("text")
        args_json = json.dumps(d["args"]) if d["kind"] == "tool" else None
        prompt = len(json.dumps(body.get("messages", []))) // 4
        completion = max(1, len(text or args_json or "") // 4)
        usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        if not body.get("stream"):
            msg: dict = {"role": "assistant", "content": text}
            if args_json is not None:
                msg["tool_calls"] = [{"id": call_id, "type": "function",
                                      "function": {"name": d["name"], "arguments": args_json}}]
            return self._json({"id": cid, "object": "chat.completion", "created": created, "model": model,
                               "choices": [{"index": 0, "message": msg, "logprobs": None,
                                            "finish_reason": "tool_calls" if args_json else "stop"}],
                               "usage": usage})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

        def chunk(delta: dict, finish=None) -> dict:
            return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}

        events = []
        if args_json is not None:
            events.append(chunk({"role": "assistant", "content": None, "tool_calls": [
                {"index": 0, "id": call_id, "type": "function", "function": {"name": d["name"], "arguments": ""}}]}))
            step = max(1, len(args_json) // 3)
            for i in range(0, len(args_json), step):
                events.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": args_json[i:i + step]}}]}))
            events.append(chunk({}, "tool_calls"))
        else:
            events.append(chunk({"role": "assistant", "content": ""}))
            events.extend(chunk({"content": w}) for w in (re.findall(r"\S+\s*", text or "") or [text or ""]))
            events.append(chunk({}, "stop"))
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append({"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                           "choices": [], "usage": usage})
        try:
            for e in events:
                self.wfile.write(b"data: " + json.dumps(e).encode() + b"\n\n")
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass


def serve(host: str, port: int, models: list[str]) -> ThreadingHTTPServer:
    handler = type("BoundHandler", (Handler,), {"state": State(models)})
    srv = ThreadingHTTPServer((host, port), handler)
    srv.daemon_threads = True
    return srv


# ---------------------------------------------------------------- control client (for tests)

class FakeLLMControl:
    """Drive a running fake LLM from tests: queue replies, reset, read what Letta sent."""

    def __init__(self, url: str):
        self.url = url.rstrip("/")

    def _call(self, method: str, path: str, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read() or b"null")

    def reset(self) -> None:
        self._call("POST", "/_fake/reset", {})

    def queue(self, *replies: dict) -> int:
        return self._call("POST", "/_fake/queue", {"replies": list(replies)})["queued"]

    def fail(self, status: int | None) -> None:
        """Every completion answers ``status`` (an outage of the model provider) until ``fail(None)``."""
        self._call("POST", "/_fake/fail", {"status": status})

    def requests(self) -> list[dict]:
        return self._call("GET", "/_fake/requests")

    def chat_requests(self) -> list[dict]:
        return [r for r in self.requests() if r["path"] == "/chat/completions"]

    def user_texts(self) -> list[str]:
        """The latest user text the model saw in each chat request, in order."""
        return [latest_user(r["body"].get("messages") or [])[1] or "" for r in self.chat_requests()]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="scripted OpenAI-compatible model for tests")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0 = any free port")
    ap.add_argument("--models", default="fake-model", help="comma-separated model ids to list")
    ap.add_argument("--ready-file", help="write the bound port here once listening")
    a = ap.parse_args(argv)
    srv = serve(a.host, a.port, [m.strip() for m in a.models.split(",") if m.strip()])
    port = srv.server_address[1]
    if a.ready_file:
        tmp = a.ready_file + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(str(port))
        import os
        os.replace(tmp, a.ready_file)
    sys.stderr.write(f"[fake-llm] listening on http://{a.host}:{port}/v1\n")
    sys.stderr.flush()
    srv.serve_forever()


if __name__ == "__main__":
    main()
