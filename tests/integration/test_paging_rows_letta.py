"""Issue 25: paging by rows, against the real Letta 0.16.8 server (scripted fake LLM): ``limit`` counts the
server's stored rows, and a row becomes zero or more messages (an agent turn's rows hold reasoning, the
answer, tool calls; some hold none that are listed). The hooks' notes look-back
(events/messages.read_pages) must reach the oldest message whatever the page size.

A row that lists as no message, on the real server: the return of a call of the base tool ``send_message``
(attached to the agent). Letta 0.16.8 lists the call as an ``assistant_message`` and drops the tool row
when the call is in the same page (schemas/message.py, ``to_letta_messages_from_list``), so a page of 50
rows holding both has 49 messages while more follows."""
from __future__ import annotations

import uuid

import httpx
import pytest

from subconscious.hooks.events.messages import read_pages
from subconscious.hooks.events import pre_tool, prompt
from subconscious.letta.client import LettaClient
from tests.integration.test_faults import Rig, proxy  # noqa: F401 (proxy: a fixture)

pytestmark = pytest.mark.letta


@pytest.fixture
def client(letta_server):
    with LettaClient(letta_server.base_url, "harness-key-never-checked") as c:
        yield c


def test_the_look_back_reaches_the_oldest_message_at_every_page_size(client, letta_agent, fake_llm):
    conv = client.create_conversation(letta_agent["id"])["id"]
    for i in range(4):
        client.send_message(conv, f"message {i}")
        if i == 1:  # a turn of several steps: tool calls and their returns are rows too
            client.send_message(conv, "REMEMBER user_preferences: prefers tabs\nSAY noted")
    everything = client.list_messages(conv, limit=1000)
    oldest = everything[-1]["id"]
    short = []
    for page in (2, 3, 5, 7):
        sizes = []

        def page_of(before, page=page):
            got = client.list_messages(conv, limit=page, before=before)
            sizes.append(len(got))
            return got

        got, found = read_pages(page_of, oldest, page, max_pages=1000)
        assert found, (page, sizes)
        assert [m["id"] for m in got] == [m["id"] for m in everything], (page, sizes)
        short += [(page, n) for n in sizes[:-1] if n < page]
    print("pages shorter than their limit with more behind them (limit, messages):", short)


@pytest.fixture
def rig(tmp_path, proxy, letta_server, letta_agent, letta_env, fake_llm) -> Rig:
    return Rig(tmp_path, proxy, letta_server.base_url, letta_agent["id"], letta_env)


@pytest.mark.parametrize("event,page", [("pre-tool-use", pre_tool.PAGE), ("user-prompt-submit", prompt.PAGE)])
def test_a_note_behind_a_message_less_row_is_shown_by_a_real_hook_and_the_watermark_reaches_it(
        rig: Rig, client, letta_server, letta_agent, event, page):
    """A real hook (``pre-tool-use``: pages of 50; ``user-prompt-submit``: 100) against the real server: the
    newest page of rows holds a ``send_message`` call and its return (one message short); the note the hook has
    not shown yet is behind them. The hook prints it, and the watermark moves to the newest message only with
    it printed."""
    tag = uuid.uuid4().hex[:8]
    rig.start()
    rig.hook(event)  # the answer to the start message shown: the watermark at the newest message
    conv = rig.conversation()
    base = rig.store().session(rig.sid).last_seen_message_id
    assert base is not None
    with httpx.Client(base_url=letta_server.base_url, timeout=30) as http:
        tool = http.get("/v1/tools/", params={"name": "send_message"}).json()[0]["id"]
        http.patch(f"/v1/agents/{letta_agent['id']}/tools/attach/{tool}").raise_for_status()
    client.send_message(conv, f"SAY note-behind-{tag}")  # the note not shown yet
    client.send_message(conv, [{"role": "user", "content": f"filler {i}"} for i in range(page - 2)])
    client.send_message(conv, f'CALL send_message {{"message": "via-tool-{tag}"}}\nSAY last-{tag}')

    newest = client.list_messages(conv, limit=page)
    everything = client.list_messages(conv, limit=1000)
    ids = [m["id"] for m in everything]
    note = next(m["id"] for m in everything if m.get("message_type") == "assistant_message"
                and f"note-behind-{tag}" in str(m.get("content")))
    # the precondition, on the server: the newest page is short (a row listed as no message) while the note
    # and the watermark are behind it
    assert len(newest) == page - 1 and [m["id"] for m in newest] == ids[:page - 1], [m["message_type"] for m in newest]
    assert ids.index(note) >= page - 1 and base in ids[ids.index(note):]

    shown = rig.hook(event).stdout
    assert f"note-behind-{tag}" in shown, shown[-2000:]
    assert f"via-tool-{tag}" in shown and f"last-{tag}" in shown
    assert rig.store().session(rig.sid).last_seen_message_id == ids[0]
    again = rig.hook(event).stdout  # nothing twice
    assert f"note-behind-{tag}" not in again and f"last-{tag}" not in again
