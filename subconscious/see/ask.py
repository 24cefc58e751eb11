"""``ask``: one turn with the agent on a conversation of its own.

Never a session's conversation: its messages are that session's transcript as the agent reads it (and
the hooks page through it for notes to show), so a question there would corrupt both. The side
conversation is created once per agent and recorded in the shared home (setting ``askConversation``,
through the Store API), so every machine, the MCP server and the command line reuse the same one and
the agent keeps the thread of what it was asked. The question is redacted like a transcript before it
leaves the machine.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ..injection.context import escape, escape_attr

SETTING = "askConversation"
TOTAL_TIMEOUT_S = 300.0


# --------------------------------------------------------------------------- pure

def recorded_conversation(setting: Any, agent_id: str) -> str | None:
    """The side conversation recorded for ``agent_id`` (None: none yet, or one of another agent)."""
    if isinstance(setting, Mapping) and setting.get("agentId") == agent_id:
        conv = setting.get("conversationId")
        return conv if isinstance(conv, str) and conv else None
    return None


def question_message(text: str, machine: str) -> str:
    """What the agent receives: the question (redacted), saying where it comes from and that it is not a
    session's transcript."""
    from ..privacy.redact import redact

    return ('<user_question via="subconscious ask" machine="%s">\n%s\n</user_question>\n'
            "The user asks you this directly, outside any Claude Code session; answer them in plain text."
            % (escape_attr(machine), escape(redact(text))))


def reply_of(items: list[dict]) -> dict:
    """The turn's outcome from its stream items: reply text, each message's type and text, stop reason."""
    from ..letta.messages import content_text, fold_items

    turn = fold_items(items)
    msgs = []
    for m in turn.messages:
        kind = m.get("message_type")
        reasoning = m.get("reasoning")  # checked on reasoning messages only (letta.shapes): text or nothing here
        text = content_text(m.get("content")) if kind == "assistant_message" else \
            (reasoning if isinstance(reasoning, str) else "")
        msgs.append({"type": kind, "text": text, "id": m.get("id"), "date": m.get("date")})
    return {"reply": turn.text, "messages": msgs, "stop_reason": turn.stop_reason}


# --------------------------------------------------------------------------- shell

def side_conversation(home, agent_id: str, *, fresh: bool = False) -> tuple[str, bool]:
    """(conversation id, created now) of the agent's side conversation; created and recorded once."""
    store = home.writable_store()
    if not fresh:
        conv = recorded_conversation(store.setting(SETTING), agent_id)
        if conv:
            return conv, False
    conv = home.letta().create_conversation(agent_id)["id"]
    store.put_setting(SETTING, {"agentId": agent_id, "conversationId": conv})
    return conv, True


def ask(home, text: str, *, on_item: Callable[[dict], None] | None = None, agent_id: str | None = None) -> dict:
    """Send ``text`` to the agent on its side conversation; ``on_item`` sees each stream item (reasoning,
    assistant message, …) as it arrives — text in pieces as the model writes it (same id: join them). Returns ``{agent, conversation, created, reply, messages,
    stop_reason}``. A recorded conversation the server no longer has is replaced by a new one."""
    from ..letta.errors import LettaNotFoundError

    if not text.strip():
        raise ValueError("nothing to ask")
    aid = agent_id or home.agent_id()
    if not aid:
        raise LookupError("no agent yet: no session has started and LETTA_AGENT_ID is not set")
    client = home.letta()
    message = question_message(text, home.rt.host.name)
    conv, created = side_conversation(home, aid)
    items: list[dict] = []

    def take(item: dict) -> None:
        items.append(item)
        if on_item is not None:
            on_item(item)

    try:
        client.send_message_streaming(conv, message, on_item=take, total_timeout=TOTAL_TIMEOUT_S, stream_tokens=True)
    except LettaNotFoundError:
        if items:
            raise
        conv, created = side_conversation(home, aid, fresh=True)
        client.send_message_streaming(conv, message, on_item=take, total_timeout=TOTAL_TIMEOUT_S, stream_tokens=True)
    return {"agent": aid, "conversation": conv, "created": created, **reply_of(items)}
