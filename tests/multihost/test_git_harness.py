"""Real git: a bare remote and clones per host, syncing LETTA_HOME as a dotfiles repo would.

These fix the baseline the merge driver has to beat: without it, two hosts adding a
session to conversations.json at once end with conflict markers in the JSON.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from subconscious.state.textforms import dumps_canonical
from tests.harness.gitrepos import GitWorld

REPO_ROOT = Path(__file__).resolve().parents[2]
CLAUDE = ".letta/claude"
CONV = f"{CLAUDE}/conversations.json"


def entry(n: int) -> dict:
    return {"conversationId": f"conv-{n}", "agentId": "agent-1"}


def view(*ns: int) -> str:
    return dumps_canonical({f"s{n}": entry(n) for n in ns}, expand=1)


def two_hosts_adding_a_session_each(world: GitWorld):
    a, b = world.clone("hostA"), world.clone("hostB")
    a.write(CONV, view(1))
    a.commit("s1")
    assert a.push().ok
    assert b.pull().ok and json.loads(b.read(CONV)) == {"s1": entry(1)}
    a.write(CONV, view(1, 2))
    a.commit("hostA: s2")
    b.write(CONV, view(1, 3))
    b.commit("hostB: s3")
    assert a.push().ok
    return a, b


def test_concurrent_edits_of_the_same_json_conflict_without_a_driver(git_world: GitWorld) -> None:
    a, b = two_hosts_adding_a_session_each(git_world)
    assert not b.push(check=False).ok  # rejected: behind the remote
    r = b.pull()  # --rebase
    assert not r.ok
    assert "CONFLICT (content)" in r.output
    assert r.conflicted == (CONV,)
    assert b.rebase_in_progress()
    assert b.has_conflict_markers(CONV)
    with pytest.raises(json.JSONDecodeError):
        json.loads(b.read(CONV))
    b.abort()
    assert not b.rebase_in_progress() and json.loads(b.read(CONV)) == {"s1": entry(1), "s3": entry(3)}

    r = b.pull(rebase=False)  # a merge pull fails the same way
    assert not r.ok and r.conflicted == (CONV,) and b.has_conflict_markers(CONV)


def test_attributes_without_the_driver_config_fall_back_to_a_text_merge(git_world: GitWorld) -> None:
    """The template's .gitattributes is versioned; the driver config is not."""
    a, b = git_world.clone("hostA"), git_world.clone("hostB")
    a.write(".gitattributes", (REPO_ROOT / "sync" / "gitattributes").read_text())
    a.write(".gitignore", (REPO_ROOT / "sync" / "gitignore").read_text())
    a.commit("sync kit")
    assert a.push().ok and b.pull().ok

    attrs = {p: b.git("check-attr", "merge", "--", p).stdout.strip().rsplit(": ", 1)[-1]
             for p in (CONV, f"{CLAUDE}/session-abc-1.json", f"{CLAUDE}/hosts/hostA.json",
                       f"{CLAUDE}/quarantine/x.json", "package.json", "conversations.json")}
    assert attrs == {CONV: "subconscious", f"{CLAUDE}/session-abc-1.json": "subconscious",
                     f"{CLAUDE}/hosts/hostA.json": "subconscious", f"{CLAUDE}/quarantine/x.json": "unspecified",
                     "package.json": "unspecified", "conversations.json": "unspecified"}
    ignored = b.git("check-ignore", "--no-index", "--",
                    f"{CLAUDE}/.subconscious-tmp-conversations.json-1-ab", f"{CLAUDE}/quarantine/x.json",
                    f"{CLAUDE}/backups/2026-11-30/y.json",
                    f"{CLAUDE}/conversations.sync-conflict-20261130-063049-ZV4TXD3.json",
                    f"{CLAUDE}/hosts/.syncthing.hostA.json.tmp", CONV, f"{CLAUDE}/hosts/hostA.json",
                    check=False).stdout.split()
    assert ignored == [f"{CLAUDE}/.subconscious-tmp-conversations.json-1-ab", f"{CLAUDE}/quarantine/x.json",
                       f"{CLAUDE}/backups/2026-11-30/y.json",
                       f"{CLAUDE}/conversations.sync-conflict-20261130-063049-ZV4TXD3.json",
                       f"{CLAUDE}/hosts/.syncthing.hostA.json.tmp"]

    assert b.merge_driver("subconscious") is None
    b.write(CONV, view(1))
    b.commit("s1")
    assert b.push().ok and a.pull().ok
    a.write(CONV, view(1, 2))
    a.commit("s2")
    assert a.push().ok
    b.write(CONV, view(1, 3))
    b.commit("s3")
    r = b.pull()
    assert not r.ok and r.conflicted == (CONV,) and b.has_conflict_markers(CONV)


def test_a_configured_driver_gets_three_versions_and_its_result_is_kept(git_world: GitWorld,
                                                                      tmp_path: Path) -> None:
    """The plumbing `subconscious merge-driver %O %A %B` will use, exercised with a tiny
    stand-in driver (a key union) so the harness and the template are proven now."""
    driver = tmp_path / "union_driver.py"
    log = tmp_path / "driver.log"
    driver.write_text(textwrap.dedent(f"""
        import json, sys
        o, a, b = sys.argv[1:4]
        with open({str(log)!r}, "a") as f:
            f.write(json.dumps({{"argv": sys.argv[1:], "o": open(o).read(), "b": open(b).read()}}) + "\\n")
        merged = {{**json.load(open(b)), **json.load(open(a))}}
        open(a, "w").write(json.dumps(merged, sort_keys=True, indent=2) + "\\n")
    """))
    a, b = git_world.clone("hostA"), git_world.clone("hostB")
    a.write(".gitattributes", (REPO_ROOT / "sync" / "gitattributes").read_text())
    a.commit("sync kit")
    assert a.push().ok and b.pull().ok
    for c in (a, b):
        c.set_merge_driver("subconscious", f"{sys.executable} {driver} %O %A %B")
    a.write(CONV, view(1))
    a.commit("s1")
    assert a.push().ok and b.pull().ok
    a.write(CONV, view(1, 2))
    a.commit("s2")
    assert a.push().ok
    b.write(CONV, view(1, 3))
    b.commit("s3")

    r = b.pull()
    assert r.ok, r.output
    assert json.loads(b.read(CONV)) == {"s1": entry(1), "s2": entry(2), "s3": entry(3)}
    calls = [json.loads(ln) for ln in log.read_text().splitlines()]
    assert len(calls) == 1 and len(calls[0]["argv"]) == 3
    assert json.loads(calls[0]["o"]) == {"s1": entry(1)}  # %O is the common ancestor
    assert b.push().ok and a.pull().ok
    assert json.loads(a.read(CONV)) == json.loads(b.read(CONV))


def test_per_host_shards_merge_without_any_conflict(git_world: GitWorld) -> None:
    a, b = git_world.clone("hostA"), git_world.clone("hostB")
    a.write(f"{CLAUDE}/hosts/hostA.json", dumps_canonical({"conversations": {"s1": entry(1)}}, expand=2))
    a.commit("hostA shard")
    b.write(f"{CLAUDE}/hosts/hostB.json", dumps_canonical({"conversations": {"s2": entry(2)}}, expand=2))
    b.commit("hostB shard")
    assert a.push().ok
    r = b.pull()
    assert r.ok and r.conflicted == ()
    assert b.push().ok and a.pull().ok
    for c in (a, b):
        assert sorted(p.name for p in (c.path / CLAUDE / "hosts").iterdir()) == ["hostA.json", "hostB.json"]
