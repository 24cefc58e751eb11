"""Client-side tools on the real Letta server: real hook processes and the real detached worker, the
scripted model calling Read, Grep, Glob (and Write/Bash in full mode) on a real project directory.

The model follows ``CALL <Tool> {json}`` lines found in the transcript (tests/harness/fake_llm.py), so
each test writes what "the user said" and checks what the worker ran, what it answered, what reached
the conversation, and when the cursor moved.
"""
from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from subconscious.state.store.core import Store
from tests.harness.hooks import run_hook as hook
from tests.harness.transcripts import Transcript

pytestmark = pytest.mark.letta

READ_SCHEMA = {"type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]}
WRITE_SCHEMA = {"type": "object", "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["file_path", "content"]}


@dataclass
class Session:
    tmp: Path
    sid: str
    project: Path
    env: dict
    tr: Transcript
    base_url: str

    @property
    def base(self) -> dict:
        return {"session_id": self.sid, "transcript_path": str(self.tr.path), "cwd": str(self.project)}

    def store(self) -> Store:
        return Store(self.tmp / "shared" / ".letta" / "claude", "reader", self.tmp / "r" / "locks",
                     self.tmp / "r" / "clocks", read_only=True)

    @property
    def conv(self) -> str:
        return self.store().conversation(self.sid).conversation_id

    def cursor(self) -> int:
        s = self.store().session(self.sid)
        return s.last_processed_index if s is not None else -1

    def log(self) -> str:
        path = self.tmp / "local" / "logs" / "subconscious.log"
        return path.read_text() if path.exists() else ""

    def start(self) -> None:
        hook("session-start", {**self.base, "hook_event_name": "SessionStart", "source": "startup"}, self.env)
        path = self.tmp / "local" / "sessions" / f"{self.sid}.json"
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if path.exists() and json.loads(path.read_text()).get("pending_start") is None:
                return
            time.sleep(0.2)
        raise AssertionError("the start message was never delivered; log:\n" + self.log()[-3000:])

    def say(self, text: str) -> int:
        """The user says ``text``, Claude answers, Stop runs; returns the line the cursor must reach."""
        self.tr.user(text).assistant("ok")
        hook("stop", {**self.base, "hook_event_name": "Stop", "stop_hook_active": False}, self.env)
        return self.tr.line_count() - 1

    def wait_cursor(self, at_least: int, timeout: float = 180) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.cursor() >= at_least:
                return self.cursor()
            time.sleep(0.2)
        raise AssertionError(f"cursor never reached {at_least}; log:\n{self.log()[-4000:]}")

    def messages(self) -> list[dict]:
        r = httpx.get(f"{self.base_url}/v1/conversations/{self.conv}/messages",
                      params={"limit": 300, "order": "asc"}, timeout=30)
        r.raise_for_status()
        return r.json()

    def exchanges(self) -> list[dict]:
        """Each client tool call in the conversation: name, args, status and the result text."""
        calls, out = {}, []
        for m in self.messages():
            if m.get("message_type") == "approval_request_message":
                tc = m.get("tool_call") or {}
                calls[tc.get("tool_call_id")] = tc
            elif m.get("message_type") == "tool_return_message" and m.get("tool_call_id") in calls:
                tc = calls[m["tool_call_id"]]
                out.append({"name": tc["name"], "args": json.loads(tc.get("arguments") or "{}"),
                             "status": m.get("status"), "result": m.get("tool_return") or ""})
        return out

    def assistant_texts(self) -> list[str]:
        return [m.get("content") or "" for m in self.messages() if m.get("message_type") == "assistant_message"]


def make_session(tmp_path: Path, letta_server, letta_agent, letta_env, mode: str, project: Path) -> Session:
    sid = str(uuid.uuid4())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "CLAUDE"))}
    env.update(letta_env, HOME=str(tmp_path / "user"), SUBCONSCIOUS_STATE_DIR=str(tmp_path / "local"),
               SUBCONSCIOUS_HOST="laptop", LETTA_HOME=str(tmp_path / "shared"), LETTA_AGENT_ID=letta_agent["id"],
               LETTA_SDK_TOOLS=mode)
    tr = Transcript(tmp_path / "t" / f"{sid}.jsonl", sid, str(project))
    s = Session(tmp_path, sid, project, env, tr, letta_server.base_url)
    s.start()
    return s


@pytest.fixture
def project(tmp_path) -> Path:
    p = tmp_path / "project"
    (p / "src" / "shop").mkdir(parents=True)
    (p / "src" / "shop" / "cart.py").write_text(
        "class Cart:\n    def total(self):\n        return 42  # PROJECT_MARKER_7\n")
    (p / "src" / "shop" / "__init__.py").write_text("")
    (p / "docs").mkdir()
    (p / "docs" / "guide.md").write_text("# Guide\nUse the cart.\n")
    (p / "README.md").write_text("# Shop\n")
    (p / ".gitignore").write_text("build/\n")
    (p / "build").mkdir()
    (p / "build" / "cart.py").write_text("PROJECT_MARKER_7 in build output\n")
    return p


def offered_tools(fake_llm, s: Session) -> list[set[str]]:
    """The tool names Letta offered the model, per chat request of this session's conversation (the model
    may be shared with other tests' agents)."""
    out = []
    for r in fake_llm.chat_requests():
        if s.sid not in json.dumps(r["body"].get("messages")):
            continue
        names = set()
        for t in r["body"].get("tools") or []:
            fn = t.get("function", t)
            names.add(fn.get("name"))
        out.append(names)
    return out


def test_read_grep_and_glob_run_on_the_project_and_the_agent_gets_their_results(
        tmp_path, project, letta_server, letta_agent, letta_env, fake_llm):
    s = make_session(tmp_path, letta_server, letta_agent, letta_env, "read-only", project)
    last = s.say("Where is the cart total computed?\n"
                 'CALL Read {"file_path": "src/shop/cart.py"}\n'
                 'CALL Grep {"pattern": "PROJECT_MARKER_\\\\d+"}\n'
                 'CALL Glob {"pattern": "**/*.md"}\n')
    assert s.wait_cursor(last) == last
    ex = s.exchanges()
    assert [(e["name"], e["status"]) for e in ex] == [("Read", "success"), ("Grep", "success"), ("Glob", "success")]
    assert "     3\t        return 42  # PROJECT_MARKER_7" in ex[0]["result"]
    assert ex[1]["result"].splitlines() == ["src/shop/cart.py:3:        return 42  # PROJECT_MARKER_7"]  # not build/
    assert set(ex[2]["result"].splitlines()) == {"docs/guide.md", "README.md"}
    assert any(t.startswith("Done: Read, Grep, Glob") and "PROJECT_MARKER_7" in t for t in s.assistant_texts())
    offered = offered_tools(fake_llm, s)
    assert offered and all({"Read", "Grep", "Glob"} <= o and not o & {"Write", "Edit", "Bash"} for o in offered)
    assert "tools: Read src/shop/cart.py -> success" in s.log()


def test_escape_attempts_are_refused_and_nothing_outside_reaches_the_agent(
        tmp_path, project, letta_server, letta_agent, letta_env, fake_llm):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("SECRET_CONTENT_OUTSIDE\n")
    os.symlink(outside / "secret.txt", project / "innocent.txt")
    os.symlink(outside, project / "linked_dir")
    (project / ".git").mkdir()
    (project / ".git" / "config").write_text("SECRET_CONTENT_GIT\n")
    (project / "build" / "x.txt").write_text("SECRET_CONTENT_IGNORED\n")
    (project / ".env").write_text("SECRET_CONTENT_ENV\n")
    s = make_session(tmp_path, letta_server, letta_agent, letta_env, "read-only", project)
    last = s.say("Look around.\n"
                 'CALL Read {"file_path": "../outside/secret.txt"}\n'
                 f'CALL Read {{"file_path": "{outside}/secret.txt"}}\n'
                 'CALL Read {"file_path": "innocent.txt"}\n'
                 'CALL Read {"file_path": "linked_dir/secret.txt"}\n'
                 'CALL Read {"file_path": ".git/config"}\n'
                 'CALL Read {"file_path": "build/x.txt"}\n'
                 'CALL Read {"file_path": ".env"}\n'
                 'CALL Grep {"pattern": "SECRET_CONTENT", "path": ".."}\n'
                 'CALL Glob {"pattern": "../*"}\n'
                 'CALL Grep {"pattern": "SECRET_CONTENT"}\n')
    assert s.wait_cursor(last) == last
    ex = s.exchanges()
    assert len(ex) == 10
    assert all(e["status"] == "error" for e in ex[:9]), ex
    reasons = [e["result"] for e in ex[:9]]
    assert "outside the project directory" in reasons[0] and "outside the project directory" in reasons[1]
    assert "symbolic link" in reasons[2] and "symbolic link" in reasons[3]
    assert ".git" in reasons[4] and "ignore rules" in reasons[5] and "credentials" in reasons[6]
    assert ex[9]["status"] == "success" and ex[9]["result"].startswith("No matches")
    everything = json.dumps(s.messages())
    assert "SECRET_CONTENT_" not in everything  # the markers are only in the files


@pytest.mark.parametrize("mode,tool,args,schema", [
    ("off", "Read", {"file_path": "src/shop/cart.py"}, READ_SCHEMA),
    ("read-only", "Write", {"file_path": "pwned.txt", "content": "PWNED"}, WRITE_SCHEMA),
])
def test_a_call_the_mode_does_not_allow_is_answered_with_an_error_and_not_run(
        tmp_path, project, letta_server, letta_agent, letta_env, fake_llm, mode, tool, args, schema):
    """A conversation left waiting on a tool call (a worker stopped mid-turn, or the mode was changed) is
    answered under the current mode before the next update goes in."""
    s = make_session(tmp_path, letta_server, letta_agent, letta_env, mode, project)
    r = httpx.post(f"{s.base_url}/v1/conversations/{s.conv}/messages", timeout=120, json={
        "messages": [{"role": "user", "content": f"CALL {tool} {json.dumps(args)}"}], "streaming": False,
        "client_tools": [{"name": tool, "description": "test", "parameters": schema}]})
    r.raise_for_status()
    assert r.json()["stop_reason"]["stop_reason"] == "requires_approval"
    last = s.say("Carry on.")
    assert s.wait_cursor(last) == last
    ex = s.exchanges()
    assert len(ex) == 1 and ex[0]["name"] == tool and ex[0]["status"] == "error"
    assert f"LETTA_SDK_TOOLS={mode}" in ex[0]["result"] and "not run" in ex[0]["result"]
    assert not (project / "pwned.txt").exists()
    assert "PROJECT_MARKER_7" not in json.dumps(s.messages())
    assert any("Carry on." in (m.get("content") or "") for m in s.messages() if m.get("message_type") == "user_message")
    assert "waiting for 1 tool call(s) from an earlier run" in s.log()


def test_off_mode_offers_no_tools(tmp_path, project, letta_server, letta_agent, letta_env, fake_llm):
    s = make_session(tmp_path, letta_server, letta_agent, letta_env, "off", project)
    fake_llm.reset()
    last = s.say('Peek.\nCALL Read {"file_path": "src/shop/cart.py"}\n')
    assert s.wait_cursor(last) == last
    offered = offered_tools(fake_llm, s)
    assert offered and all(not o & {"Read", "Grep", "Glob", "Write", "Edit", "Bash"} for o in offered)
    assert s.exchanges() == []
    assert "PROJECT_MARKER_7" not in json.dumps(s.messages())
    assert any("tool Read not offered" in t for t in s.assistant_texts())


def test_a_tool_loop_is_stopped_by_the_cap(tmp_path, project, letta_server, letta_agent, letta_env, fake_llm):
    s = make_session(tmp_path, letta_server, letta_agent, letta_env, "read-only", project)
    last = s.say("Loop.\n" + "".join('CALL Read {"file_path": "README.md"}\n' for _ in range(26)))
    assert s.wait_cursor(last, timeout=300) == last
    ex = s.exchanges()
    assert [e["status"] for e in ex] == ["success"] * 20 + ["error"]
    assert "limit of 20 tool calls per turn" in ex[20]["result"]
    # the tools were withdrawn: the model's next Read was not even offered, and the turn ended
    assert any("tool Read not offered" in t for t in s.assistant_texts())
    assert s.log().count("tools: Read README.md -> success") == 20


def test_a_turn_stops_reading_when_its_results_fill_the_budget(tmp_path, project, letta_server, letta_agent,
                                                               letta_env, fake_llm):
    """The results of one turn stay under 40,000 characters (the bundled agent's window is 32k tokens)."""
    (project / "big.txt").write_text("".join(f"line {i:05d} " + "x" * 60 + "\n" for i in range(3000)))
    s = make_session(tmp_path, letta_server, letta_agent, letta_env, "read-only", project)
    last = s.say("Read it all.\n" + "".join('CALL Read {"file_path": "big.txt"}\n' for _ in range(10)))
    assert s.wait_cursor(last) == last
    ex = s.exchanges()
    assert 5 <= len(ex) < 10
    assert all(e["status"] == "success" for e in ex[:-1]) and ex[-1]["status"] == "error"
    assert "reached 40,000 characters" in ex[-1]["result"]
    assert sum(len(e["result"]) for e in ex) <= 40_000 + 500
    assert any("tool Read not offered" in t for t in s.assistant_texts())


def test_the_cursor_moves_only_after_the_whole_turn(tmp_path, project, letta_server, letta_agent, letta_env, fake_llm):
    s = make_session(tmp_path, letta_server, letta_agent, letta_env, "read-only", project)
    before = s.cursor()
    last = s.say('Slowly.\nLLM_SLEEP 2\nCALL Read {"file_path": "README.md"}\nCALL Glob {"pattern": "**/*.py"}\n')
    deadline = time.monotonic() + 120
    seen_mid_turn = None
    while time.monotonic() < deadline:
        ex = s.exchanges()
        cur = s.cursor()
        if ex and len(ex) < 2:  # the first tool ran and its result is in; the turn goes on
            seen_mid_turn = cur
            break
        if cur >= last:
            break
        time.sleep(0.1)
    assert seen_mid_turn is not None, "never saw the turn between its tool calls"
    assert seen_mid_turn == before
    assert s.wait_cursor(last) == last
    assert [e["name"] for e in s.exchanges()] == ["Read", "Glob"]
    assert s.assistant_texts()[-1].startswith("Done: Read, Glob")


def test_full_mode_writes_and_runs_commands_in_the_project(tmp_path, project, letta_server, letta_agent, letta_env,
                                                           fake_llm):
    from tests.unit.test_tools_full import ensure_bwrap

    ensure_bwrap()
    s = make_session(tmp_path, letta_server, letta_agent, letta_env, "full", project)
    last = s.say("Leave a note.\n"
                 'CALL Write {"file_path": "notes/sub.md", "content": "written by the subconscious"}\n'
                 'CALL Edit {"file_path": "README.md", "old_string": "# Shop", "new_string": "# Shop (edited)"}\n'
                 'CALL Bash {"command": "ls notes && cat README.md && touch ../escaped.txt"}\n'
                 'CALL Write {"file_path": "../escaped2.txt", "content": "x"}\n')
    assert s.wait_cursor(last) == last
    ex = s.exchanges()
    assert [(e["name"], e["status"]) for e in ex] == [("Write", "success"), ("Edit", "success"),
                                                     ("Bash", "success"), ("Write", "error")]
    assert (project / "notes" / "sub.md").read_text() == "written by the subconscious"
    assert (project / "README.md").read_text() == "# Shop (edited)\n"
    assert "sub.md" in ex[2]["result"] and "# Shop (edited)" in ex[2]["result"]
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "escaped2.txt").exists()
    offered = offered_tools(fake_llm, s)
    assert any({"Read", "Grep", "Glob", "Write", "Edit", "Bash"} <= o for o in offered)


def test_full_mode_plants_nothing_host_git_obeys_through_the_real_worker(tmp_path, project, letta_server, letta_agent,
                                                                        letta_env, fake_llm):
    """Issue 26 from outside: the stand-in model's Write lays out a bare repository under another name, its Bash
    makes one with `git init --bare`, hides a nested .git behind `chmod 311`, and links a notes file to the
    home; after the turn no host git runs the planted core.fsmonitor and the link is gone."""
    import subprocess

    from tests.unit.test_tools_full import ensure_bwrap

    ensure_bwrap()
    marker = tmp_path / "FSMONITOR-RAN"
    config = f'[core]\n\tbare = false\n\tfsmonitor = "touch {marker}; false"\n'
    calls = [("Write", {"file_path": "vendor/lib/config", "content": config}),
             ("Write", {"file_path": "vendor/lib/HEAD", "content": "ref: refs/heads/main\n"}),
             ("Write", {"file_path": "vendor/lib/refs/heads/.keep", "content": ""}),
             ("Write", {"file_path": "vendor/lib/objects/.keep", "content": ""}),
             ("Bash", {"command": "git init -q --bare other && printf \"$CFG\" > other/config; mkdir -p a/b && "
                                  "git init -q a/b && cp other/config a/b/.git/config && chmod 311 a; "
                                  f"ln -s {tmp_path}/user/.ssh/authorized_keys notes.md; echo PLANTED"
                                  .replace("$CFG", config.replace("\n", "\\n").replace('"', '\\"'))})]
    s = make_session(tmp_path, letta_server, letta_agent, letta_env, "full", project)
    last = s.say("Plant things.\n" + "".join(f"CALL {n} {json.dumps(a)}\n" for n, a in calls))
    assert s.wait_cursor(last) == last
    ex = s.exchanges()
    assert [e["name"] for e in ex] == ["Write"] * 4 + ["Bash"], ex
    assert any(e["status"] == "error" and "git repository" in e["result"] for e in ex[:4]), ex
    assert "PLANTED" in ex[4]["result"] and "notes.md" in ex[4]["result"], ex[4]
    os.chmod(project / "a", 0o755)
    clean = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1"}
    for d in ("vendor/lib", "other", "a/b"):
        subprocess.run(["git", "--work-tree=.", "status"], cwd=project / d, env=clean, capture_output=True, timeout=30)
        assert not marker.exists(), (d, ex[4]["result"])
    assert not os.path.lexists(project / "notes.md") and not os.path.lexists(project / "a" / "b" / ".git")
    s2 = make_session(tmp_path / "etc-root", letta_server, letta_agent, letta_env, "full", Path("/etc"))
    last = s2.say('Read it.\nCALL Read {"file_path": "shadow"}\n')
    assert s2.wait_cursor(last) == last
    assert not s2.exchanges() and "root:" not in json.dumps(s2.messages())  # no tools at all with root /etc
    assert "system directory /etc" in s2.log(), s2.log()[-2000:]


def test_full_mode_a_renamed_parent_cannot_hide_a_planted_repository_through_the_real_worker(
        tmp_path, project, letta_server, letta_agent, letta_env, fake_llm):
    """Red team of issue 26 from outside: the project holds a nested repository (its .git mounted read-only in
    the sandbox); the stand-in model's Bash renames the directory holding it and makes a new repository with a
    core.fsmonitor under the old name. After the turn host git there runs nothing, and the user's repository
    is still a repository where the rename put it."""
    import subprocess

    from tests.unit.test_tools_full import ensure_bwrap

    ensure_bwrap()
    marker = tmp_path / "FSMONITOR-RAN"
    (project / "lib" / "dep").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(project / "lib" / "dep")], check=True)
    config = f'[core]\n\tbare = false\n\tfsmonitor = "touch {marker}; false"\n'
    cmd = ("mv lib/dep lib/dep2 && mkdir lib/dep && git init -q lib/dep && printf \"$CFG\" > lib/dep/.git/config "
           "&& echo PLANTED").replace("$CFG", config.replace("\n", "\\n").replace('"', '\\"'))
    s = make_session(tmp_path, letta_server, letta_agent, letta_env, "full", project)
    last = s.say("Plant it.\n" + f"CALL Bash {json.dumps({'command': cmd})}\n")
    assert s.wait_cursor(last) == last
    ex = s.exchanges()
    assert [e["name"] for e in ex] == ["Bash"] and "PLANTED" in ex[0]["result"], ex
    clean = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "status"], cwd=project / "lib" / "dep", env=clean, capture_output=True, timeout=30)
    assert not marker.exists(), ex[0]["result"]
    assert (project / "lib" / "dep2" / ".git" / "HEAD").exists(), ex[0]["result"]
