"""Fuzzing (issue 9): generated hook stdin for all four hooks, and generated contents of every state file
read through the store, ``status`` and doctor's analysis. Whatever comes in: a hook returns 0 without a
traceback, the readers never raise, and a write still goes through. The case count is printed (``-s``)
and recorded as a property of each test; together they run at least 10,000 cases (most are hook
inputs: those are cheap; a generated home costs a few file writes and several full reads)."""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from subconscious.hooks import run as hookrun
from subconscious.state.store.core import Store, StoreError

BATCH = 4  # inputs drawn per hypothesis example where a case is cheap (drawing is most of the time)
HOOK_CASES = 2_152  # per hook: 8,608 over the four (a multiple of BATCH)
PARSE_CASES = 1_500  # one state file's bytes through read_json (what doctor and the merge driver read)
STATE_CASES = 600  # a whole home of generated files through Store.read/sessions, status, and writes
DOCTOR_CASES = 300  # doctor's analysis (it asks git, so fewer)
fuzz = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))
COUNTS: dict[str, int] = {}


@pytest.fixture(scope="module", autouse=True)
def total():
    yield
    n = sum(COUNTS.values())
    print(f"\nfuzz: {n} cases ({', '.join(f'{k} {v}' for k, v in sorted(COUNTS.items()))})")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """One network-free environment for the in-process runs: the server address refuses connections."""
    root = tmp_path_factory.mktemp("fuzz")
    (root / "project").mkdir()
    env = {"HOME": str(root / "user"), "LETTA_HOME": str(root / "lh"), "SUBCONSCIOUS_HOST": "laptop",
           "SUBCONSCIOUS_STATE_DIR": str(root / "local"), "LETTA_BASE_URL": "http://127.0.0.1:9",
           "SUBCONSCIOUS_FETCH_TTL": "0", "CLAUDE_PROJECT_DIR": str(root / "project")}
    saved = {k: os.environ.get(k) for k in [*env, "LETTA_API_KEY", "LETTA_AGENT_ID", "LETTA_MODE", "LETTA_DEBUG"]}
    for k in saved:
        os.environ.pop(k, None)
    os.environ.update(env)
    from subconscious.delivery import spawn

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(spawn, "spawn_worker", lambda *a, **k: None)  # never start a worker from a test process
        mp.setattr(os, "fsync", lambda fd: None)  # durability is not what is fuzzed; fsyncs would be most of the time
        yield root
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def _state(root: Path) -> Path:
    return root / "lh" / ".letta" / "claude"


# ------------------------------------------------------------------ generated JSON-ish text

# Generating is most of a case's time: values come mostly from pools of hostile and ordinary ones
# (a draw from a pool is cheap), with some freely generated scalars for variety.
_POOL = [
    None, True, False, 0, -1, 1, 7, 2**53, -(2**63), 10**30, 1.5, -0.0, 1e308, "", "s1", "s2", "laptop", "beta",
    "abc_conflict-20261130-063049", "a-b-safeBackup-0001", "../../etc/passwd", "/", "x" * 129, "1:0", "0:0",
    "999999999999999:999999999", "1:-1", "conv-1", "agent-1", "\u2028", "é", "\x00", "<<<<<<< HEAD", [], {},
    [[[[[[[[1]]]]]]]], {"a": {"b": {"c": {}}}}, ["s1", 1, None], {"conversationId": "conv-1"}, {"sessionId": "s1"},
    {"hlc": "1:0", "host": "beta"}, {"deleted": True, "hlc": "2:0", "host": "beta"}, {"value": [1, 2]},
]
_scalar = st.one_of(st.sampled_from(_POOL), st.integers(), st.text(max_size=6), st.floats(allow_nan=False))
json_values = st.one_of(_scalar, st.lists(_scalar, max_size=3), st.dictionaries(st.sampled_from(["a", "s1", "", "k"]), _scalar, max_size=3))
# Text that is almost JSON: what a parser chokes on (depth, digits, constants, markers, surrogates, BOM).
_hostile_pieces = st.sampled_from([
    "[" * 600, "]" * 600, '{"a":' * 600, "[" * 3000, '{"a":[' * 1500, "]" * 3000, "9" * 5000, "-" + "1" * 4400, "NaN", "Infinity", "-Infinity",
    '"\\ud800"', '"\\udfff\\ud800"', "\ufeff", "<<<<<<< HEAD\n", "=======\n", ">>>>>>> other\n", "\x00", "\\",
    '"', "{", "}", "[", "]", ",", ":", "1e999", "0x10", "true", "null", " ", "\n", '"session_id"', '"cwd"',
    *(json.dumps(v) for v in _POOL),
])


@st.composite
def hostile_text(draw) -> str:
    return "".join(draw(st.lists(_hostile_pieces, min_size=1, max_size=6)))


def _hook_object(event: str, root: Path):
    transcript = st.sampled_from([str(root / "t.jsonl"), str(root / "missing.jsonl"), "", "/", "\x00"])
    sid = st.one_of(st.sampled_from(["s1", "abc_conflict-20261130-063049", "a-b-safeBackup-0001", "x" * 129,
                                     "../x", "", "s 1", "s1\n"]), st.text(max_size=20), json_values)
    return st.fixed_dictionaries(
        {"session_id": sid, "hook_event_name": st.sampled_from([event, "Stop", 3])},
        optional={"cwd": st.one_of(st.just(str(root / "project")), st.text(max_size=20), json_values),
                  "transcript_path": st.one_of(transcript, json_values),
                  "prompt": st.one_of(st.text(max_size=50), json_values),
                  "tool_name": st.one_of(st.sampled_from(["Read", "Bash"]), json_values),
                  "tool_input": json_values, "source": st.sampled_from(["startup", "resume", 7]),
                  "stop_hook_active": json_values},
    ).map(json.dumps)


def _stdin(event: str, root: Path):
    return st.one_of(
        st.binary(max_size=200),
        hostile_text().map(lambda t: t.encode("utf-8", "surrogatepass")),
        _hook_object(event, root).map(str.encode),
        _hook_object(event, root).map(lambda t: b"\xef\xbb\xbf" + t.encode()),
        _hook_object(event, root).map(lambda t: t[: len(t) // 2].encode()),  # cut short
        json_values.map(lambda v: json.dumps(v).encode()),  # not an object
    )


class _Bytes(io.StringIO):
    """stdin as Claude Code gives it: bytes under ``.buffer``."""

    def __init__(self, data: bytes):
        super().__init__()
        self.buffer = io.BytesIO(data)


@pytest.mark.parametrize("event", ["session-start", "user-prompt-submit", "pre-tool-use", "stop"])
def test_fuzz_hook_stdin(world: Path, event: str, capfd, record_property):
    (world / "t.jsonl").write_text('{"type": "user", "message": {"content": "hi"}}\n')
    count = 0

    @settings(fuzz, max_examples=HOOK_CASES // BATCH)
    @given(st.lists(_stdin(event, world), min_size=BATCH, max_size=BATCH))
    def case(inputs: list[bytes]):
        nonlocal count
        for raw in inputs:
            count += 1
            out = io.StringIO()
            assert hookrun.run(event, stdin=_Bytes(raw), stdout=out) == 0
            printed = capfd.readouterr()
            assert "Traceback" not in printed.out + printed.err + out.getvalue(), (raw[:200], printed)

    case()
    COUNTS[f"hook {event}"] = count
    record_property("fuzz_cases", count)
    assert count >= HOOK_CASES * 0.9
    log = (world / "local" / "logs" / "subconscious.log").read_text()
    assert "Traceback" not in log and f"hook {event}: malformed input on stdin" in log


# ------------------------------------------------------------------ generated state files


def _ours(kind: str):
    """Values shaped like our files with every field fuzzed, so the record parsers are reached too."""
    entry = st.one_of(
        json_values,
        st.fixed_dictionaries({}, optional={"conversationId": json_values, "agentId": json_values,
                                            "hlc": st.one_of(st.sampled_from(["1:0", "0:0", "x", "1:-1"]), json_values),
                                            "host": st.one_of(st.sampled_from(["laptop", "beta", ""]), json_values),
                                            "deleted": json_values}),
    )
    keys = st.one_of(st.sampled_from(["s1", "s2", "abc_conflict-20261130-063049", "../x", ""]), st.text(max_size=6))
    view = st.dictionaries(keys, entry, max_size=5)
    if kind == "view":
        return view
    if kind == "shard":
        return st.fixed_dictionaries({}, optional={
            "format": st.one_of(st.just(1), json_values), "host": st.one_of(st.just("beta"), json_values),
            "clock": st.one_of(st.just("5:0"), json_values), "written": json_values,
            "conversations": st.one_of(view, json_values), "settings": st.one_of(st.dictionaries(keys, entry, max_size=3), json_values)})
    return st.fixed_dictionaries({}, optional={
        "sessionId": st.one_of(st.just("s1"), json_values), "lastProcessedIndex": st.one_of(st.integers(-2, 10**20), json_values),
        "conversationId": json_values, "lastBlockValues": json_values, "hlc": json_values, "host": json_values,
        "startedAt": json_values, "lastSeenMessageId": json_values})


def _contents(kind: str):
    return st.one_of(
        st.binary(max_size=120),
        hostile_text().map(lambda t: t.encode("utf-8", "surrogatepass")),
        _ours(kind).map(lambda v: json.dumps(v).encode()),
        _ours(kind).map(lambda v: b"\xef\xbb\xbf" + json.dumps(v, indent=1).encode()),
        st.tuples(_ours(kind), _ours(kind)).map(
            lambda ab: f"<<<<<<< HEAD\n{json.dumps(ab[0])}\n=======\n{json.dumps(ab[1])}\n>>>>>>> x\n".encode()),
    )


FILES = {"conversations.json": "view", "hosts/beta.json": "shard", "hosts/laptop.json": "shard",
         "session-s1.json": "session", "session-s1.sync-conflict-20261130-063049-ZV4TXD3.json": "session"}


def _home(root: Path, contents: dict[str, bytes]) -> Path:
    state = _state(root)
    shutil.rmtree(state, ignore_errors=True)
    (state / "hosts").mkdir(parents=True)
    for name, raw in contents.items():
        (state / name).write_bytes(raw)
    return state


def test_fuzz_one_state_file_through_read_json(world: Path, record_property):
    from subconscious.state.files import read_json

    count = 0
    state = _state(world)
    (state / "hosts").mkdir(parents=True, exist_ok=True)

    named = st.sampled_from(sorted(FILES)).flatmap(lambda name: st.tuples(st.just(name), _contents(FILES[name])))

    @settings(fuzz, max_examples=PARSE_CASES // BATCH)
    @given(st.lists(st.tuples(named, st.integers(0, 3)), min_size=BATCH, max_size=BATCH))
    def case(inputs: list[tuple[tuple[str, bytes], int]]):
        nonlocal count
        for (name, raw), one_in_4 in inputs:
            count += 1
            keep = one_in_4 == 0  # setting aside writes two files: not every case
            path = state / name
            path.write_bytes(raw)
            result = read_json(path, root=state, host="laptop", keep=keep)
            assert result.exists and result.raw == raw
            assert result.values or result.problems
            for p in result.problems:
                assert p.kind in ("unparseable", "git-conflict") and (p.kept_at is not None) == keep
                if p.kept_at:
                    assert Path(p.kept_at).read_bytes() == raw and len(Path(p.kept_at).name.encode()) <= 200

    case()
    COUNTS["read_json"] = count
    record_property("fuzz_cases", count)
    assert count >= PARSE_CASES * 0.9


homes = st.fixed_dictionaries({}, optional={name: _contents(kind) for name, kind in FILES.items()})


def test_fuzz_state_files_through_the_store_and_status(world: Path, record_property):
    from subconscious.commands.status import collect

    count = 0

    @settings(fuzz, max_examples=STATE_CASES)
    @given(homes, st.integers(0, 7))
    def case(contents: dict[str, bytes], one_in_8: int):
        nonlocal count
        count += 1
        state = _home(world, contents)
        write = one_in_8 == 0  # a write fsyncs: not every case
        store = Store(state, "laptop", world / "local" / "locks", world / "local" / "clocks", read_only=not write)
        snap = store.read()
        list(store.sessions())
        store.session_problems("s1")
        assert isinstance(snap.problems, list)
        if write:  # one bad file never blocks a write, and what was written reads back
            try:
                store.put_conversation("s9", "conv-9", "agent-9")
            except StoreError as exc:  # by design: this host's own shard says a newer version wrote it
                assert "newer subconscious" in str(exc)
                return
            assert store.read().get("s9").conversation_id == "conv-9"
        else:
            info = collect()
            assert info["found"]["problems"] >= 0

    case()
    COUNTS["state files"] = count
    record_property("fuzz_cases", count)
    assert count >= STATE_CASES * 0.9


def test_fuzz_state_files_through_doctor(world: Path, record_property):
    from subconscious.doctor.checks import diagnose

    count = 0

    @settings(fuzz, max_examples=DOCTOR_CASES)
    @given(homes)
    def case(contents: dict[str, bytes]):
        nonlocal count
        count += 1
        _home(world, contents)
        report = diagnose(dict(os.environ), str(world / "project"))
        assert report.home is not None and all(f.kind for f in report.findings)

    case()
    COUNTS["doctor"] = count
    record_property("fuzz_cases", count)
    assert count >= DOCTOR_CASES * 0.9
