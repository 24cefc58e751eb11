"""The served-mode bash client (subconscious/served/client.bash), run by the real bash exactly as a settings
file written by ``install --served`` runs it, against the real server (real handlers, a fake Letta) and
against the ways a server can fail: none listening, one that accepts and never answers, one that answers
401, 500 or garbage. Whatever fails, the hook prints nothing and exits 0 within its wait — the silent skip."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time

import pytest

from subconscious.served import client_script
from subconscious.served.token import ensure_token
from subconscious.settingsfile import CLIENT_NAME, FORWARDED_VARS, served_hooks
from tests.harness.letta_server import free_port
from tests.unit.test_injection_hooks import Session, letta  # noqa: F401 - the fixture
from tests.unit.test_install_properties import OURS
from tests.unit.test_served import served  # noqa: F401 - the fixture: the real server in this process

BASH = shutil.which("bash")


def hook_argv(event: str, port: int) -> list[str]:
    """The handler install --served writes, as Claude Code spawns it (exec form: no shell of its own)."""
    handlers = [h for g in served_hooks(OURS, port, (BASH, client_script()))[
        {"pre-tool-use": "PreToolUse", "user-prompt-submit": "UserPromptSubmit"}[event]] for h in g["hooks"]]
    (h,) = [h for h in handlers if h.get("args", [None] * 3)[2:3] == [CLIENT_NAME]]
    return [h["command"], *h["args"]]


def run_client(event: str, port: int, data: dict, env: dict, timeout: float = 30) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    p = subprocess.run(hook_argv(event, port), input=json.dumps(data), capture_output=True, text=True,
                       env=env, timeout=timeout)
    return p, time.monotonic() - started


def client_env(s, **extra) -> dict:
    return {"PATH": "/usr/bin:/bin", "HOME": str(s.tmp / "user"),
            **{k: v for k, v in s.env.items() if k in FORWARDED_VARS}, **extra}


def test_the_agents_note_comes_back_through_the_client_with_the_token_from_the_state_dir(served, letta):  # noqa: F811
    s, server, token = served
    conv = s.seed()
    letta.say(conv, "a note for the next tool call")
    env = client_env(s)
    assert "SUBCONSCIOUS_SERVE_TOKEN" not in env  # read from <state dir>/serve/token
    p, _ = run_client("pre-tool-use", server.server_address[1], s.data("pre-tool-use"), env)
    assert (p.returncode, p.stderr) == (0, "")
    assert "a note for the next tool call" in json.loads(p.stdout)["hookSpecificOutput"]["additionalContext"]
    # shown once: the next call has nothing to say
    letta.say(conv, "a second note")
    p, _ = run_client("user-prompt-submit", server.server_address[1], s.data("user-prompt-submit"), env)
    context = json.loads(p.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "a second note" in context and "a note for the next tool call" not in context


def test_the_settings_reach_the_server_as_claude_codes_and_no_line_break_gets_into_a_header(served, letta):  # noqa: F811
    """The client forwards Claude Code's settings (not LETTA_API_KEY); a value with CR/LF is sent without them."""
    s, server, token = served
    seen: list[dict] = []
    real = server.RequestHandlerClass.do_POST

    def spy(handler):
        seen.append(dict(handler.headers))
        return real(handler)

    server.RequestHandlerClass.do_POST = spy
    try:
        env = client_env(s, LETTA_MODE="off", LETTA_API_KEY="sk-never-sent",
                         SUBCONSCIOUS_HOST="lap\r\nX-Injected: 1")
        p, _ = run_client("pre-tool-use", server.server_address[1], s.data("pre-tool-use"), env)
    finally:
        server.RequestHandlerClass.do_POST = real
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    (headers,) = seen
    assert headers["X-Subconscious-Env-LETTA_MODE"] == "off"
    assert headers["X-Subconscious-Env-SUBCONSCIOUS_HOST"] == "lapX-Injected: 1"
    assert "X-Injected" not in headers and not any("sk-never-sent" in v for v in headers.values())


def close(s: socket.socket) -> None:
    """Stop listening now: a thread blocked in accept() keeps a closed socket listening until it wakes."""
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()


def accepting_never_answering(port: int) -> tuple[socket.socket, list]:
    held: list = []
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(16)

    def accept():
        try:
            while True:
                held.append(s.accept()[0])
        except OSError:
            pass

    threading.Thread(target=accept, daemon=True).start()
    return s, held


def read_request(c: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = c.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        chunk = c.recv(65536)
        if not chunk:
            break
        body += chunk
    return data


def answering(port: int, reply: bytes, hold: bool = False) -> socket.socket:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(16)
    kept: list = []

    def serve():
        try:
            while True:
                c, _ = s.accept()
                read_request(c)  # all of it: closing with unread bytes would reset the connection
                c.sendall(reply)
                if hold:  # half an answer, then nothing: the connection stays open
                    kept.append(c)
                else:
                    c.close()
        except OSError:
            pass

    threading.Thread(target=serve, daemon=True).start()
    return s


@pytest.mark.parametrize("event,limit", [("pre-tool-use", 5.0), ("user-prompt-submit", 10.0)])
def test_every_failure_is_a_silent_skip_inside_the_hooks_timeout(tmp_path, event, limit):
    """The hook timeouts install writes are 5 s and 10 s: the client gives up before them (4 s, 9 s)."""
    local = tmp_path / "local"
    ensure_token(local)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "SUBCONSCIOUS_STATE_DIR": str(local)}
    data = {"session_id": "s1", "hook_event_name": "PreToolUse"}
    port = free_port()
    p, took = run_client(event, port, data, env)  # nothing listens
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "") and took < 1
    for reply in (b"HTTP/1.0 401 Unauthorized\r\nContent-Length: 0\r\n\r\n",
                  b"HTTP/1.0 500 Oops\r\n\r\n{\"systemMessage\": \"boom\"}", b"garbage", b""):
        s = answering(port, reply)
        try:
            p, took = run_client(event, port, data, env)
        finally:
            close(s)
        assert (p.returncode, p.stdout, p.stderr) == (0, "", ""), reply
    s, held = accepting_never_answering(port)
    try:
        p, took = run_client(event, port, data, env)
    finally:
        close(s)
        for c in held:
            c.close()
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    assert held and limit - 1.5 < took < limit, took  # it waited, then gave up before Claude Code would
    # half an answer, then a stall: nothing of it is printed (Claude Code would parse a cut JSON)
    s = answering(port, b'HTTP/1.0 200 OK\r\nContent-Length: 90\r\n\r\n{"hookSpecificOutput": {"hookEvent', hold=True)
    try:
        p, took = run_client(event, port, data, env)
    finally:
        close(s)
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "") and took < limit
    # no token anywhere: nothing is sent
    (local / "serve" / "token").unlink()
    s, held = accepting_never_answering(port)
    try:
        p, took = run_client(event, port, data, env)
        time.sleep(0.2)
    finally:
        close(s)
    assert (p.returncode, p.stdout) == (0, "") and not held and took < 1


def test_an_answer_without_a_trailing_newline_and_with_every_byte_value_comes_out_whole(tmp_path):
    local = tmp_path / "local"
    ensure_token(local)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "SUBCONSCIOUS_STATE_DIR": str(local)}
    body = json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "additionalContext":
                                              "é ✓ \\ % %s $HOME `x` \r\n\r\n" + "z" * 70000}}, ensure_ascii=False)
    raw = body.encode()
    port = free_port()
    s = answering(port, b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(raw) + raw)
    try:
        p = subprocess.run(hook_argv("pre-tool-use", port), input=json.dumps({"session_id": "s"}).encode(), env=env,
                           capture_output=True, timeout=30)
    finally:
        close(s)
    assert p.returncode == 0 and p.stdout == raw
