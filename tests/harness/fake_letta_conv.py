"""An in-process stand-in for one Letta server's conversations, with scripted outcomes per send, for driving
the worker (subconscious/delivery/worker.py) deterministically: no HTTP, no threads, no clock.

``FakeLetta`` has the calls the worker and tools/loop.py make (list_messages with before/after/order,
iter_messages, get_run, get_agent, send_message_streaming, send_tool_results) and keeps what a real server
keeps: messages with ids and run ids, runs with status and stop reason. Each send of a user message takes
the next outcome from ``script`` ("ok" once the script is used up):

    ok               stored, the turn completes (end_turn)
    error            stored, the run fails (llm_api_error); the stream says so (stop_reason)
    error_raise      stored, the run fails; the stream breaks with an error event (LettaStreamError)
    timeout_ok       stored, the run completes on the server; the reply is lost (LettaTimeoutError)
    timeout_running  stored, the run is still going when the reply is lost; it completes at the next tick()
    conflict         409: another run is busy; nothing stored
    down             connection refused; nothing stored
    tools            a long tool-heavy turn: TOOL_ROUNDS client-tool calls (3 messages each), then end_turn
    tools_cut        the same, but the reply to the last tool results is lost (the run completed)
    tools_die        the worker dies after the first tool request: the conversation waits for approval
    error_step       stored, one step ran (a reasoning and an assistant message), then the LLM failed: the run
                     is ``completed`` with stop reason ``llm_api_error``, as Letta 0.16.8 reports it

Any send fails as the script says, a client-tool result too: each send of tool results takes the next
outcome as well (``ok``, ``down``, ``conflict``, ``timeout_ok``, ``error``, ``error_step``; a ``tools*``
outcome there is ``ok``).

Paging is Letta 0.16.8's: the conversation is a list of stored *rows*, ``limit`` counts rows, and some rows
convert into no message at all (``blank_every``: a message-less row after every n-th message; ``row()`` adds
one), so a page is short while more follows. The worker lists through the real client's paging
(``LettaClient.iter_messages`` / ``iter_messages_newest_first`` over this ``list_messages``).

``ok_turns()`` is the oracle's view: for every turn that COMPLETED OK, what it delivered (the transcript
line range of an update or re-delivery by reference, or "start").
"""
from __future__ import annotations

import re
import types
from pathlib import Path

from subconscious.letta.errors import LettaConflictError, LettaConnectionError, LettaError, LettaStreamError, \
    LettaTimeoutError
from subconscious.letta.client import LettaClient
from subconscious.letta.messages import COMPLETE_STOP_REASONS, TurnResult, content_text
from subconscious.state.records import SessionState

TOOL_ROUNDS = 22  # > the 20 calls a turn may run: 66+ messages after the user message
_RANGE = re.compile(r'<(?:lines|retry delivery="\w+") first="(\d+)" last="(\d+)"')


class FakeLetta:
    def __init__(self, script=(), blank_every: int = 3, context_window: int = 32000):
        self.script = list(script)
        self.blank_every, self.context_window = blank_every, context_window
        self.rows: list[dict] = [{"id": "message-00000000", "message_type": "system_message", "content": "sys",
                                  "run_id": None}]
        self.runs: dict[str, dict] = {}
        self.sends = 0  # user messages sent (tool results: tool_sends)
        self.tool_sends = 0
        self.calls: list[str] = []
        self._n = 0
        self._tools_left = 0
        self._tools_mode = ""
        self._later: list[tuple[str, str]] = []  # runs that complete at the next tick(): (run id, outcome)

    # ------------------------------------------------------------ plumbing
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def close(self):
        return None

    def _id(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}-{self._n:08d}"

    @property
    def messages(self) -> list[dict]:
        """The conversation's messages, oldest first (what its rows convert into)."""
        return [m for m in self.rows if not m.get("_no_message")]

    def _add(self, kind: str, run: str | None, **fields) -> dict:
        m = {"id": self._id("message"), "message_type": kind, "run_id": run, **fields}
        self.rows.append(m)
        if self.blank_every and self._n % self.blank_every == 0:
            self.row()
        return m

    def row(self) -> None:
        """A stored row that converts into no message: counted by ``limit``, never listed."""
        self.rows.append({"id": self._id("row"), "_no_message": True})

    def _outcome(self) -> str:
        return self.script.pop(0) if self.script else "ok"

    def _run(self, status: str, stop: str | None) -> str:
        rid = self._id("run")
        self.runs[rid] = {"id": rid, "status": status, "stop_reason": stop}
        return rid

    def tick(self) -> None:
        """Time passes on the server: runs still going finish."""
        for rid, outcome in self._later:
            self.runs[rid].update(status="completed", stop_reason="end_turn")
            self._add("assistant_message", rid, content="ok (late)")
        self._later = []

    def busy(self) -> bool:
        return any(r["status"] in ("created", "running") for r in self.runs.values())

    def waiting(self) -> bool:
        return self.messages[-1]["message_type"] == "approval_request_message"

    # ------------------------------------------------------------ reads
    def list_messages(self, conversation_id, *, limit=20, order="desc", before=None, after=None, timeout=None):
        """As Letta 0.16.8 pages: ``before``/``after`` by row position (an unknown cursor is ignored), then
        ``order``, then ``limit`` rows, then each row converted (message-less rows give nothing)."""
        self.calls.append("list")
        rows = list(self.rows)
        ids = [m["id"] for m in rows]
        if after is not None and after in ids:
            rows = rows[ids.index(after) + 1:]
        if before is not None and before in ids:
            rows = rows[:ids.index(before)]
        if order == "desc":
            rows = rows[::-1]
        return [dict(m) for m in rows[:limit] if not m.get("_no_message")]

    iter_messages = LettaClient.iter_messages  # the real client's paging over this list_messages
    iter_messages_newest_first = LettaClient.iter_messages_newest_first
    _pages = LettaClient._pages

    def get_run(self, run_id, *, timeout=None):
        self.calls.append("run")
        return dict(self.runs[run_id])

    def get_agent(self, agent_id, *, include_blocks=True, timeout=None):
        return {"id": agent_id, "llm_config": {"context_window": self.context_window}}

    # ------------------------------------------------------------ sends
    def send_message_streaming(self, conversation_id, messages, *, client_tools=None, max_steps=None, timeout=None,
                               total_timeout=None, on_item=None):
        text = messages if isinstance(messages, str) else content_text(messages[0].get("content"))
        if self.busy():
            raise LettaConflictError("sending: HTTP 409", "another run", status=409)
        if self.waiting():
            raise LettaError("sending: HTTP 400", "the conversation is waiting for approval of tool calls", status=400)
        outcome = self._outcome()
        self.sends += 1
        if outcome == "conflict":
            raise LettaConflictError("sending: HTTP 409", "another run is busy", status=409)
        if outcome == "down":
            raise LettaConnectionError("sending: cannot connect", "start the server")
        if outcome.startswith("tools"):
            rid = self._run("completed", "requires_approval")
            self._add("user_message", rid, content=text)
            self._tools_left, self._tools_mode = TOOL_ROUNDS, outcome
            turn = self._tool_request(rid)
            if outcome == "tools_die":
                raise LettaConnectionError("sending: connection failed (ReadError)", "retry later")
            return turn
        if outcome == "error_step":  # one step ran, then the LLM failed: completed + llm_api_error
            rid = self._run("completed", "llm_api_error")
            self._add("user_message", rid, content=text)
            self._add("reasoning_message", rid, reasoning="thinking")
            a = self._add("assistant_message", rid, content="half")
            return TurnResult([a], "llm_api_error")
        if outcome in ("error", "error_raise"):
            rid = self._run("failed", "llm_api_error")
            self._add("user_message", rid, content=text)
            if outcome == "error_raise":
                raise LettaStreamError("the Letta agent run failed (llm_error)", "see the server's log")
            return TurnResult([], "llm_api_error")
        if outcome == "timeout_running":
            rid = self._run("running", None)
            self._add("user_message", rid, content=text)
            self._later.append((rid, "ok"))
            raise LettaTimeoutError("streaming took too long", "the run continues")
        rid = self._run("completed", "end_turn")
        self._add("user_message", rid, content=text)
        a = self._add("assistant_message", rid, content="noted")
        if outcome == "timeout_ok":
            raise LettaTimeoutError("streaming took too long", "the run continues")
        assert outcome == "ok", outcome
        return TurnResult([a], "end_turn")

    def _tool_request(self, rid: str) -> TurnResult:
        call = {"tool_call_id": self._id("call"), "name": "Read", "arguments": '{"file_path": "x"}'}
        m = self._add("approval_request_message", rid, tool_call=call, tool_calls=[call])
        return TurnResult([m], "requires_approval")

    def send_tool_results(self, conversation_id, results, *, client_tools=None, streaming=True, max_steps=None,
                          timeout=None, total_timeout=None):
        if not self.waiting():
            raise LettaError("sending tool results: HTTP 400", "nothing is waiting for approval", status=400)
        outcome = self._outcome()
        self.tool_sends += 1
        if outcome.startswith("tools"):
            outcome = "ok"
        if outcome == "conflict":
            raise LettaConflictError("sending tool results: HTTP 409", "another run is busy", status=409)
        if outcome == "down":
            raise LettaConnectionError("sending tool results: cannot connect", "start the server")
        self._tools_left -= 1
        last = self._tools_left <= 0
        failed = outcome in ("error", "error_raise", "error_step")
        status = "failed" if outcome in ("error", "error_raise") else "completed"
        stop = "llm_api_error" if failed else ("end_turn" if last else "requires_approval")
        rid = self._run(status, stop)
        self._add("approval_response_message", rid, content="")
        for _ in results:
            self._add("tool_return_message", rid, tool_return="refused", status="error")
        if failed:
            if outcome == "error_step":
                self._add("assistant_message", rid, content="half")
            if outcome == "error_raise":
                raise LettaStreamError("the Letta agent run failed (llm_error)", "see the server's log")
            return TurnResult([], "llm_api_error")
        if not last and outcome != "timeout_ok":
            return self._tool_request(rid)
        if not last:  # the reply with the next tool request is lost: the conversation waits for approval
            self._tool_request(rid)
            raise LettaTimeoutError("streaming took too long", "the run continues")
        a = self._add("assistant_message", rid, content="done with tools")
        if self._tools_mode == "tools_cut" or outcome == "timeout_ok":
            raise LettaConnectionError("sending tool results: connection failed (ReadError)", "retry later")
        return TurnResult([a], "end_turn")

    # ------------------------------------------------------------ the oracle
    def turns(self) -> list[tuple[dict, list[dict]]]:
        out: list[tuple[dict, list[dict]]] = []
        for m in self.messages:
            if m["message_type"] == "user_message":
                out.append((m, []))
            elif out:
                out[-1][1].append(m)
        return out

    def ok_turns(self) -> list[str | tuple[int, int]]:
        """What each turn that completed OK delivered: ("start") or (first, last) line range."""
        got: list = []
        for user, span in self.turns():
            last = span[-1] if span else user
            run = self.runs.get(last.get("run_id") or user["run_id"])
            if not run or run["status"] != "completed" or run["stop_reason"] not in COMPLETE_STOP_REASONS:
                continue
            text = content_text(user["content"])
            if "claude_code_session_start" in text:
                got.append("start")
            r = _RANGE.search(text)
            if r:
                got.append((int(r.group(1)), int(r.group(2))))
        return got


class FakeStore:
    """The two calls of the state store's public API the worker uses, in memory."""

    def __init__(self):
        self.sessions: dict[str, SessionState] = {}

    def session(self, sid):
        return self.sessions.get(sid)

    def update_session(self, sid, change):
        self.sessions[sid] = change(self.sessions.get(sid))
        return self.sessions[sid]


def fake_runtime(root: Path, store: FakeStore, sdk_tools: str = "read"):
    local = types.SimpleNamespace(root=root, locks=root / "locks", logs=root / "logs")
    settings = types.SimpleNamespace(sdk_tools=sdk_tools, base_url="http://fake", api_key=None, debug=False)
    return types.SimpleNamespace(local=local, host=types.SimpleNamespace(id="h", name="h"), settings=settings,
                                 store=lambda *a, **k: store)
