"""Private means private for every tool, not only Claude Code's own file tools: the real Claude Code CLI
(``claude -p``, this repo loaded as a plugin, pip-installed hooks) calling a real stdio MCP server
(tests/harness/mcp_filesystem.py, the tools of @modelcontextprotocol/server-filesystem) and Bash, the real
detached worker, and a recording proxy in front of the real Letta server.

With SUBCONSCIOUS_PRIVATE_PATHS=secrets/**, Claude Code reads ``secrets/db.txt`` with
``mcp__filesystem__read_text_file``, writes ``secrets/new.txt`` with ``mcp__filesystem__write_file`` (its
input holds the new secret), reads windows of files with ``<private>`` blocks (``head``/``tail``: one of them
a window of block lines with no tag in it) and runs ``cat secrets/db.txt`` and ``sed -n 3p notes.md`` (a line
inside a block) in Bash. Not one private byte may be in any request body the proxy saw, nor in anything the
Letta server sent its model — while the public lines and the calls themselves do arrive.
"""
from __future__ import annotations

import json
import re
import uuid

import pytest

from tests.harness.claude_machine import ClaudeMachine
from tests.harness.hooks import conversation_messages, user_texts
from tests.harness.mcp_filesystem import CLAUDE_ENV, tool_names, write_mcp_config
from tests.integration.test_privacy_claude_e2e import recording_proxy  # noqa: F401 (a fixture)
from tests.integration.test_privacy_letta import strings

pytestmark = [pytest.mark.claude, pytest.mark.letta]

READ, WRITE = "mcp__filesystem__read_text_file", "mcp__filesystem__write_file"


def write_project(project, tag: str) -> dict[str, str]:
    (project / "notes.md").write_text(
        f"intro public line\n<private>\nthe vault word is PRIV-BLOCK-{tag} swordfish\n"
        f"second PRIV-BLOCK2-{tag} line here\n</private>\npublic after-{tag}\n")
    # a block open to the end of the file: its last lines, read with ``tail``, are a window with no tag in it
    (project / "journal.md").write_text(
        f"journal public-{tag}\n<private>\nPRIV-TAIL-{tag} first secret\nPRIV-TAIL2-{tag} second secret\n")
    (project / "secrets").mkdir()
    (project / "secrets" / "db.txt").write_text(f"PRIV-PATH-{tag} db password line\n")
    return {"notes": str(project / "notes.md"), "journal": str(project / "journal.md"),
            "db": str(project / "secrets" / "db.txt")}


def _messages(updates: list[str]) -> list[str]:
    """The delivered ``<message>`` elements' texts (XML entities decoded)."""
    out = []
    for u in updates:
        for m in re.findall(r"<message[^>]*>\n(.*?)\n</message>", u, re.S):
            out.append(m.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))
    return out


def test_no_private_byte_leaves_through_mcp_tools_or_bash(
        tmp_path, claude_sandbox, fake_anthropic, letta_server, letta_env, fake_llm, recording_proxy,  # noqa: F811
        agents_to_delete):
    tag = uuid.uuid4().hex[:8]
    project = claude_sandbox.project_dir
    paths = write_project(project, tag)
    mcp_config = write_mcp_config(claude_sandbox.root / "mcp.json", allowed_dirs=[project])
    env = {**letta_env, "LETTA_BASE_URL": recording_proxy.url}
    laptop = ClaudeMachine(claude_sandbox, tmp_path, env, allowed_tools=("Bash", "Read", *tool_names()))
    laptop.env.update(SUBCONSCIOUS_PRIVATE_PATHS="secrets/**", **CLAUDE_ENV)

    calls = [
        (READ, {"path": paths["db"]}),                        # a private path
        (READ, {"path": paths["notes"], "head": 4}),          # the opening tag and the block's lines
        (READ, {"path": paths["notes"], "tail": 4}),          # the block's lines and the closing tag
        (READ, {"path": paths["journal"], "tail": 2}),        # block lines only: no tag in the window
        # the input is the secret; a relative path (the server's directory is the project's) keeps the input's
        # JSON short: the update cuts a call's JSON at 100 characters, which a long temp path would fill
        (WRITE, {"path": "secrets/new.txt", "content": f"PRIV-WRITE-{tag} new secret line"}),
        ("Bash", {"command": "cat secrets/db.txt", "description": "Show the db file"}),
        ("Bash", {"command": "sed -n 3p notes.md", "description": "Show line 3"}),
    ]
    script = " ".join(f"[[tool:{name} {json.dumps(args)}]]" for name, args in calls)
    # the stand-in model's script holds the secret written: the prompt keeps it in tags of its own
    run = laptop.run(f"<private>{script}</private> [[text:Checked-{tag}.]] Look at the files.",
                     extra_args=["--mcp-config", str(mcp_config)], timeout=240)
    sid = run.session_id
    entry = laptop.store().conversation(sid)
    assert entry is not None
    agents_to_delete.append(entry.agent_id)

    # every call ran, and Claude Code itself saw the private text (it is the user's own machine): not vacuous
    used = [b for e in run.transcript_entries() if e.get("type") == "assistant"
            for b in e["message"].get("content") or [] if isinstance(b, dict) and b.get("type") == "tool_use"]
    assert [(b["name"], b["input"]) for b in used] == calls, run.describe()
    results = [b for e in run.transcript_entries() if e.get("type") == "user" and isinstance(e["message"]["content"], list)
               for b in e["message"]["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]
    assert len(results) == len(calls) and not any(b.get("is_error") for b in results), results
    assert (project / "secrets" / "new.txt").read_text() == f"PRIV-WRITE-{tag} new secret line"
    claude_saw = fake_anthropic.bodies_text()
    for private in (f"PRIV-PATH-{tag}", f"PRIV-BLOCK-{tag}", f"PRIV-TAIL-{tag}", f"PRIV-TAIL2-{tag}"):
        assert private in claude_saw, private

    def delivered() -> list[str]:
        return user_texts(conversation_messages(letta_server.base_url, entry.conversation_id),
                          "<claude_code_session_update>")

    def done() -> bool:
        model_got = any(f"Checked-{tag}." in s for r in fake_llm.chat_requests() for s in strings(r["body"]))
        return model_got and any(f"Checked-{tag}." in u for u in delivered())
    laptop.wait_until(done, timeout=180, failure="the turn never reached the agent")
    laptop.wait_until(lambda: not (laptop.sessions / "pending" / sid).exists(), timeout=60)

    sent = [s.body.decode("utf-8", "replace") for s in recording_proxy.seen() if s.body]
    model_saw = [s for r in fake_llm.chat_requests() for s in strings(r["body"])]
    everything = "\n".join(sent + model_saw)
    updates = delivered()
    messages = _messages(updates)
    # the calls were delivered at all (a test that saw no MCP call could not see one leak)
    assert f"[Tool: {READ}]" in "\n".join(messages) and f"[Tool Result: {READ}]" in "\n".join(messages), messages
    assert f"[Tool: {WRITE}]" in "\n".join(messages) and "[Tool: Bash] sed -n 3p notes.md" in messages

    private = [f"PRIV-PATH-{tag}", "db password line", f"PRIV-WRITE-{tag}", "new secret line",
               f"PRIV-BLOCK-{tag}", f"PRIV-BLOCK2-{tag}", f"PRIV-TAIL-{tag}", f"PRIV-TAIL2-{tag}", "swordfish"]
    leaks = {p: [m.split("\n")[0][:120] + (" | " + m.split("\n", 1)[1][:160] if "\n" in m else "")
                 for m in messages if p in m]
             for p in private if p in everything or any(json.dumps(p)[1:-1] in b for b in sent)}
    assert not leaks, "private text delivered to Letta:\n" + "\n".join(
        f"  {p!r} in: {where or '(request bodies only)'}" for p, where in leaks.items())

    # what is public did arrive: the line after the block, the answer; and the visible markers
    joined = "\n".join(messages)
    assert f"public after-{tag}" in everything
    assert f"Checked-{tag}." in joined
    assert "[private text removed]" in joined
    assert "on a private path (SUBCONSCIOUS_PRIVATE_PATHS) was not sent" in joined
