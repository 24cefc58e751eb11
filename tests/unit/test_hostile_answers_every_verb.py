"""Every verb that reads the Letta server's answers ends in one line on stderr and a non-zero exit when the
server answers with a shape the Letta API never gives — never a traceback. Red team finding: ``subconscious
memory`` ended in ``AttributeError: 'list' object has no attribute 'get'`` when the agent came back as a list.

A fake server on 127.0.0.1 answers each endpoint a verb uses (the agent, a conversation's messages, a new
conversation, a message's stream) with what a case scripts, and the real command line runs against it: in
process for the many shapes (``cli.main`` with stdout and stderr captured: an exception escaping it is the
traceback the process would print), and as ``python -m subconscious`` for a few. The shapes, per endpoint:
the whole answer replaced (a list where an object belongs and the reverse, null, text, numbers, NaN and
1e999, an empty body, not JSON, bytes that are not UTF-8, JSON nested too deeply to read, huge answers), and
each field the verbs read given each wrong type (a block's ``value`` an object, a message's ``content`` a
number, a tool call a list…) or taken away. Verbs that say they tolerate it (``sessions``: each row's error
is in its ``errors``, exit 0; ``messages`` when another session could be read) keep doing so. Valid
answers, huge ones included, keep working as before.

Verbs that never talk to Letta (status, doctor, export, import, preview, gc, key) have nothing to test here;
``ui`` and ``mcp`` reach the server through the same ``subconscious.see`` functions (the viewer's memory
section is checked below), ``hook`` and ``worker`` through the same clients (and exit 0 by design)."""

from __future__ import annotations

import contextlib
import copy
import http.server
import json
import os
import subprocess
import sys
import threading
import traceback
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import pytest

from subconscious.state.records import SessionState
from subconscious.state.store.core import Store

ROOT = Path(__file__).resolve().parents[2]
AGENT = "agent-00000000-0000-4000-8000-00000000a11e"
CONV = "conv-00000000-0000-4000-8000-0000000000c1"
NEW_CONV = "conv-00000000-0000-4000-8000-0000000000c2"
SESSION = "s-one"
BLOCK = {"label": "guidance", "value": "prefers tabs\nruns pytest -q", "description": "what to keep in mind",
         "limit": 5000, "id": "block-00000000-0000-4000-8000-000000000001"}
AGENT_OK = {"id": AGENT, "name": "Subconscious", "blocks": [BLOCK], "llm_config": {"context_window": 30000}}
DATE = "2026-12-01T10:00:00Z"
MSG_ASSISTANT = {"id": "message-4", "message_type": "assistant_message", "date": "2026-12-01T10:00:04Z",
                 "content": "a note for you: the flaky test is test_login", "run_id": "run-1"}
MSG_TOOL = {"id": "message-3", "message_type": "tool_call_message", "date": "2026-12-01T10:00:03Z",
            "tool_call": {"name": "memory_replace", "arguments": "{}", "tool_call_id": "call-1"},
            "tool_calls": [{"name": "memory_replace", "arguments": "{}", "tool_call_id": "call-1"}], "run_id": "run-1"}
MSG_REASONING = {"id": "message-2", "message_type": "reasoning_message", "date": "2026-12-01T10:00:02Z",
                 "reasoning": "the user works on login", "run_id": "run-1"}
MSG_USER = {"id": "message-1", "message_type": "user_message", "date": "2026-12-01T10:00:01Z", "run_id": "run-1",
            "content": "<claude_code_session_start><project_id>github.com/acme/shop</project_id>"
                       "</claude_code_session_start>"}
LISTING_OK = [MSG_ASSISTANT, MSG_TOOL, MSG_REASONING, MSG_USER]  # newest first
STREAM_OK = [dict(MSG_REASONING, id="message-9"), dict(MSG_ASSISTANT, id="message-10", content="ECHO: hello"),
             {"message_type": "stop_reason", "stop_reason": "end_turn"},
             {"message_type": "usage_statistics", "step_count": 1}]


# --------------------------------------------------------------------------- the fake server

def sse(items, done: bool = True) -> bytes:
    raw = "".join(f"data: {i if isinstance(i, str) else json.dumps(i)}\n\n" for i in items)
    return (raw + ("data: [DONE]\n\n" if done else "")).encode()


@dataclass
class Answer:
    body: bytes
    ctype: str = "application/json"
    status: int = 200


def js(value) -> Answer:
    return Answer(json.dumps(value).encode())


VALID = {"agent": js(AGENT_OK), "listing": js(LISTING_OK), "create": js({"id": NEW_CONV, "agent_id": AGENT}),
         "stream": Answer(sse(STREAM_OK), "text/event-stream")}


class HostileLetta:
    """Answers ``GET agents/<id>`` ("agent"), ``GET conversations/<id>/messages`` ("listing": the first page;
    a page after a cursor is empty, the end), ``POST conversations/`` ("create") and ``POST
    conversations/<id>/messages`` ("stream") with ``answers[endpoint]``."""

    def __init__(self):
        self.answers = dict(VALID)
        self.hits: list[str] = []
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, a: Answer) -> None:
                self.send_response(a.status)
                self.send_header("Content-Type", a.ctype)
                self.send_header("Content-Length", str(len(a.body)))
                self.end_headers()
                try:
                    self.wfile.write(a.body)
                except OSError:  # the client gave up (its answer was enough to refuse)
                    pass

            def _route(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                url = urllib.parse.urlsplit(self.path)
                q = dict(urllib.parse.parse_qsl(url.query))
                parts = [p for p in url.path.split("/") if p][1:]
                endpoint = None
                if method == "GET" and parts[:1] == ["agents"] and len(parts) == 2:
                    endpoint = "agent"
                elif method == "GET" and parts[:1] == ["conversations"] and parts[2:] == ["messages"]:
                    if q.get("before") or q.get("after"):
                        return self._send(js([]))
                    endpoint = "listing"
                elif method == "POST" and parts == ["conversations"]:
                    endpoint = "create"
                elif method == "POST" and parts[:1] == ["conversations"] and parts[2:] == ["messages"]:
                    endpoint = "stream"
                if endpoint is None:
                    return self._send(Answer(b'{"detail": "not faked"}', status=404))
                fake.hits.append(endpoint)
                self._send(fake.answers[endpoint])

            def do_GET(self):
                self._route("GET")

            def do_POST(self):
                self._route("POST")

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def letta():
    fake = HostileLetta()
    yield fake
    fake.close()


@pytest.fixture(scope="module")
def world(tmp_path_factory, letta):
    """A shared home with one session whose conversation is on the fake server; the environment of a verb."""
    root = tmp_path_factory.mktemp("hostile")
    state = root / "lh" / ".letta" / "claude"
    store = Store(state, "laptop", root / "laptop" / "locks", root / "laptop" / "clocks")
    store.put_conversation(SESSION, CONV, AGENT)
    store.update_session(SESSION, lambda cur: SessionState(SESSION, conversation_id=CONV, agent_id=AGENT,
                                                           last_processed_index=3, started_at=DATE))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "CLAUDE")) and "proxy" not in k.lower()}
    env.update(HOME=str(root), LETTA_HOME=str(root / "lh"), SUBCONSCIOUS_STATE_DIR=str(root / "laptop"),
               SUBCONSCIOUS_HOST="laptop", LETTA_BASE_URL=letta.url, LETTA_AGENT_ID=AGENT, COLUMNS="120")
    return env


@contextlib.contextmanager
def environment(env: dict):
    saved, cwd = dict(os.environ), os.getcwd()
    os.environ.clear()
    os.environ.update(env)
    os.chdir(env["HOME"])
    try:
        yield
    finally:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(saved)


@dataclass
class Run:
    rc: int
    out: str
    err: str


def cli(capsys, env: dict, *argv: str) -> Run:
    """``subconscious ARGV`` in this process, as the console script runs it (stdout/stderr filtered)."""
    from subconscious.cli import _filtered_main
    from subconscious.commands import common

    common.last_error = None
    capsys.readouterr()
    with environment(env):
        try:
            rc = _filtered_main(list(argv), as_json="--json" in argv)
        except BaseException as exc:  # noqa: BLE001 - what the process would end in: a traceback
            out, err = capsys.readouterr()
            pytest.fail(f"subconscious {' '.join(argv)} raised {type(exc).__name__}: {str(exc)[:300]} (a traceback "
                        f"in the real process)\n{''.join(traceback.format_exc(limit=-6))}\nstderr: {err[:2000]}")
    out, err = capsys.readouterr()
    return Run(rc, out, err)


def one_line_failure(run: Run, verb: str) -> str:
    """A failure said as one line on stderr, ``subconscious VERB: …``, and a non-zero exit; no traceback."""
    assert "Traceback" not in run.err + run.out, run.err[-3000:]
    assert run.rc != 0, (run.rc, run.out[-2000:], run.err[-2000:])
    lines = run.err.splitlines()
    assert len(lines) == 1, run.err[-3000:]
    assert lines[0].startswith(f"subconscious {verb}: ") and len(lines[0]) < 2000, lines[0][:3000]
    return lines[0]


def no_traceback(run: Run, verb: str) -> None:
    """Either it worked (exit 0, nothing on stderr) or it failed in one line."""
    if run.rc == 0:
        assert run.err == "", run.err[-3000:]
        assert "Traceback" not in run.out
    else:
        one_line_failure(run, verb)


@contextlib.contextmanager
def answering(letta: HostileLetta, **answers: Answer):
    letta.answers.update(answers)
    letta.hits.clear()
    try:
        yield
    finally:
        letta.answers.update(VALID)


# --------------------------------------------------------------------------- the hostile shapes

def _deep(n: int, inner: str = "1") -> bytes:
    return ("[" * n + inner + "]" * n).encode()


def _deep_value(n: int = 300):
    v: object = "x"
    for _ in range(n):
        v = [v]
    return v


# the whole answer replaced; every one is wrong where an object is expected
WHOLE = {
    "a list": js([AGENT_OK]),
    "an empty list": js([]),
    "null": js(None),
    "text": js("agent"),
    "a number": js(42),
    "a float": js(1.5),
    "true": js(True),
    "an empty object": js({}),
    "an empty body": Answer(b""),
    "not JSON": Answer(b"<html><body>502 Bad Gateway</body></html>"),
    "NaN": Answer(b"NaN"),
    "1e999": Answer(b"1e999"),
    "a 5000-digit number": Answer(b"1" * 5000),
    "not UTF-8": Answer(b'\xff\xfe{"id": "\xc3\x28"}'),
    "nested too deep (list)": Answer(_deep(100_000)),
    "nested too deep (object)": Answer(b'{"a":' * 50_000 + b"1" + b"}" * 50_000),
    "nested 900 deep": Answer(_deep(900)),
    "a huge list": js([0] * 500_000),
    "a huge string": js("x" * 3_000_000),
}
# where a list is expected: an object (and the rest of WHOLE, but for the empty list, which is a valid listing)
WHOLE_LISTING = {**{k: v for k, v in WHOLE.items() if k not in ("a list", "an empty list")},
                 "an object holding the list": js({"messages": LISTING_OK}),
                 "a list of numbers": js([1, 2, 3]),
                 "a list of lists": js([LISTING_OK]),
                 "a list of nulls": js([None]),
                 "a list of text": js(["message-1"])}

WRONG = {"a list": [1], "an object": {"a": 1}, "a number": 5, "a float": 2.5, "true": True, "text": "x",
         "null": None, "a deep list": _deep_value()}
KIND = {"a list": "list", "an object": "object", "a number": "int", "a float": "float", "true": "bool", "text": "str",
        "null": "null", "a deep list": "list"}


def mutations(valid, fields: dict[tuple, set[str]]):
    """(id, answer, wrong?) for each field path of ``valid`` given each value of WRONG (wrong when its kind is not
    among the path's valid kinds) and taken away (wrong when "required" is among them)."""
    out = []
    for path, kinds in fields.items():
        name = ".".join(map(str, path))
        for label, value in WRONG.items():
            if KIND[label] in kinds:
                continue
            doc = copy.deepcopy(valid)
            parent = doc
            for key in path[:-1]:
                parent = parent[key]
            parent[path[-1]] = copy.deepcopy(value)
            out.append((f"{name} is {label}", doc, True))
        if isinstance(path[-1], str):
            doc = copy.deepcopy(valid)
            parent = doc
            for key in path[:-1]:
                parent = parent[key]
            del parent[path[-1]]
            out.append((f"{name} missing", doc, "required" in kinds))
    return out


TEXT_OR_NULL = {"str", "null"}
AGENT_FIELDS = {("id",): {"str", "required"}, ("name",): TEXT_OR_NULL, ("blocks",): {"list", "null"},
                ("blocks", 0): {"object"}, ("blocks", 0, "label"): {"str", "required"},
                ("blocks", 0, "value"): TEXT_OR_NULL, ("blocks", 0, "description"): TEXT_OR_NULL,
                ("blocks", 0, "limit"): {"int", "null"}, ("blocks", 0, "id"): TEXT_OR_NULL}


def message_fields(prefix: tuple, kinds_of: dict) -> dict:
    return {prefix + (key,): kinds for key, kinds in kinds_of.items()}


COMMON = {"id": TEXT_OR_NULL, "message_type": TEXT_OR_NULL, "date": TEXT_OR_NULL, "run_id": TEXT_OR_NULL}
LISTING_FIELDS = {(0,): {"object"}, **message_fields((0,), {**COMMON, "content": {"str", "list", "null"}}),
                  **message_fields((3,), {"content": {"str", "list", "null"}}),
                  **message_fields((2,), {"reasoning": TEXT_OR_NULL}),
                  **message_fields((1,), {"tool_call": {"object", "null"}, "tool_calls": {"list", "null"}})}
STREAM_FIELDS = {(1,): {"object"}, **message_fields((1,), {**COMMON, "content": {"str", "list", "null"}}),
                 **message_fields((0,), {"reasoning": TEXT_OR_NULL}),
                 (2, "stop_reason"): {"str", "object", "null"}}


def cases(whole: dict, valid, fields: dict):
    return ([pytest.param(answer, True, id=f"whole answer: {name}") for name, answer in whole.items()]
            + [pytest.param(js(doc), wrong, id=name) for name, doc, wrong in mutations(valid, fields)])


AGENT_CASES = cases(WHOLE, AGENT_OK, AGENT_FIELDS)
LISTING_CASES = cases(WHOLE_LISTING, LISTING_OK, LISTING_FIELDS)
CREATE_CASES = [pytest.param(a, True, id=f"whole answer: {n}") for n, a in WHOLE.items()] + [
    pytest.param(js(doc), True, id=name) for name, doc in {
        "id is a number": {"id": 5}, "id is null": {"id": None}, "id is an object": {"id": {"id": NEW_CONV}},
        "id is a path": {"id": "../../agents/x"}, "id missing": {"agent_id": AGENT},
        "id is huge": {"id": "conv-" + "a" * 1_000_000}}.items()]
STREAM_WHOLE = {
    "an event that is a list": Answer(sse([json.dumps(STREAM_OK)]), "text/event-stream"),
    "an event that is a number": Answer(sse(["5"]), "text/event-stream"),
    "an event that is null": Answer(sse(["null"]), "text/event-stream"),
    "an event that is text": Answer(sse(['"hello"']), "text/event-stream"),
    "an event that is not JSON": Answer(sse(["{oops"]), "text/event-stream"),
    "an event nested too deep": Answer(sse([_deep(100_000).decode()]), "text/event-stream"),
    "an event nested 900 deep": Answer(sse([_deep(900).decode()]), "text/event-stream"),
    "a huge event": Answer(sse([json.dumps([0] * 500_000)]), "text/event-stream"),
    "the stream ends before the run": Answer(sse(STREAM_OK[:2], done=False), "text/event-stream"),
    "an empty stream": Answer(b"", "text/event-stream"),
    "JSON instead of a stream": js(STREAM_OK),
    "an error event whose fields are deep": Answer(sse([json.dumps(
        {"error": {"message": _deep_value(), "error_type": {"a": [1]}, "detail": _deep_value()}})]),
        "text/event-stream"),
    "an error event that is a list": Answer(b"event: error\ndata: [1, 2]\n\n", "text/event-stream"),
}
STREAM_CASES = [pytest.param(a, True, id=f"stream: {n}") for n, a in STREAM_WHOLE.items()] + [
    pytest.param(Answer(sse(doc), "text/event-stream"), wrong, id=f"stream item {name}")
    for name, doc, wrong in mutations(STREAM_OK, STREAM_FIELDS)]


# --------------------------------------------------------------------------- valid answers keep working

def test_valid_answers_work_as_before(capsys, world, letta, tmp_path):
    memory = cli(capsys, world, "memory")
    assert memory.rc == 0 and memory.err == "", memory.err
    assert "Subconscious" in memory.out and "guidance" in memory.out and "prefers tabs" in memory.out
    data = json.loads(cli(capsys, world, "memory", "--json").out)
    assert [b["label"] for b in data["blocks"]] == ["guidance"] and data["blocks"][0]["limit"] == 5000

    messages = json.loads(cli(capsys, world, "messages", "--json").out)
    assert [m["text"] for m in messages["messages"]] == [MSG_ASSISTANT["content"]] and messages["errors"] == []
    shown = cli(capsys, world, "messages")
    assert shown.rc == 0 and shown.err == "" and "flaky test" in shown.out

    sessions = json.loads(cli(capsys, world, "sessions", "--json").out)
    row, = sessions["sessions"]
    assert (row["project"], row["last_delivery"], sessions["errors"]) == ("github.com/acme/shop", MSG_USER["date"], [])

    ask = cli(capsys, dict(world, LETTA_HOME=str(tmp_path / "ask")), "ask", "hello")
    assert ask.rc == 0 and ask.err == "" and "ECHO: hello" in ask.out, (ask.out, ask.err)
    assert letta.hits[-2:] == ["create", "stream"]

    huge = dict(AGENT_OK, blocks=[dict(BLOCK, value="line of memory\n" * 150_000, limit=None), *[
        dict(BLOCK, label=f"b{i}", id=None, description=None) for i in range(500)]])
    with answering(letta, agent=js(huge)):
        data = json.loads(cli(capsys, world, "memory", "--json").out)
    assert len(data["blocks"]) == 501 and data["blocks"][-1]["size"] == len("line of memory\n") * 150_000


# --------------------------------------------------------------------------- hostile answers, verb by verb

def both_modes(params):
    """Each case as text; the whole-answer ones under ``--json`` too (the fields fail the same check)."""
    return [pytest.param(*p.values, mode, id=f"{p.id} ({mode})") for p in params
            for mode in (("text", "json") if p.id.startswith(("whole", "stream:")) else ("text",))]


@pytest.mark.parametrize("answer,wrong,mode", both_modes(AGENT_CASES))
def test_memory(capsys, world, letta, answer, wrong, mode):
    with answering(letta, agent=answer):
        run = cli(capsys, world, "memory", *(["--json"] if mode == "json" else []))
    assert letta.hits == ["agent"]
    if not wrong:
        assert run.rc == 0 and run.err == "", run.err
        return
    line = one_line_failure(run, "memory")
    assert line.startswith("subconscious memory: reading agent")
    if mode == "json":
        error = json.loads(run.out)  # under --json: one JSON object on stdout too
        assert error["exit"] == 1 and error["kind"] == "server" and error["error"] in line


@pytest.mark.parametrize("answer,wrong", LISTING_CASES)
def test_messages(capsys, world, letta, answer, wrong):
    with answering(letta, listing=answer):
        run = cli(capsys, world, "messages")
    assert letta.hits[:1] == ["listing"]
    if not wrong:
        no_traceback(run, "messages")
        return
    line = one_line_failure(run, "messages")
    assert "1 of 1 conversations could not be read" in line and "listing messages" in line


@pytest.mark.parametrize("answer,wrong,mode", both_modes(LISTING_CASES))
def test_sessions_tolerates_and_says_which_conversation(capsys, world, letta, answer, wrong, mode):
    """``sessions`` shows the state files' facts whatever the server says: the row's error is in ``errors``
    (exit 0, as with the server down)."""
    with answering(letta, listing=answer):
        run = cli(capsys, world, "sessions", *(["--json"] if mode == "json" else []))
    assert run.rc == 0 and run.err == "" and "Traceback" not in run.out, run.err[-3000:]
    if mode == "text":
        assert SESSION in run.out and (not wrong or f"! session {SESSION}: listing messages" in run.out), run.out
        return
    data = json.loads(run.out)
    assert [r["session"] for r in data["sessions"]] == [SESSION]
    if wrong:
        assert [e["session"] for e in data["errors"]] == [SESSION] and "listing messages" in data["errors"][0]["error"]


@pytest.mark.parametrize("answer,wrong", CREATE_CASES)
def test_ask_new_conversation(capsys, world, letta, tmp_path, answer, wrong):
    with answering(letta, create=answer):
        run = cli(capsys, dict(world, LETTA_HOME=str(tmp_path / "h")), "ask", "hello")
    assert letta.hits == ["create"]  # nothing sent on a conversation the answer did not name
    assert "creating a conversation" in one_line_failure(run, "ask")
    # and nothing recorded: the next ask creates one again
    again = cli(capsys, dict(world, LETTA_HOME=str(tmp_path / "h")), "ask", "hello")
    assert again.rc == 0 and letta.hits == ["create", "create", "stream"], (again.err, letta.hits)


@pytest.mark.parametrize("answer,wrong,mode", both_modes(STREAM_CASES))
def test_ask_stream(capsys, world, letta, tmp_path, answer, wrong, mode):
    """Printed as it streams (text) or gathered (``--json``): the whole-stream shapes both ways, the item
    fields printed as they come."""
    with answering(letta, stream=answer):
        run = cli(capsys, dict(world, LETTA_HOME=str(tmp_path / "h")), "ask", "hello",
                  *(["--json"] if mode == "json" else []))
    assert letta.hits == ["create", "stream"]
    if wrong:
        one_line_failure(run, "ask")
    else:
        no_traceback(run, "ask")


# --------------------------------------------------------------------------- the same through the viewer

def test_the_viewers_memory_section_says_what_was_not_understood(world, letta):
    from subconscious.viewer.backend import SeeBackend
    from subconscious.viewer.server import BackendError

    backend = SeeBackend(env=world, cwd=world["HOME"])
    with answering(letta, agent=js([AGENT_OK])):
        for section in ("memory", "history"):
            with pytest.raises(BackendError, match="the server's answer was not understood: the answer is a list"):
                backend.section(section)
        with pytest.raises(BackendError, match="not understood"):
            backend.edit_block("guidance", "new value", None)
    with answering(letta, listing=js([dict(MSG_ASSISTANT, content=5)])):
        data = backend.section("messages")
    assert data["messages"] == [] and "0].content is a number" in data["errors"][0]["error"]


# --------------------------------------------------------------------------- the real processes

@pytest.mark.parametrize("verb,endpoint,answer,expect", [
    (("memory",), "agent", js([AGENT_OK]), "the answer is a list, expected an object"),
    (("memory",), "agent", js(dict(AGENT_OK, blocks=[dict(BLOCK, value={"text": "x"})])),
     "blocks[0].value is an object, expected text or null"),
    (("messages",), "listing", js([dict(MSG_ASSISTANT, content=5)]), "messages[0].content is a number"),
    (("ask", "hi"), "stream", Answer(sse([dict(MSG_TOOL, tool_call=[1])]), "text/event-stream"),
     "tool_call is a list, expected an object or null"),
], ids=["memory: a list", "memory: a block's value an object", "messages: content a number",
        "ask: a tool call a list"])
def test_the_command_line_process(world, letta, tmp_path, verb, endpoint, answer, expect):
    env = dict(world, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), world.get("PYTHONPATH")])))
    if verb[0] == "ask":
        env["LETTA_HOME"] = str(tmp_path / "h")
    with answering(letta, **{endpoint: answer}):
        proc = subprocess.run([sys.executable, "-m", "subconscious", *verb], env=env, cwd=env["HOME"],
                              capture_output=True, text=True, timeout=60)
    line = one_line_failure(Run(proc.returncode, proc.stdout, proc.stderr), verb[0])
    assert expect in line and letta.url in line  # what was wrong, and which server said it



# --- red team of this file's changes (each red before) -----------------------------------------------

RT_KEY = "sk-let-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def test_error_status_with_deeply_nested_body_is_one_line(capsys, world, letta):
    # 500 whose body is JSON nested too deep: errors.detail_of catches ValueError only -> RecursionError
    with answering(letta, agent=Answer(_deep(100000), status=500)):
        run = cli(capsys, world, "memory")
    one_line_failure(run, "memory")


def test_http_error_detail_cannot_carry_the_key_split_by_invisibles(capsys, world, letta):
    # redact() runs before termtext.clean(): a ZWSP every 5 chars defeats the 6-char windows, clean() rejoins
    split = "\u200b".join(RT_KEY[i:i + 5] for i in range(0, len(RT_KEY), 5))
    body = json.dumps({"detail": "invalid token " + split}).encode()
    with answering(letta, agent=Answer(body, status=401)):
        run = cli(capsys, dict(world, LETTA_API_KEY=RT_KEY), "memory")
    assert RT_KEY not in run.err + run.out, run.err


def test_stream_error_event_cannot_carry_the_key(capsys, world, letta, tmp_path):
    # sse.stream_error / interpret build details from the server's text with no redact() at all
    stream = Answer(sse([MSG_REASONING, {"message_type": "error_message", "message": "provider refused key " + RT_KEY}]),
                    "text/event-stream")
    with answering(letta, stream=stream):
        run = cli(capsys, dict(world, LETTA_API_KEY=RT_KEY, LETTA_HOME=str(tmp_path / "h")), "ask", "hello")
    assert RT_KEY not in run.err + run.out, run.err


def test_lite_error_status_with_deep_body_is_a_letta_error(letta):
    # the hooks' client: a RecursionError (not LettaError) escapes get_agent
    from subconscious.letta import lite
    from subconscious.letta.errors import LettaError

    with answering(letta, agent=Answer(_deep(100000), status=500)):
        with pytest.raises(LettaError):
            lite.get_agent(letta.url, AGENT, timeout=5)
