"""Every verb with --json answers a failure with one JSON object on stdout ({"error", "kind", "exit"}) and
a non-zero exit (stderr says it as before), so a script reading stdout is never left with nothing; a
configuration error exits 2 (README, "Exit codes"; docs/seeing.md), LETTA_BASE_URL that is not a URL included."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

AGENT = "agent-00000000-0000-4000-8000-000000000000"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def env(tmp_path):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "CLAUDE"))}
    e.update(HOME=str(tmp_path), SUBCONSCIOUS_STATE_DIR=str(tmp_path / "local"), LETTA_HOME=str(tmp_path / "h"),
             SUBCONSCIOUS_HOST="laptop", LETTA_BASE_URL=f"http://127.0.0.1:{closed_port()}", LETTA_AGENT_ID=AGENT)
    return e


def run(env, *args, **extra):
    return subprocess.run([sys.executable, "-m", "subconscious", *args], env={**env, **extra}, cwd=env["HOME"],
                          capture_output=True, text=True, timeout=120)


def error_of(proc) -> dict:
    assert proc.returncode != 0, proc.stdout
    out = json.loads(proc.stdout)  # one JSON object, nothing else
    assert isinstance(out, dict) and isinstance(out["error"], str) and out["error"], out
    assert out["exit"] == proc.returncode and isinstance(out["kind"], str)
    assert proc.stderr.strip(), "stderr still says it for people"
    return out


VERBS = [("status",), ("sessions",), ("memory",), ("messages",), ("ask", "hi"), ("gc",),
         ("key", "status"), ("export", "out.tar"), ("import", "missing.tar")]


@pytest.mark.parametrize("verb", VERBS, ids=" ".join)
def test_a_configuration_error_under_json_is_a_json_object_and_exit_2(env, verb):
    out = error_of(run(env, *verb, "--json", LETTA_MODE="sometimes"))
    assert out["exit"] == 2 and "LETTA_MODE" in out["error"]


@pytest.mark.parametrize("verb", [("sessions",), ("memory",), ("messages",), ("ask", "hi")], ids=" ".join)
def test_a_base_url_that_is_not_a_url_is_a_configuration_error(env, verb):
    proc = run(env, *verb, LETTA_BASE_URL="ftp://letta.example")
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    out = error_of(run(env, *verb, "--json", LETTA_BASE_URL="ftp://letta.example"))
    assert out["kind"] == "config" and "LETTA_BASE_URL" in out["error"]


@pytest.mark.parametrize("verb", [("memory",), ("ask", "hi")], ids=" ".join)
def test_the_server_down_under_json_is_a_json_object_and_exit_1(env, verb):
    out = error_of(run(env, *verb, "--json"))
    assert out["exit"] == 1 and out["kind"] == "server" and "cannot connect" in out["error"]


def test_usage_errors_under_json_are_json_objects_too(env):
    limit = error_of(run(env, "messages", "--limit", "0", "--json"))
    assert limit["exit"] == 2 and limit["kind"] == "usage" and "--limit" in limit["error"]
    bogus = error_of(run(env, "sessions", "--json", "--bogus"))
    assert bogus["exit"] == 2 and bogus["kind"] == "usage" and "--bogus" in bogus["error"]
    sid = error_of(run(env, "preview", "--session", "../../etc", "--json"))
    assert sid["exit"] == 2 and "session id" in sid["error"]
    ok = run(env, "status", "--json")
    assert ok.returncode == 0 and "error" not in json.loads(ok.stdout)  # a success is the verb's own object
