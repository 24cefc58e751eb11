"""Issue 24 item 5: the shortcuts a bulk read (``status``, ``doctor``, ``gc``) takes find exactly what the
plain scans find. A session's copies and displaced versions are searched among a directory's unusual names
only, which session files a listing names is one scan of the joined listing, and the copies named like a
session are found by one sorted walk: on any listing of session files, copies of every engine, displaced
versions and stray names, each gives what the name-by-name scan it replaced gives."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from subconscious.state.conflicts import copies
from subconscious.state.sessions.listcache import unusual
from subconscious.state.copynames import ConflictCopy, Engine, classify, make_copy_name
from subconscious.state.publish import displaced_names, displaced_prefix
from subconscious.state.sessions.reading import Listing, SessionReading, _sid_of
from tests.harness.sizes import examples

_SEP = re.compile(r"[-_]")


def ambiguous_by_scan(names: list[str]) -> set[str]:
    """What copies.ambiguous_copies computed before it walked sorted stems: a look-up per hyphen."""
    listing = frozenset(names)
    out = set()
    for name in names:
        if name.startswith("session-") and name.count("-") > 1:
            if name.endswith(".json") and not any(name[: m.start()] + ".json" in listing
                                                  for m in _SEP.finditer(name, 9, len(name) - 5)):
                continue
            found = classify(name, listing, where="root", include_ambiguous=True)
            if isinstance(found, ConflictCopy) and found.ambiguous:
                out.add(name)
    return out


def unusual_by_scan(names: list[str]) -> list[str]:
    """listcache.unusual, one name at a time: not plain, or a plain session name extending another's stem."""
    out = {n for n in names if not copies.plain(n) or "\n" in n}
    stems = {n[:-5] for n in names if _sid_of(n) and "\n" not in n}  # (plain-looking copies' names too)
    out |= {s + ".json" for s in stems for p in stems if len(p) < len(s) and s.startswith(p) and s[len(p)] in "-_"}
    return sorted(out)


def view_ids_by_scan(names: list[str]) -> list[str]:
    copy_names = ambiguous_by_scan(names)
    out = []
    for name in names:
        if name in copy_names or not copies.plain(name):
            continue
        sid = _sid_of(name)
        if sid is not None:
            out.append(sid)
    return out


ids = st.sampled_from(["a", "ab", "abc", "abc-LAPTOP", "abc_x", "abc-d", "abc-d-PC", "b1", "b1-2",
                       "abc-PC-safeBackup-0001", "abc_conflict-20261130-063049", "x" * 20])
engines = st.sampled_from(list(Engine))


@st.composite
def listings(draw) -> list[str]:
    sids = draw(st.lists(ids, max_size=8, unique=True))
    names = [f"session-{s}.json" for s in sids]
    for s in draw(st.lists(st.sampled_from(sids), max_size=6)) if sids else ():
        original = f"session-{s}.json"
        kind = draw(st.integers(0, 2))
        if kind == 0:
            names.append(make_copy_name(draw(engines), original, number=draw(st.sampled_from([None, 2, 3]))))
        elif kind == 1:
            names.append(displaced_prefix(original) + draw(st.sampled_from(["0badc0de", "12-0badc0de", "zz"])))
        else:
            names.append(original[:-5] + draw(st.sampled_from([" 2.json", ".json.tmp", "-.json", "_.json"])))
    names += draw(st.lists(st.sampled_from(["conversations.json", "hosts", "backups", "floor.json",
                                            ".subconscious-tmp-x", "session-.json", "notes.txt",
                                            "session-a\nb.json"]), max_size=3, unique=True))
    return list(dict.fromkeys(draw(st.permutations(names))))


@settings(max_examples=examples(300), deadline=None)
@given(listings())
def test_the_bulk_reads_shortcuts_find_what_the_scans_find(names):
    assert copies.ambiguous_copies(names) == ambiguous_by_scan(names)
    assert unusual(names) == unusual_by_scan(names)
    assert SessionReading._view_ids(names) == view_ids_by_scan(names)
    index = Listing(names)
    cached = Listing(unusual(names), complete=False)  # what a hook's read keeps of the directory
    for name in {n for n in names if _sid_of(n)} | {"session-abc.json", "session-zz.json"}:
        assert index.displaced(name) == displaced_names(names, name) == cached.displaced(name)
        assert index.copies(name) == copies.find(names, "root", name)
        assert (name in index) == (name in names)
        if name in names:  # (the cached names take the session's own file as present: a hook reads it)
            assert [c.name for c in cached.copies(name)] == [c.name for c in index.copies(name)]


# ids of one length (as Claude Code's UUIDs are), some with a hyphen inside, OneDrive-style names that extend
# them, and now and then a shorter or longer id: the shortcut for a listing whose session names have one length
same_length = st.sampled_from(["aaaa", "bbbb", "ab-c", "a_bc", "abcd"])
extensions = st.sampled_from(["-PC", "_x", "-LAPTOP", "-b-c", "x", "-safeBackup-0001", "_conflict-20261130-063049"])


@st.composite
def uniform_listings(draw) -> list[str]:
    sids = draw(st.lists(same_length, min_size=1, max_size=5, unique=True))
    names = [f"session-{s}.json" for s in sids]
    for s in draw(st.lists(st.sampled_from(sids), max_size=4)):
        names.append(f"session-{s}{draw(extensions)}.json")
    names += draw(st.lists(st.sampled_from(["session-ab.json", "session-a.json", "session-abcdefgh.json",
                                            "conversations.json", "hosts", "session-aaaa.json.tmp",
                                            "session-bbbb.sync-conflict-20261202-020000-ABCDEFG.json"]),
                           max_size=3, unique=True))
    return list(dict.fromkeys(draw(st.permutations(names))))


@settings(max_examples=examples(300), deadline=None)
@given(uniform_listings())
def test_unusual_names_of_a_listing_of_one_id_length_are_what_the_scan_finds(names):
    assert unusual(names) == unusual_by_scan(names)
