"""Served mode (``subconscious serve``) in process: the real server, the real handlers, a fake Letta on
127.0.0.1 — a request without this user's token is refused and runs nothing; with it, the agent's note comes
back as the hook's JSON and is recorded as shown once the answer is out (the next request does not show it
again). Plus the pure parts: the environment a request gets, ``install --served`` switching and back."""

from __future__ import annotations

import http.client
import subprocess
import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from subconscious.served.server import HookServer, answer_body, request_env, serve_in_thread
from subconscious.local.servetoken import ensure_token, read_token, token_path
from subconscious.local.settingsfile import (ENV_HEADER, FORWARDED_VARS, TOKEN_HEADER, count_ours, install, is_ours,
                                       served_hooks, uninstall)
from tests.harness.letta_server import free_port
from tests.unit.test_injection_hooks import Session, letta  # noqa: F401 - the fixture
from tests.unit.test_install_properties import OURS, settings_without_ours

# one xdist worker runs these modules one test at a time: a test here opens 120,000 listening sockets
# machine-wide, and the served client beside it would give up on its walk of /proc/net/tcp (tests/conftest.py)
XDIST_GROUP = "served-client"

SERVED = served_hooks(OURS, 21999)


@pytest.fixture
def served(tmp_path, letta):  # noqa: F811
    s = Session(tmp_path, letta)
    token = ensure_token(tmp_path / "local")
    server = HookServer(0, token, tmp_path / "local", env=s.env)
    serve_in_thread(server)
    yield s, server, token
    server.shutdown()
    server.server_close()


def post(server, event: str, data: dict, headers: dict) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=30)
    try:
        conn.request("POST", f"/subconscious/hook/{event}", body=json.dumps(data),
                     headers={"Content-Type": "application/json", **headers})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def wait_for(check, seconds: float = 10.0) -> bool:
    """The server records what it showed right after the answer is out: the client may look first."""
    end = time.monotonic() + seconds
    while not check():
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


def fetches(letta) -> list[str]:  # noqa: F811
    return [r for r in letta.requests if "/messages" in r]


def test_without_the_token_a_request_is_refused_and_runs_nothing(served, letta):  # noqa: F811
    s, server, token = served
    conv = s.seed()
    letta.say(conv, "a note for the next tool call")
    for headers in ({}, {TOKEN_HEADER: ""}, {TOKEN_HEADER: "0" * 48}, {TOKEN_HEADER: token[:-1]}):
        for event in ("pre-tool-use", "user-prompt-submit"):
            status, body = post(server, event, s.data(event), headers)
            assert (status, body) == (401, b""), headers
    assert fetches(letta) == []  # no handler ran
    status, body = post(server, "pre-tool-use", s.data("pre-tool-use"), {TOKEN_HEADER: token})
    assert status == 200 and "a note for the next tool call" in json.loads(body)["hookSpecificOutput"]["additionalContext"]


def test_what_is_answered_is_recorded_as_shown_and_not_shown_again(served, letta):  # noqa: F811
    s, server, token = served
    conv = s.seed()
    first = letta.say(conv, "first note")
    status, body = post(server, "user-prompt-submit", s.data("user-prompt-submit"), {TOKEN_HEADER: token})
    out = json.loads(body)["hookSpecificOutput"]  # the prompt hook's text, as an http hook must send it
    assert status == 200 and out["hookEventName"] == "UserPromptSubmit" and "first note" in out["additionalContext"]
    # recorded as shown once it was sent: the session's watermark moved over it (no claim left to time out,
    # after which it would be shown again)
    assert wait_for(lambda: s.store().session(s.sid).last_seen_message_id == first)
    status, body = post(server, "pre-tool-use", s.data("pre-tool-use"), {TOKEN_HEADER: token})
    assert (status, body) == (200, b"")  # fetched again (TTL 0), nothing new: an empty answer
    letta.say(conv, "second note")
    status, body = post(server, "pre-tool-use", s.data("pre-tool-use"), {TOKEN_HEADER: token})
    context = json.loads(body)["hookSpecificOutput"]["additionalContext"]
    assert "second note" in context and "first note" not in context
    # one fetch a prompt: first pages (the first look-back, with no watermark yet, pages on to the empty page
    # that ends a listing: Letta's limit counts rows, so a short page is no end)
    assert len([r for r in fetches(letta) if "before=" not in r]) == 3, fetches(letta)


def test_claude_codes_mode_wins_over_the_servers(served, letta):  # noqa: F811
    s, server, token = served
    conv = s.seed()
    letta.say(conv, "a note")
    status, body = post(server, "pre-tool-use", s.data("pre-tool-use"),
                        {TOKEN_HEADER: token, ENV_HEADER + "LETTA_MODE": "off"})
    assert (status, body) == (200, b"") and fetches(letta) == []  # off in Claude Code's env: nothing at all
    status, body = post(server, "pre-tool-use", s.data("pre-tool-use"),
                        {TOKEN_HEADER: token, ENV_HEADER + "LETTA_MODE": ""})  # unset there: the server's
    assert status == 200 and "a note" in body.decode()


def test_malformed_or_unknown_requests_get_no_error_answer(served):
    s, server, token = served
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=30)
    conn.request("POST", "/subconscious/hook/pre-tool-use", body=b"{not json", headers={TOKEN_HEADER: token})
    resp = conn.getresponse()
    assert (resp.status, resp.read()) == (200, b"")  # a silent skip, as a command hook with bad stdin
    conn.request("POST", "/subconscious/hook/stop", body=b"{}", headers={TOKEN_HEADER: token})
    resp = conn.getresponse()
    assert resp.status == 404 and resp.read() == b""  # on the same kept-alive connection
    conn.close()


names = st.sampled_from(list(FORWARDED_VARS) + ["PATH", "LETTA_DEBUG", "OTHER"])


@given(st.dictionaries(names, st.text(max_size=4)), st.dictionaries(names, st.text(max_size=4)))
def test_a_request_gets_claude_codes_value_where_it_has_one_and_the_servers_elsewhere(base, given_vars):
    headers = {ENV_HEADER + k: v for k, v in given_vars.items()}
    env = request_env(base, headers)
    for name in set(base) | set(given_vars):
        if name in FORWARDED_VARS and given_vars.get(name):
            assert env[name] == given_vars[name]
        else:
            assert env.get(name) == base.get(name)  # not forwarded, or empty there: untouched


def test_answer_body_wraps_the_prompt_text_only():
    assert answer_body("pre-tool-use", '{"hookSpecificOutput": {}}') == b'{"hookSpecificOutput": {}}'
    assert json.loads(answer_body("user-prompt-submit", "hi <x>"))["hookSpecificOutput"]["additionalContext"] == "hi <x>"
    assert answer_body("user-prompt-submit", None) == b""


@given(settings_without_ours)
def test_install_served_switches_two_hooks_and_back_and_uninstall_removes_both_kinds(s):
    served = install(s, SERVED)
    assert install(served, SERVED) == served  # idempotent
    assert count_ours(served) == count_ours(install(s, OURS))
    http_hooks = [h for gs in served["hooks"].values() for g in gs for h in g["hooks"] if h.get("type") == "http"]
    assert sorted(h["url"].rsplit("/", 1)[1] for h in http_hooks if is_ours(h)) == ["pre-tool-use", "user-prompt-submit"]
    assert all("$" not in json.dumps(h["headers"]).replace("${", "") for h in http_hooks)  # no token written
    assert install(served, OURS) == install(s, OURS)  # back to command hooks, as if never served
    assert uninstall(served) == (s, count_ours(served))


@given(settings_without_ours)
def test_the_bash_client_switches_with_the_other_two_kinds_and_uninstall_finds_it(s):
    from subconscious.served import client_script
    from subconscious.local.settingsfile import is_served_client

    client = served_hooks(OURS, 21999, ("/bin/bash", client_script()))
    with_client = install(s, client)
    assert install(with_client, client) == with_client
    assert count_ours(with_client) == count_ours(install(s, OURS))
    clients = [h for gs in with_client["hooks"].values() for g in gs for h in g["hooks"] if is_served_client(h)]
    assert sorted(h["args"][3] for h in clients) == ["pre-tool-use", "user-prompt-submit"]
    assert all(h["type"] == "command" and h["args"][4] == "21999" for h in clients)
    assert all(h["args"][:3] == ["-c", client_script(), "subconscious-served"] for h in clients)  # no token in it
    for other in (OURS, SERVED):
        assert install(with_client, other) == install(s, other)
        assert install(install(s, other), client) == with_client
    assert uninstall(with_client) == (s, count_ours(with_client))


def test_the_token_is_made_once_private_and_a_damaged_one_is_kept_aside(tmp_path):
    root = tmp_path / "state"
    token = ensure_token(root)
    assert ensure_token(root) == token == read_token(root)
    path = token_path(root)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    path.write_text("short\n")
    fresh = ensure_token(root)
    assert fresh != token and len(fresh) == 48
    assert [p.read_text() for p in path.parent.glob("token.damaged-*")] == ["short\n"]


def server_env(tmp: Path, state: Path, **extra: str) -> dict:
    """What a started ``subconscious serve`` gets: PATH, a HOME under ``tmp``, its local state dir and this
    checkout importable (plus ``extra``)."""
    return {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp), "SUBCONSCIOUS_STATE_DIR": str(state),
            "PYTHONPATH": os.pathsep.join(sys.path), **extra}


def test_session_start_starts_the_server_only_in_served_mode_and_only_when_nothing_answers(tmp_path):
    import signal
    import socket

    from subconscious.local.autostart import answering, disable, enable, ensure, marker_path

    root = tmp_path / "local"
    env = server_env(tmp_path, root)
    port = free_port()
    assert ensure(marker_path(root), env) is None  # served mode off: nothing started
    with socket.socket() as taken:  # something answers on the port: nothing started
        taken.bind(("127.0.0.1", port))
        taken.listen(1)
        enable(root, port)
        assert ensure(marker_path(root), env) is None
    pid = ensure(marker_path(root), env, wait=10.0)
    try:
        assert pid is not None and answering(port)
        assert ensure(marker_path(root), env) is None  # the one it started answers now
    finally:
        os.kill(pid, signal.SIGTERM)
        os.waitpid(pid, 0)
    assert disable(root) and not marker_path(root).exists()


def test_serve_answers_on_the_socket_a_service_manager_passes(tmp_path):
    """systemd socket activation: the port is held by the service manager, serve gets it as fd 3."""
    import signal
    import socket
    import subprocess

    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen(8)
    port = listening.getsockname()[1]
    env = server_env(tmp_path, tmp_path / "s", LISTEN_FDS="1")
    fd = listening.fileno()
    as_systemd_does = ("import os, sys; os.dup2(int(sys.argv[1]), 3); os.environ['LISTEN_PID'] = str(os.getpid()); "
                       "os.execv(sys.executable, [sys.executable, '-m', 'subconscious', 'serve', '--quiet'])")
    proc = subprocess.Popen([sys.executable, "-c", as_systemd_does, str(fd)], env=env, pass_fds=(fd,),
                            stderr=subprocess.PIPE)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/subconscious/health")  # accepted by the passed socket even before serve is up
        resp = conn.getresponse()
        assert (resp.status, json.loads(resp.read())) == (200, {"ok": True})
        conn.request("POST", "/subconscious/hook/pre-tool-use", body=b"{}")
        assert conn.getresponse().status == 401  # the token is required there too
        conn.close()
        record = json.loads((tmp_path / "s" / "serve" / "server.json").read_text())
        assert record == {"pid": proc.pid, "port": port}
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
        listening.close()
    assert proc.returncode == 0, err.decode()


def test_a_server_that_accepts_but_never_answers_is_replaced_at_the_next_session_start(tmp_path):
    import signal

    from subconscious.local.autostart import answering, enable, ensure, healthy, marker_path

    root = tmp_path / "local"
    env = server_env(tmp_path, root)
    port = free_port()
    enable(root, port)
    first = ensure(marker_path(root), env, wait=10.0)
    started = [first]
    try:
        end = time.monotonic() + 10
        while not (root / "serve" / "server.json").exists() and time.monotonic() < end:
            time.sleep(0.02)
        os.kill(first, signal.SIGSTOP)  # wedged: the kernel still accepts, nothing answers
        assert answering(port) and not healthy(port, timeout=0.5)
        second = ensure(marker_path(root), env, wait=10.0)
        started.append(second)
        assert second not in (None, first) and healthy(port)
        with pytest.raises(ProcessLookupError):  # the wedged one is gone (killed, then reaped)
            for _ in range(200):
                os.kill(first, 0)
                try:
                    os.waitpid(first, os.WNOHANG)
                except ChildProcessError:
                    pass
                time.sleep(0.01)
    finally:
        for pid in started:
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                except (ProcessLookupError, ChildProcessError):
                    pass


NOBODY = 65534


def as_another_user(argv: list[str]) -> list[str]:
    """``argv`` run as a second real uid (nobody), the attacker with an ordinary account on this machine."""
    import shutil

    if os.geteuid() != 0:
        pytest.fail("a second real uid needs these tests to run as root (setpriv to nobody)")
    if not shutil.which("setpriv"):
        pytest.fail("running as a second uid needs setpriv (util-linux)")
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *argv]


class Recorder:
    """A listener that records every byte anyone sends it (where a redirected key would land)."""

    def __init__(self):
        import socket
        import threading

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.received = b""
        self.connections = 0

        def run():
            try:
                while True:
                    c, _ = self.sock.accept()
                    self.connections += 1
                    c.settimeout(2)
                    try:
                        while chunk := c.recv(65536):
                            self.received += chunk
                    except OSError:
                        pass
                    c.close()
            except OSError:
                pass

        threading.Thread(target=run, daemon=True).start()

    def close(self):
        import socket

        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def test_a_request_naming_another_letta_server_never_gets_the_key_sent_there(tmp_path, letta):  # noqa: F811
    """issue 22: another user with the token sends X-Subconscious-Env-LETTA_BASE_URL pointing at its own
    listener; the server keeps to the Letta server it was started with, and the key goes nowhere else."""
    s = Session(tmp_path, letta, LETTA_API_KEY="sk-let-this-never-leave")
    token = ensure_token(tmp_path / "local")
    server = HookServer(0, token, tmp_path / "local", env=s.env)
    serve_in_thread(server)
    recorder = Recorder()
    conv = s.seed()
    letta.say(conv, "a note from the real server")
    request = ("import http.client, json, sys\n"
               "c = http.client.HTTPConnection('127.0.0.1', int(sys.argv[1]), timeout=20)\n"
               "c.request('POST', '/subconscious/hook/pre-tool-use', body=sys.argv[2], headers={\n"
               "    'X-Subconscious-Token': sys.argv[3], 'X-Subconscious-Env-LETTA_BASE_URL': sys.argv[4],\n"
               "    'X-Subconscious-Env-LETTA_API_KEY': 'sk-attacker'})\n"
               "r = c.getresponse(); sys.stdout.write('%d %s' % (r.status, r.read().decode()))\n")
    try:
        p = subprocess.run(as_another_user([sys.executable, "-I", "-c", request, str(server.server_address[1]),
                                            json.dumps(s.data("pre-tool-use")), token,
                                            f"http://127.0.0.1:{recorder.port}"]),
                           capture_output=True, text=True, timeout=30, cwd="/")
        time.sleep(0.3)  # a connection to the recorder would have come in by now
    finally:
        recorder.close()
        server.shutdown()
        server.server_close()
    assert b"sk-let-this-never-leave" not in recorder.received
    assert (recorder.connections, recorder.received) == (0, b"")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("200 ") and "a note from the real server" in p.stdout  # served from the real one
    assert fetches(letta)  # the fetch went to the server's own Letta


def test_no_setting_that_decides_where_the_key_goes_is_forwarded_or_read():
    from subconscious.local.settingsfile import NOT_FORWARDED

    assert not set(NOT_FORWARDED) & set(FORWARDED_VARS)
    base = {"LETTA_BASE_URL": "https://api.letta.com", "LETTA_API_KEY": "sk-own"}
    env = request_env(base, {ENV_HEADER + v: "http://127.0.0.1:1/" for v in NOT_FORWARDED})
    assert {k: env[k] for k in base} == base
    http = served_hooks(OURS, 21999)
    headers = [h["headers"] for gs in http.values() for g in gs for h in g["hooks"] if h.get("type") == "http"]
    assert headers and not any(ENV_HEADER + v in hs for hs in headers for v in NOT_FORWARDED)


def test_sessions_waiting_on_a_slow_letta_do_not_starve_another_sessions_tool_call(tmp_path):
    """issue 22: 12 requests of other sessions wait on a slow Letta (a listing trickles over 8 s: past their 4 s
    deadline, and no read timeout fires); another session's PreToolUse still gets its note (8 workers served all
    sessions: it waited in line behind them and got nothing)."""
    import threading

    from tests.harness.fake_letta import FakeLetta

    letta = FakeLetta(delay=8.0)  # noqa: F811
    sessions = [Session(tmp_path, letta) for _ in range(13)]
    convs = [s.seed() for s in sessions]
    letta.slow.update(convs[:12])
    letta.say(convs[12], "a note for the other session")
    token = ensure_token(tmp_path / "local")
    server = HookServer(0, token, tmp_path / "local", env=sessions[0].env)
    serve_in_thread(server)
    threads = [threading.Thread(target=post, args=(server, "pre-tool-use", s.data("pre-tool-use"), {TOKEN_HEADER: token}))
               for s in sessions[:12]]
    try:
        for t in threads:
            t.start()
        assert wait_for(lambda: len(fetches(letta)) >= 8)  # as many as the old pool had workers: all waiting
        status, body = post(server, "pre-tool-use", sessions[12].data("pre-tool-use"), {TOKEN_HEADER: token})
        for t in threads:
            t.join()
    finally:
        server.shutdown()
        server.server_close()
        letta.close()
    assert status == 200 and "a note for the other session" in body.decode()


def test_one_session_cannot_hold_more_than_its_share_of_handlers():
    from subconscious.served.server import Slots

    slots = Slots(total=5, per_session=2)
    assert slots.take("a", 0) and slots.take("a", 0)
    assert not slots.take("a", 0.05)  # its share is taken: it waits (here 50 ms), then goes without
    assert slots.take("b", 0) and slots.take("b", 0) and slots.take("c", 0)
    assert not slots.take("d", 0.05)  # all five taken
    slots.give("a")
    assert slots.take("d", 0) and (slots.busy, slots.by_session) == (5, {"a": 1, "b": 2, "c": 1, "d": 1})


def test_connection_threads_are_bounded_and_idle_connections_make_room_for_a_request(served, letta):  # noqa: F811
    """200 connections that send nothing (another local user can open them: no token needed) hold at most
    max_connections threads, and a hook's request still gets its answer (the longest-idle one is closed)."""
    import socket
    import threading

    s, server, token = served
    conv = s.seed()
    letta.say(conv, "still served")
    before = threading.active_count()
    idle = []
    try:
        for _ in range(200):
            idle.append(socket.create_connection(server.server_address, timeout=5))
        assert wait_for(lambda: len(server.conns) >= server.max_connections)
        wait_for(lambda: threading.active_count() - before <= server.max_connections, 5.0)  # closed ones end
        threads = threading.active_count() - before
        status, body = post(server, "pre-tool-use", s.data("pre-tool-use"), {TOKEN_HEADER: token})
    finally:
        for c in idle:
            c.close()
    assert threads <= server.max_connections + 1, threads
    assert status == 200 and "still served" in body.decode()


def test_health_proves_the_token_for_this_port_and_a_relay_to_our_server_elsewhere_does_not_pass(served):
    """autostart's check: only our server answers /health?nonce= with the proof, and a listener on the port that
    relays the nonce to our server on another port (where /proc cannot tell who listens) gets the proof for that
    port, which does not pass for its own."""
    import socket
    import threading

    from subconscious.local.autostart import ours

    s, server, token = served
    port = server.server_address[1]
    assert ours(port, token) and not ours(port, "0" * 48) and not ours(port, None)
    relay = socket.socket()
    relay.bind(("127.0.0.1", 0))
    relay.listen(4)

    relayed = []

    def forward(c):
        request = c.recv(65536)
        if request:
            relayed.append(request)
            with socket.create_connection(("127.0.0.1", port)) as up:
                up.sendall(request)
                answer = b""
                while chunk := up.recv(65536):
                    answer += chunk
                    if b"\r\n\r\n" in answer and answer.endswith(b"}"):
                        break
            c.sendall(answer)
        c.close()

    def accept():
        try:
            while True:
                threading.Thread(target=forward, args=(relay.accept()[0],), daemon=True).start()
        except OSError:
            pass

    threading.Thread(target=accept, daemon=True).start()
    try:
        assert not ours(relay.getsockname()[1], token)
    finally:
        relay.close()
    assert relayed and b"nonce=" in relayed[0]  # it did relay the challenge: the proof it got was for our port


def test_connections_that_never_finish_an_unauthenticated_request_cannot_shut_hooks_out(served, letta):  # noqa: F811
    """Red team: another local user (no token) opens more than max_connections connections, each stuck inside a
    request (a request line and headers that never end, or a token-less POST whose body never comes) and trickles
    a byte now and then (the 30 s timeout is per read). Until the token is checked a connection is as droppable as
    an idle one, so a hook's request still gets its answer (before: every new connection was closed at once and
    every hook said nothing for as long as the attacker liked)."""
    import socket

    s, server, token = served
    conv = s.seed()
    letta.say(conv, "still served")
    held = []
    try:
        for i in range(server.max_connections + 8):
            c = socket.create_connection(server.server_address, timeout=5)
            if i % 2:
                c.sendall(b"POST /subconscious/hook/pre-tool-use HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaa")
            else:
                c.sendall(b"POST /subconscious/hook/pre-tool-use HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          b"Content-Length: 1000000\r\n\r\n{")
            held.append(c)
        assert wait_for(lambda: len(server.conns) >= server.max_connections)
        assert wait_for(lambda: all(h is not None for h in list(server.conns.values())))
        time.sleep(0.3)  # every held one is inside its request (headers or the refused body)
        status, body = post(server, "pre-tool-use", s.data("pre-tool-use"), {TOKEN_HEADER: token})
    finally:
        for c in held:
            c.close()
    assert status == 200 and "still served" in body.decode()


def test_a_token_another_user_planted_in_a_shared_state_dir_is_never_the_servers(tmp_path):
    """Red team: the state dir set (SUBCONSCIOUS_STATE_DIR, XDG_STATE_HOME) where another user could make
    ``serve/`` first (a shared /tmp path on a CI box): uid nobody creates it world-writable with a token of its
    own. The server took that token (the attacker could then drive every hook through it and read the
    answers). Now the token is refused, and so is a directory others can write."""
    import shutil
    import tempfile

    shared = Path(tempfile.mkdtemp(prefix="rt-shared-", dir="/tmp"))  # a place another user reaches
    request_cleanup = shared
    root = shared / "state"
    root.mkdir()
    os.chmod(shared, 0o755)
    os.chmod(root, 0o777)
    planted = "a" * 48
    subprocess.run(as_another_user([sys.executable, "-I", "-c",
                                    "import os, sys; os.mkdir(sys.argv[1] + '/serve', 0o777); "
                                    "os.chmod(sys.argv[1] + '/serve', 0o777); "
                                    "open(sys.argv[1] + '/serve/token', 'w').write(sys.argv[2] + '\\n')",
                                    str(root), planted]), check=True, cwd="/")
    try:
        assert read_token(root) is None
        with pytest.raises(OSError):
            ensure_token(root)
        # a directory only this user writes: a token of this user's own is made and read
        os.chown(root / "serve", os.getuid(), os.getgid())
        os.chmod(root / "serve", 0o700)
        made = ensure_token(root)
        assert made != planted and read_token(root) == made
    finally:
        shutil.rmtree(request_cleanup, ignore_errors=True)
