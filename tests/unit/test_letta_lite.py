"""The stdlib-only hot-path reads: same answers and errors as the httpx client, no httpx import."""
from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
import traceback
import urllib.error
from pathlib import Path

import pytest

from subconscious.letta import lite
from subconscious.letta.errors import LettaAuthError, LettaConnectionError, LettaNotFoundError, \
    LettaProtocolError, LettaTimeoutError

REC = Path(__file__).resolve().parents[1] / "fixtures" / "letta"
KEY = "sk-let-LiteSecretValue-993311"


class Resp(io.BytesIO):
    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


def recorded(name: str, idx: int) -> dict:
    return json.loads((REC / f"{name}.json").read_text())[idx]


def replay(name: str, idx: int, seen: list):
    rec = recorded(name, idx)

    def opener(req, timeout):
        seen.append((req, timeout))
        assert req.get_method() == rec["request"]["method"]
        return Resp(rec["response"]["text"].encode())
    return opener, rec


def test_list_messages_from_a_recorded_answer():
    seen = []
    opener, rec = replay("memory_turn", 2, seen)
    conv = rec["request"]["path"].split("/")[3]
    msgs = lite.list_messages("http://letta.test:8283/", conv, limit=5, api_key=KEY, timeout=1.5, opener=opener)
    assert msgs[0]["message_type"] == "assistant_message" and len(msgs) == 5
    req, timeout = seen[0]
    assert req.full_url == f"http://letta.test:8283/v1/conversations/{conv}/messages?limit=5&order=desc"
    assert req.get_header("Authorization") == f"Bearer {KEY}" and timeout == 1.5


def test_get_agent_from_a_recorded_answer():
    seen = []
    opener, rec = replay("memory_turn", 1, seen)
    agent_id = rec["request"]["path"].rsplit("/", 1)[1]
    agent = lite.get_agent("http://letta.test:8283", agent_id, opener=opener)
    assert "prefers tabs" in {b["label"]: b["value"] for b in agent["blocks"]}["user_preferences"]
    assert seen[0][0].full_url.endswith("?include=agent.blocks")


def _raise(exc):
    def opener(req, timeout):
        raise exc
    return opener


def _text(e: BaseException) -> str:
    return "".join(traceback.format_exception(e)) + repr(e) + repr(e.__context__) + repr(e.__cause__)


def test_http_errors_map_and_never_show_the_key():
    body = json.dumps({"detail": f"bad token {KEY}"}).encode()
    err = urllib.error.HTTPError("http://x", 401, "Unauthorized", {}, io.BytesIO(body))
    with pytest.raises(LettaAuthError) as exc:
        lite.list_messages("http://x", "conv-1", api_key=KEY, opener=_raise(err))
    assert "LETTA_API_KEY" in str(exc.value)
    for i in range(len(KEY) - 5):
        assert KEY[i:i + 6] not in _text(exc.value)
    nf = urllib.error.HTTPError("http://x", 404, "Not Found", {}, io.BytesIO(b'{"detail": "Agent not found"}'))
    with pytest.raises(LettaNotFoundError, match="Agent not found"):
        lite.get_agent("http://x", "agent-00000000-0000-4000-8000-000000000000", opener=_raise(nf))


@pytest.mark.parametrize("exc,kind", [
    (urllib.error.URLError(ConnectionRefusedError(111, "Connection refused")), LettaConnectionError),
    (urllib.error.URLError(socket.timeout("timed out")), LettaTimeoutError),
    (TimeoutError("read timed out"), LettaTimeoutError)])
def test_transport_failures(exc, kind):
    with pytest.raises(kind):
        lite.list_messages("http://x", "conv-1", opener=_raise(exc))


def test_not_json_and_bad_ids():
    with pytest.raises(LettaProtocolError):
        lite.list_messages("http://x", "conv-1", opener=lambda req, timeout: Resp(b"<html>"))
    with pytest.raises(Exception, match="not a valid Letta id"):
        lite.list_messages("http://x", "../../agents")


def test_importing_lite_does_not_import_httpx():
    out = subprocess.run([sys.executable, "-c", "import sys, subconscious.letta.lite; print('httpx' in sys.modules)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
