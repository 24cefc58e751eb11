"""`subconscious ui` opens the browser on a 0600 file, never on the token's URL: another local user reads
every process's arguments in /proc/*/cmdline. The browser is a recording script (BROWSER), every process's
command line is read while the viewer runs, and the file the browser got is loaded in a real headless
Chromium, which reaches the page and its data (the token posted from the file, not in any URL)."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

from tests.harness.chromium import Dom, dump_dom


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cmdlines() -> dict[int, bytes]:
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                out[int(entry)] = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                pass
    return out


def test_ui_gives_the_browser_a_private_file_and_no_process_sees_the_token(tmp_path):
    record = tmp_path / "browser-argv.json"
    browser = tmp_path / "browser"
    browser.write_text("#!/bin/sh\n"
                       f"{sys.executable} -c 'import json,sys; json.dump(sys.argv[2:], open(sys.argv[1], \"w\"))' "
                       f"{record} \"$@\"\n")
    browser.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "CLAUDE"))}
    state = tmp_path / "state"
    env.update(HOME=str(tmp_path), SUBCONSCIOUS_STATE_DIR=str(state), SUBCONSCIOUS_HOST="desk",
               LETTA_HOME=str(tmp_path / "shared"), LETTA_BASE_URL=f"http://127.0.0.1:{closed_port()}",
               LETTA_AGENT_ID="agent-00000000-0000-4000-8000-000000000000", BROWSER=str(browser), DISPLAY=":99")
    proc = subprocess.Popen([sys.executable, "-m", "subconscious", "ui", "--print-url"], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert "?token=" in url, proc.stderr.read() if proc.poll() is not None else url
        token = url.split("token=", 1)[1]
        for _ in range(200):
            if record.exists() and record.read_text():
                break
            time.sleep(0.05)
        argv = json.loads(record.read_text())
        assert len(argv) == 1 and argv[0].startswith("file://"), argv
        launcher = Path(argv[0][len("file://"):])
        assert launcher.parent == state / "ui"
        assert stat.S_IMODE(launcher.stat().st_mode) == 0o600
        assert stat.S_IMODE(launcher.parent.stat().st_mode) == 0o700
        assert token in launcher.read_text()  # the token is in the private file...

        seen = cmdlines()
        dom = Dom.parse(dump_dom(argv[0]))  # ...which a real browser opens: it reaches the page
        seen.update(cmdlines())
        leaks = {pid: line for pid, line in seen.items() if token.encode() in line}
        assert not leaks, leaks  # ...and in no process's arguments (the browser's, chromium's, ours)
        (body,) = dom.find("body")
        assert body.attrs.get("data-loaded") == "1", dump_dom(argv[0])[:2000]  # its scripts got the data
        assert dom.find(id="health-verdict")
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    assert proc.returncode == 0
    assert not launcher.exists()  # gone with the server


def test_open_refuses_a_wrong_token_and_another_host(tmp_path):
    import http.client
    import threading

    from subconscious.viewer.backend import SeeBackend
    from subconscious.viewer.server import ViewerServer

    env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "CLAUDE"))}
    env.update(HOME=str(tmp_path), SUBCONSCIOUS_STATE_DIR=str(tmp_path / "s"), LETTA_HOME=str(tmp_path / "h"),
               LETTA_BASE_URL=f"http://127.0.0.1:{closed_port()}")
    srv = ViewerServer(SeeBackend(env=env, cwd=str(tmp_path)))
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        def post(body: bytes, host: str | None = None):
            conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
            headers = {"Content-Type": "application/x-www-form-urlencoded"}
            if host:
                headers["Host"] = host
            conn.request("POST", "/open", body=body, headers=headers)
            resp = conn.getresponse()
            out = resp.status, resp.read()
            conn.close()
            return out

        status, page = post(f"token={srv.token}".encode())
        assert status == 200 and b"subconscious-token" in page
        assert post(b"token=" + srv.token[:-1].encode() + b"x")[0] == 403
        assert post(b"")[0] == 403
        assert post(f"token={srv.token}".encode(), host=f"evil.example:{srv.port}")[0] == 403
        assert post(b"token=" + b"a" * 5000)[0] == 413
    finally:
        srv.shutdown()
        srv.server_close()
