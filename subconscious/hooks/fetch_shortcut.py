"""The fetching PreToolUse and UserPromptSubmit when the agent has said nothing new: one request, no store.

Most fetches find nothing to show. Proving that takes the session's conversation and watermark
(``lastSeenMessageId``, read from the session's view in its shared home, found through the machine-local
session file as Stop's shortcut finds it: :func:`subconscious.hooks.hotinput.read_shared`, no symbolic link
followed below the home), the fetch TTL (PreToolUse only, :func:`subconscious.local.claims.take_fetch`;
UserPromptSubmit always fetches), and ONE page of the conversation's messages, newest first (the page
size of events/pre_tool.py or events/prompt.py, as events/messages.py asks for it) through
:mod:`subconscious.letta.wire`. When the watermark is in that page (or, none set yet, the conversation is
empty) and nothing newer than it is a note (an
assistant message with text: :func:`subconscious.injection.messages.look_back`'s rule), the hook is done:
it prints nothing and exits 0, having loaded no ``subconscious.state`` module.

Whisper mode only. Everything else goes to :func:`subconscious.hooks.run.run` with the bytes already read:
full mode, a setting this module does not read as the full path would (a proxy, an unusual
LETTA_BASE_URL), served mode on (as Stop's shortcut), no machine-local session file naming the home
and the conversation SessionStart queued the start message for, a view that does not parse as the store
would want it, the watermark not in the first page, any note, an answer that is not a 200 with a JSON
list, a UserPromptSubmit while some session's retry marker is due (the full path's ``spawn.pickup``).
The full path then fetches again: in that rare case a hook makes two requests. Before handing over, a
PreToolUse gives its fetch TTL back (:func:`subconscious.local.claims.give_back_fetch`), so the full path takes
it and fetches instead of skipping. A request that times out is what the full path would log too: the
reason is logged and the hook exits 0 (no second wait); so does any hand-over once more than
``HANDOVER_BY`` seconds went by (0.8 s, 1.8 s), to stay within the hook's timeout.

What this path does not do: write the shared home. The full path moves the watermark over messages that
are not notes (the agent's reasoning, tool calls, the user's lines the worker sent); this one leaves it
where it is, so the watermark can lag behind by up to one page of such messages. That is bounded: once
more than a page is newer than the watermark, it is no longer in the first page, the full path runs and
moves it. It reads the session's view, not the merge of every host's version the store makes: a
version newer than the view (from another machine, a conflict copy) can only hold a watermark further
on, and no note lies between the two (the watermark moves over printed notes only), so "nothing new"
read from the view holds for the merge too. UserPromptSubmit arms its session's safety-net retry
marker here as ``spawn.pickup(arm=...)`` does (machine-local).
"""

from __future__ import annotations

import os
import time

from .hotinput import _input, _log, _read_json, _read_shared, _text, state_dir

PRE_TOOL_PAGE = 50  # events/pre_tool.PAGE
PROMPT_PAGE = 100  # events/prompt.PAGE
PRE_TOOL_BUDGET, PROMPT_BUDGET = 3.5, 7.0  # the full path's request budgets (events/pre_tool.py, prompt.py)
HANDOVER_BY = {True: 0.8, False: 1.8}  # seconds (PreToolUse, UserPromptSubmit): past this the full path
# (deadlines 4 s and 8 s, hookrun.EVENTS) would not finish inside the hook's timeout (5 s and 10 s, hooks.json)
SAFETY_NET_SECONDS = 600.0  # spawn.SAFETY_NET_SECONDS
SAFETY_NET_REASON = "a turn without a Stop yet"  # as spawn.pickup arms it
DEFAULT_BASE_URL = "https://api.letta.com"
CLOUD_HOSTS = ("api.letta.com",)
# checked by set, not re (whose import costs a hook ~3-5 ms): the rules of the patterns named below
_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_ID_REST = _ALNUM | frozenset("_.-")  # letta.config._ID_RE: [A-Za-z0-9][A-Za-z0-9_.-]{0,127}, safe in a URL path
_HOST = _ALNUM | frozenset(".-")
_HOST6 = frozenset("0123456789ABCDEFabcdef:.")
_PATH = _ALNUM | frozenset("._~/-")
SDK_TOOLS = ("read-only", "full", "off")


# ---------------------------------------------------------------- pure decisions

def api_root(raw: str | None) -> tuple[str, str] | None:
    """(the API root ending in ``/v1``, the host) for a LETTA_BASE_URL of the plain form
    ``http(s)://host[:port][/path]`` (host: letters, digits, ``.``, ``-``, or ``[`` an IPv6 address ``]``; port:
    1-5 digits; path: letters, digits and ``._~/-``), as letta.config.normalize_base_url makes it; None for
    anything else (user info, a query, an odd character: the full path normalises it, or says why not)."""
    value = (raw or "").strip() or DEFAULT_BASE_URL
    for scheme in ("https", "http"):
        if value.startswith(scheme + "://"):
            rest = value[len(scheme) + 3:]
            break
    else:
        return None
    cut = rest.find("/")
    authority, path = (rest, "") if cut < 0 else (rest[:cut], rest[cut:])
    if authority.startswith("["):
        close = authority.find("]")
        host, port = authority[:close + 1], authority[close + 1:]
        if close < 2 or not _HOST6.issuperset(host[1:-1]):
            return None
    else:
        host, colon, port = authority.partition(":")
        port = colon + port
        if not host or not _HOST.issuperset(host):
            return None
    if port and not (port[0] == ":" and 1 < len(port) <= 6 and port[1:].isascii() and port[1:].isdigit()):
        return None
    if not _PATH.issuperset(path):
        return None
    while "//" in path:
        path = path.replace("//", "/")
    path = path.rstrip("/")
    if not path.endswith("/v1"):
        path += "/v1"
    return f"{scheme}://{host}{port}{path}", host.lower()


def plain_id(value: str) -> bool:
    """letta.config._ID_RE's full match: a letter or digit, then up to 127 of letters, digits, ``_.-``."""
    return 0 < len(value) <= 128 and value[0] in _ALNUM and _ID_REST.issuperset(value)


def has_text(message: dict) -> bool:
    """Whether a message of the conversation API is a note (context_messages.look_back's rule: an
    assistant message, or one without a type, whose text is not blank)."""
    if message.get("message_type", "assistant_message") != "assistant_message":
        return False
    content = message.get("content")
    if content is None:
        content = message.get("text")
    if isinstance(content, str):
        return bool(content.strip())
    if isinstance(content, list):
        return bool("\n".join(str(p.get("text", "")) for p in content
                              if isinstance(p, dict) and p.get("type", "text") == "text").strip())
    return False


def nothing_new_in(page: list, watermark: str | None, limit: int) -> bool:
    """True when no message of ``page`` (the first page, newest first, of at most ``limit``) newer than
    ``watermark`` is a note, and the page reaches back to the watermark: it holds the watermark, or, with
    no watermark yet, the page is the whole conversation (fewer than ``limit``). False (not sure: the full
    path decides) otherwise."""
    for m in page:
        if not isinstance(m, dict):
            return False
        if watermark is not None and str(m.get("id", "")) == watermark:
            return True
        if has_text(m):
            return False
    return watermark is None and not page


def settings_usable(env) -> bool:
    """The settings the full path reads parse as it would parse them (else it says why: hand over)."""
    if (env.get("LETTA_MODE") or "whisper").strip().lower() != "whisper":
        return False
    if (env.get("LETTA_SDK_TOOLS") or "read-only").strip().lower() not in SDK_TOOLS:
        return False
    window = env.get("LETTA_CONTEXT_WINDOW")
    return window is None or not window.strip() or window.strip().isdigit()


def view_usable(view: dict | None, sid: str) -> tuple[str, str | None] | None:
    """(conversation id, watermark or None) from the session's view when it reads as a session state the store
    would accept (records.parse_session's checks on these fields); None otherwise."""
    if not view or view.get("sessionId", sid) != sid:
        return None
    conv, mark = view.get("conversationId"), view.get("lastSeenMessageId")
    index = view.get("lastProcessedIndex", -1)
    if type(index) is not int or index < -1:
        return None
    if not isinstance(view.get("lastBlockValues", {}), (dict, type(None))):
        return None
    if not all(isinstance(view.get(k), (str, type(None))) for k in ("agentId", "startedAt", "host")):
        return None
    if not (_text(conv) and plain_id(conv) and (mark is None or _text(mark))):
        return None
    return conv, mark


# ---------------------------------------------------------------- the shell

def due_marker(pending: str, now: float) -> bool | None:
    """Whether any retry marker in ``pending`` is due (one listdir, as localsession.pending_marks reads
    it); None when the directory cannot be read."""
    try:
        with os.scandir(pending) as it:
            return any(not e.name.startswith(".") and e.stat().st_mtime <= now for e in it)
    except OSError:
        return None


def arm_safety_net(pending: str, sid: str, now: float) -> None:
    """This session's retry marker due ``SAFETY_NET_SECONDS`` from now, unless one is due sooner, armed
    ``now`` (localsession.mark_pending with keep_earlier, as spawn.pickup arms it)."""
    from ..base import fastjson as json
    from ..base.atomic import atomic_write

    path = os.path.join(pending, sid)
    due = now + SAFETY_NET_SECONDS
    reason = SAFETY_NET_REASON
    try:
        sooner = os.stat(path).st_mtime
        if sooner <= due:  # keeps its time; ``armed`` says this turn asked too (localsession.clear_pending)
            due = sooner
            with open(path, "rb") as f:
                reason = str(json.loads(f.read(1 << 16)).get("reason") or reason)
    except FileNotFoundError:
        pass
    except (OSError, ValueError, AttributeError, RecursionError):
        pass
    atomic_write(path, json.dumps({"reason": reason[:500], "armed": now}) + "\n", durable=False)
    os.utime(path, (due, due))


def nothing_new(raw: bytes, env=os.environ, *, pre_tool: bool) -> bool:
    """True when this fetching hook is done: nothing new to show (or, PreToolUse, another hook holds the
    TTL; or the request timed out, logged). False: the full path runs."""
    started = time.monotonic()
    got = _input(raw, env)
    if got is None or not settings_usable(env):
        return False
    data, sid, _ = got
    event = "pre-tool-use" if pre_tool else "user-prompt-submit"
    if pre_tool and data.get("agent_id"):
        return False  # a subagent's tool call: the full path skips it and says why
    directory = state_dir(env)
    if directory is None or os.path.exists(os.path.join(directory, "serve", "enabled.json")):
        return False  # served mode: as Stop's shortcut, the full path decides
    sessions = os.path.join(directory, "sessions")
    if not (os.access(sessions, os.W_OK) and os.access(os.path.join(directory, "logs"), os.W_OK)):
        return False  # the full path says why on stderr
    root = api_root(env.get("LETTA_BASE_URL"))
    key = (env.get("LETTA_API_KEY") or "").strip()
    if root is None or (not key and root[1] in CLOUD_HOSTS):
        return False
    from ..letta import wire

    if wire.proxied(env):
        return False
    local = _read_json(os.path.join(sessions, sid + ".json"))
    if not local or not _text(local.get("home")) or not os.path.isabs(local["home"]):
        return False
    found = view_usable(_read_shared(local["home"], f"session-{sid}.json"), sid)
    if found is None or local.get("start_for") != found[0]:
        return False
    conv, mark = found
    now = time.time()
    pending = os.path.join(sessions, "pending")
    if not pre_tool and due_marker(pending, now):
        return False  # a retry is due: the full path picks it up (spawn.pickup)

    from ..local import claims

    shown = os.path.join(directory, "shown")
    taken_ms = int(now * 1000)
    ttl = 0
    if pre_tool:
        from .hotinput import fetch_ttl_ms

        ttl = fetch_ttl_ms(env)
        if ttl is None:
            return False
    from ..base import fastjson as json

    if not claims.take_fetch(shown, sid, ttl, taken_ms):
        return True  # another hook of this session fetched less than the TTL ago: the full path skips too
    budget = PRE_TOOL_BUDGET if pre_tool else PROMPT_BUDGET
    headers = {"Accept": "application/json", "User-Agent": "subconscious-letta-lite"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    limit = PRE_TOOL_PAGE if pre_tool else PROMPT_PAGE
    url = f"{root[0]}/conversations/{conv}/messages?limit={limit}&order=desc"
    try:
        status, _, body = wire.get(url, headers, max(0.5, budget - (time.monotonic() - started)))
        page = json.loads(body) if status == 200 else None
    except TimeoutError:
        _log("warning", "hook %s: listing messages of %s timed out (limit %g s)" % (event, conv, budget))
        return True
    except (OSError, ValueError, RecursionError):
        page = None
    if isinstance(page, list) and nothing_new_in(page, mark, limit):
        if not pre_tool:
            arm_safety_net(pending, sid, now)
        return True
    if time.monotonic() - started > HANDOVER_BY[pre_tool]:
        _log("warning", "hook %s: the first page of %s took over %g s; the next hook looks again"
             % (event, conv, HANDOVER_BY[pre_tool]))
        if pre_tool:
            claims.give_back_fetch(shown, sid, taken_ms)
        else:
            arm_safety_net(pending, sid, now)
        return True
    if pre_tool:
        claims.give_back_fetch(shown, sid, taken_ms)  # the full path takes the TTL and fetches
    return False
