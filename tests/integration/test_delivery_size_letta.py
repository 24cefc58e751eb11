"""Issue 25, item 1, at the boundary the user's server sees: real hook processes, the real detached worker,
the real Letta server, and the fault proxy recording every request body. Lines far over the update's bound
(a 5 MB line of ``<``, a markup-heavy pasted line, one answer of six long text blocks) and a 413 refusal of
the first update: no request carries a message text over the bound, every turn arrives once, the cut lines
say so, and the refused update is planned again shorter (not resent unchanged)."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from subconscious.delivery.plan import update_limit
from subconscious.letta.messages import content_text
from subconscious.delivery.update_xml import CUT_MARK
from tests.integration.test_delivery_letta import assert_each_line_once
from tests.integration.test_faults import MESSAGES, Rig, proxy  # noqa: F401 (proxy: a fixture)

pytestmark = pytest.mark.letta
MARK = CUT_MARK.split("%d")[0].strip()


@pytest.fixture
def rig(tmp_path, proxy, letta_server, letta_agent, letta_env, fake_llm) -> Rig:
    r = Rig(tmp_path, proxy, letta_server.base_url, letta_agent["id"], letta_env)
    yield r
    fake_llm.fail(None)


def sent_updates(rig: Rig) -> list[str]:
    """The message text of every POST of a transcript update, as it left the machine."""
    out = []
    for s in rig.proxy.seen("POST", MESSAGES):
        try:
            body = json.loads(s.body or b"{}")
        except ValueError:
            continue
        for m in body.get("messages") or []:
            text = content_text(m.get("content"))
            if "<claude_code_session_update>" in text:
                out.append(text)
    return out


def test_no_request_carries_an_update_over_the_bound_and_a_size_refusal_is_cut(rig: Rig, letta_server, letta_agent):
    rig.start()
    agent = httpx.get(f"{letta_server.base_url}/v1/agents/{letta_agent['id']}", timeout=30).json()
    bound = update_limit((agent.get("llm_config") or {}).get("context_window"))
    rig.transcript.user("<" * 5_000_000)  # first: the refused update is one at the bound
    rig.transcript.user("<i>&&</i>" * 11_000)
    rig.transcript._write({"type": "assistant", "uuid": str(uuid.uuid4()), "sessionId": rig.sid,
                           "message": {"id": "msg_six", "role": "assistant", "type": "message", "content": [
                               {"type": "text", "text": ("block %d " % i) * 5000} for i in range(6)]}})
    rig.turn("after")
    refused = rig.proxy.fail(413, method="POST", path=MESSAGES, count=1, detail="Request Entity Too Large")
    rig.hook("stop")
    rig.wait_cursor(rig.transcript.line_count() - 1, timeout=300)
    assert_each_line_once(rig)  # the short turns before and after: once each, in completed turns
    texts = sent_updates(rig)
    longest = max(len(t) for t in texts)
    print(f"\nbound {bound}: {len(texts)} updates sent, longest {longest} ({longest / bound:.2f}x)")
    assert refused.hits == 1 and longest <= bound
    assert len(texts) == len(set(texts))  # the refused one was not resent unchanged
    assert sum(MARK in t for t in texts) >= 3  # each oversized line says it was cut
    assert "refused lines" in rig.log()
