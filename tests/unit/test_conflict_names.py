"""Conflict-copy names of every sync engine, recognised for our files only."""

from __future__ import annotations

import datetime as dt
import re
import string

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from subconscious.state import copynames as conflicts
from subconscious.state.copynames import (
    WEAK_ENGINES,
    ConflictCopy,
    Engine,
    TempFile,
    classify,
    conflicts_by_original,
    find_conflicts,
    is_original,
    make_copy_name,
)
from subconscious.state.textforms import TEMP_PREFIX
from tests.harness.sizes import examples

session_ids = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}", fullmatch=True)
host_ids = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", fullmatch=True)
root_names = st.one_of(st.just("conversations.json"), session_ids.map(lambda s: f"session-{s}.json"))
host_names = host_ids.map(lambda h: f"{h}.json")


@st.composite
def originals(draw) -> tuple[str, str]:
    where = draw(st.sampled_from(["root", "hosts"]))
    name = draw(root_names if where == "root" else host_names)
    assume(is_original(name, where=where))
    return where, name


when = st.datetimes(min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2099, 12, 31, 23, 59, 59))
device_ids = st.text(alphabet=string.ascii_uppercase + "234567", min_size=7, max_size=7)
people = st.text(alphabet=string.ascii_letters + string.digits + " '.-_", min_size=1, max_size=20).map(
    str.strip).filter(bool)
computer_names = st.from_regex(r"[A-Za-z][A-Za-z0-9]{0,6}(?:[ -][A-Za-z][A-Za-z0-9]{0,5}){0,2}", fullmatch=True)
linux_hosts = st.from_regex(r"[a-z][a-z0-9-]{0,20}(?:\.[a-z0-9-]{1,10}){0,2}", fullmatch=True)


@st.composite
def copies(draw) -> tuple[str, str, Engine, dict, str]:
    where, original = draw(originals())
    engine = draw(st.sampled_from(list(Engine)))
    kw: dict = {"when": draw(when).replace(microsecond=0)}
    if engine is Engine.SYNCTHING:
        kw["device"] = draw(device_ids)
    elif engine is Engine.DROPBOX:
        kw["variant"] = draw(st.sampled_from([None, "case", "unicode", "shared-folder"]))
        kw["user"] = draw(people)
        kw["number"] = draw(st.none() | st.integers(1, 99))
    elif engine is Engine.ICLOUD:
        kw["number"] = draw(st.integers(2, 500))
    elif engine is Engine.ONEDRIVE:
        kw["host"] = draw(computer_names)
        kw["number"] = draw(st.none() | st.integers(2, 99))
    elif engine is Engine.ONEDRIVE_LINUX:
        kw["host"] = draw(linux_hosts)
        kw["number"] = draw(st.integers(1, 9999))
    elif engine is Engine.NEXTCLOUD:
        kw["variant"] = draw(st.sampled_from([None, "legacy"]))
        kw["user"] = draw(st.none() | people)
    elif engine is Engine.UNISON:
        kw["number"] = draw(st.none() | st.integers(1, 99))
    elif engine is Engine.GOOGLE_DRIVE:
        kw["number"] = draw(st.integers(1, 99))
    elif engine is Engine.RCLONE:
        kw["variant"] = draw(st.sampled_from([None, "legacy", "pathname", "keep-extension"]))
        kw["number"] = draw(st.integers(1, 2) if kw["variant"] in ("legacy", "pathname") else st.integers(1, 999))
    return where, original, engine, kw, make_copy_name(engine, original, **kw)


# --------------------------------------------------------------------------- round trip


@settings(max_examples=examples(600))
@given(copies())
def test_a_copy_built_from_any_original_classifies_back_to_it(case) -> None:
    where, original, engine, kw, name = case
    got = classify(name, [original, name], where=where, include_ambiguous=True)
    assert isinstance(got, ConflictCopy), (name, got)
    assert (got.original, got.engine, got.name) == (original, engine, name)
    assert got.weak == (engine in WEAK_ENGINES) and got.strength == ("weak" if got.weak else "strong")
    assert got.ambiguous == is_original(name, where=where)
    assert not is_original(name, where=where) or got.weak  # only weak names can also be ours


@settings(max_examples=examples(400))
@given(copies())
def test_details_the_engine_encodes_are_parsed(case) -> None:
    where, original, engine, kw, name = case
    got = classify(name, [original, name], where=where, include_ambiguous=True)
    assert isinstance(got, ConflictCopy)
    w = kw["when"]
    if engine is Engine.SYNCTHING:
        assert (got.date, got.time, got.device) == (w.date(), w.time(), kw["device"])
    elif engine is Engine.DROPBOX and kw["variant"] is None:
        assert (got.date, got.user, got.number) == (w.date(), kw["user"], kw["number"])
    elif engine is Engine.DROPBOX:
        assert (got.variant, got.number, got.date) == (kw["variant"], kw["number"], None)
    elif engine is Engine.NEXTCLOUD:
        assert (got.date, got.time, got.variant) == (w.date(), w.time(), kw["variant"])
        if kw["variant"] is None:
            assert got.user == kw["user"]
    elif engine is Engine.UNISON:
        assert (got.date, got.number) == (w.date(), kw["number"])
    elif engine is Engine.ONEDRIVE_LINUX:
        assert (got.host, got.number) == (kw["host"], kw["number"])
    elif engine is Engine.RCLONE:
        assert (got.number, got.variant, got.date) == (kw["number"], kw["variant"], None)
    elif engine is Engine.ONEDRIVE:
        if not kw["host"].rsplit("-", 1)[-1].isdigit():
            assert (got.host, got.number) == (kw["host"], kw["number"])
    else:  # iCloud, Google Drive
        assert got.number == kw["number"]


@settings(max_examples=examples(300))
@given(copies())
def test_strong_copies_need_no_listing_and_weak_ones_need_the_original_beside(case) -> None:
    where, original, engine, kw, name = case
    alone = classify(name, where=where, include_ambiguous=True)
    without_original = classify(name, [name, "other.json"], where=where, include_ambiguous=True)
    if engine in WEAK_ENGINES:
        assert alone is None and without_original is None
    elif engine is Engine.ONEDRIVE_LINUX:  # "<stem>-<host>-safeBackup-N": both may hold dashes;
        assert isinstance(alone, ConflictCopy)  # without a listing the longest reading is taken
        assert name.startswith(alone.original[: -len(".json")] + "-")
        assert len(alone.original) >= len(original)
    else:
        assert isinstance(alone, ConflictCopy) and alone.original == original


@settings(max_examples=examples(200))
@given(st.lists(copies(), min_size=1, max_size=6))
def test_find_conflicts_finds_every_copy_and_groups_it_under_an_original(cases) -> None:
    where = cases[0][0]
    cases = [c for c in cases if c[0] == where]
    originals_, names = {c[1] for c in cases}, {c[4] for c in cases}
    assume(not originals_ & names)
    listing = originals_ | names
    plain = find_conflicts(listing, where=where)
    assert {c.name for c in plain} == {n for n in names if not is_original(n, where=where)}
    everything = find_conflicts(listing, where=where, include_ambiguous=True)
    assert {c.name for c in everything} >= names
    assert all(c.ambiguous for c in everything if c.name not in names)
    exact = {c[4]: c[1] for c in cases if c[2] not in WEAK_ENGINES and c[2] is not Engine.ONEDRIVE_LINUX}
    for c in everything:
        assert c.original in listing and is_original(c.original, where=where)
        if c.name in exact:
            assert c.original == exact[c.name]
    grouped = conflicts_by_original(listing, where=where, include_ambiguous=True)
    assert sorted((c.original, c.name) for cs in grouped.values() for c in cs) == [
        (c.original, c.name) for c in everything]
    assert all(c.original == k for k, cs in grouped.items() for c in cs)


# --------------------------------------------------------------------------- no false positives


@settings(max_examples=examples(600))
@given(originals(), st.lists(st.one_of(root_names, host_names), max_size=8))
@example(("root", "session-abc-2.json"), ["session-abc.json"])
@example(("root", "session-abc-LAPTOP.json"), ["session-abc.json"])
@example(("hosts", "web-1.json"), ["web.json"])
def test_no_valid_name_of_ours_is_ever_classified_as_a_copy(orig, others) -> None:
    where, name = orig
    listing = {name, *others}
    assert classify(name, where=where) is None
    assert classify(name, listing, where=where) is None
    got = classify(name, listing, where=where, include_ambiguous=True)  # opt-in: content decides
    assert got is None or (got.weak and got.ambiguous)


@settings(max_examples=examples(300))
@given(st.one_of(root_names, host_names), st.sampled_from(["root", "hosts"]))
@example("x.sync-conflict-20261130-063049-ZV4TXD3.json", "hosts")
@example("session-a_conflict-20261130-063049.json", "root")
@example("session-a-b-safeBackup-0001.json", "root")
@example("web.conflict1.json", "hosts")
@example("web.path1.json", "hosts")
def test_only_strong_engine_markers_make_a_name_of_our_grammar_invalid(name, where) -> None:
    grammar = conflicts._raw_original(name, where, ())
    if grammar and not is_original(name, where=where):
        assert ("sync-conflict" in name or "_conflict-" in name or "safeBackup" in name
                or re.search(r"\.conflict[1-9]\d*\.json$", name)  # rclone --suffix-keep-extension
                or name.startswith((".syncthing.", "~syncthing~", TEMP_PREFIX)))
        got = classify(name, where=where)
        assert isinstance(got, ConflictCopy) and not got.weak


@pytest.mark.parametrize("where,name,original", [
    ("hosts", "x.sync-conflict-20261130-063049-ZV4TXD3.json", "x.json"),
    ("hosts", "web_conflict-20261130-063049.json", "web.json"),
    ("root", "session-abc_conflict-20261130-063049.json", "session-abc.json"),
    ("root", "session-abc-myhost-safeBackup-0001.json", "session-abc.json"),
])
def test_ids_that_carry_an_engine_marker_are_not_valid_names(where, name, original) -> None:
    """The store should refuse such ids: ``is_original(f"{host}.json", where="hosts")``."""
    assert not is_original(name, where=where)
    got = classify(name, where=where)
    assert isinstance(got, ConflictCopy) and got.original == original and not got.ambiguous


@pytest.mark.parametrize("name,listing", [
    ("session-abc-2.json", ["session-abc.json"]),  # a session with id "abc-2", not an iCloud copy
    ("session-abc 2.json", []),  # iCloud-like, but the original is not there
    ("conversations 2.json", ["session-x.json"]),
    ("conversations (1).json", []),
    ("conversations-LAPTOP.json", []),
    ("conversations 1.json", ["conversations.json"]),  # iCloud starts at 2
    ("conversations (0).json", ["conversations.json"]),
    ("conversations-2.json", ["conversations.json"]),  # Windows refuses all-digit computer names
    ("conversations.sync-conflict-20261330-063049-ZV4TXD3.json", []),  # month 13
    ("conversations.sync-conflict-20261130-063049-zv4txd3.json", []),  # ids are upper-case base32
    ("conversations.sync-conflict-20261130-063049-ZV4TXD.json", []),  # 6 chars
    ("state.sync-conflict-20261130-064824-C2AW434.lock", []),  # not a file of ours
    ("notes (alice's conflicted copy 2026-11-30).txt", []),
    ("session-.json", []),
    (".stignore", []), (".stfolder", []), ("conversations.json", []),
    ("hosts/conversations.sync-conflict-20261130-063049-ZV4TXD3.json", []),  # plain names only
])
def test_names_that_are_not_copies_of_ours(name, listing) -> None:
    assert not isinstance(classify(name, [name, *listing], include_ambiguous=True), ConflictCopy)


def test_captured_and_documented_names() -> None:
    listing = ["conversations.json", "session-s1.json"]
    cases = {
        "conversations.sync-conflict-20261130-063049-ZV4TXD3.json": (Engine.SYNCTHING, "conversations.json"),
        "conversations (Alice's MacBook's conflicted copy 2026-11-30).json": (Engine.DROPBOX, "conversations.json"),
        "conversations (alice's conflicted copy 2026-11-30) (1).json": (Engine.DROPBOX, "conversations.json"),
        "session-s1 (Case Conflict).json": (Engine.DROPBOX, "session-s1.json"),
        "conversations 2.json": (Engine.ICLOUD, "conversations.json"),
        "conversations-DESKTOP-4F2K9QX.json": (Engine.ONEDRIVE, "conversations.json"),
        "conversations-Alice's MacBook Pro-2.json": (Engine.ONEDRIVE, "conversations.json"),
        "session-s1-my-laptop-safeBackup-0001.json": (Engine.ONEDRIVE_LINUX, "session-s1.json"),
        "conversations (conflicted copy alice 2026-11-30 063049).json": (Engine.NEXTCLOUD, "conversations.json"),
        "conversations (conflicted copy 2026-11-30 063049).json": (Engine.NEXTCLOUD, "conversations.json"),
        "conversations_conflict-20261130-063049.json": (Engine.NEXTCLOUD, "conversations.json"),
        "conversations (conflict_on_2026-11-30).json": (Engine.UNISON, "conversations.json"),
        "session-s1 (conflict #2_on_2026-11-30).json": (Engine.UNISON, "session-s1.json"),
        "conversations (1).json": (Engine.GOOGLE_DRIVE, "conversations.json"),
        "conversations.json..path1": (Engine.RCLONE, "conversations.json"),  # seen: Debian's rclone 1.60.1
        "session-s1.json..path2": (Engine.RCLONE, "session-s1.json"),
        "conversations.json.conflict1": (Engine.RCLONE, "conversations.json"),  # 1.66+ documented
        "session-s1.json.path2": (Engine.RCLONE, "session-s1.json"),
        "conversations.conflict3.json": (Engine.RCLONE, "conversations.json"),
    }
    for name, (engine, original) in cases.items():
        got = classify(name, [*listing, name])
        assert isinstance(got, ConflictCopy) and (got.engine, got.original) == (engine, original), name
    st_copy = classify("conversations.sync-conflict-20261130-063049-ZV4TXD3.json")
    assert (st_copy.date, st_copy.time, st_copy.device) == (dt.date(2026, 11, 30), dt.time(6, 30, 49), "ZV4TXD3")
    lin = classify("session-s1-my-laptop-safeBackup-0001.json", listing)
    assert (lin.host, lin.number) == ("my-laptop", 1)
    od = classify("conversations-Alice's MacBook Pro-2.json", listing)
    assert (od.host, od.number, od.weak) == ("Alice's MacBook Pro", 2, True)


def test_a_copy_of_a_copy_belongs_to_the_first_original() -> None:
    name = "x.sync-conflict-20261130-063049-ZV4TXD3.sync-conflict-20261130-070000-ABCDEFG.json"
    got = classify(name, where="hosts")
    assert isinstance(got, ConflictCopy) and got.original == "x.json" and got.device == "ABCDEFG"
    assert not is_original(name, where="hosts")
    got = classify("session-a_conflict-20261130-063049-h-safeBackup-0001.json", ["session-a.json"])
    assert got.original == "session-a.json" and got.engine is Engine.ONEDRIVE_LINUX


def test_ambiguous_weak_match_is_opt_in() -> None:
    listing = ["session-abc.json", "session-abc-LAPTOP.json"]
    assert classify("session-abc-LAPTOP.json", listing) is None
    got = classify("session-abc-LAPTOP.json", listing, include_ambiguous=True)
    assert isinstance(got, ConflictCopy) and got.ambiguous and got.weak and got.host == "LAPTOP"
    assert find_conflicts(listing) == ()
    assert [c.name for c in find_conflicts(listing, include_ambiguous=True)] == ["session-abc-LAPTOP.json"]


def test_the_closest_original_beside_the_copy_wins() -> None:
    # OneDrive-Linux hostnames and session ids both hold dashes: the listing decides.
    name = "session-1f2e-aa-my-box-safeBackup-0002.json"
    assert classify(name, [name, "session-1f2e-aa.json"]).original == "session-1f2e-aa.json"
    assert classify(name, [name, "session-1f2e.json"]).original == "session-1f2e.json"
    got = classify("hostA-WORK-PC.json", ["hostA.json", "hostA-WORK.json"], where="hosts",
                   include_ambiguous=True)
    assert (got.original, got.host) == ("hostA-WORK.json", "PC")


# --------------------------------------------------------------------------- temp files


@settings(max_examples=examples(300))
@given(st.one_of(
    st.text(min_size=0, max_size=40).filter(lambda s: "/" not in s and "\x00" not in s).map(
        lambda s: TEMP_PREFIX + s),
    st.one_of(root_names, host_names, copies().map(lambda c: c[4])).flatmap(
        lambda n: st.sampled_from([f".syncthing.{n}.tmp", f"~syncthing~{n}.tmp", f".unison.{n}.x1.unison.tmp"])),
))
def test_temp_files_are_never_conflicts(name) -> None:
    for where in ("root", "hosts"):
        got = classify(name, [name, "conversations.json"], where=where, include_ambiguous=True)
        assert isinstance(got, TempFile), name
        assert not is_original(name, where=where)


def test_temp_file_owner_and_target() -> None:
    assert classify(".syncthing.session-x.json.tmp") == TempFile(".syncthing.session-x.json.tmp", "syncthing",
                                                                  "session-x.json")
    assert classify("~syncthing~hostA.json.tmp", where="hosts").target == "hostA.json"
    assert classify(TEMP_PREFIX + "conversations.json-12-ab").owner == "subconscious"
    assert classify(".unison.conversations.json.5f3a.unison.tmp").owner == "unison"


@settings(max_examples=examples(500))
@given(st.text(max_size=80), st.lists(st.text(max_size=30), max_size=5), st.sampled_from(["root", "hosts"]))
def test_classify_never_raises(name, listing, where) -> None:
    got = classify(name, listing, where=where, include_ambiguous=True)
    assert got is None or isinstance(got, (ConflictCopy, TempFile))
    if isinstance(got, ConflictCopy):
        assert is_original(got.original, where=where) and got.original != got.name


# --------------------------------------------------------------------------- rclone bisync


@pytest.mark.parametrize("where,name,original,number,variant", [
    # 1.60-1.65 (seen with Debian's 1.60.1): both versions renamed, the original gone
    ("root", "conversations.json..path1", "conversations.json", 1, "legacy"),
    ("root", "conversations.json..path2", "conversations.json", 2, "legacy"),
    ("root", "session-4b1e-9c2a.json..path1", "session-4b1e-9c2a.json", 1, "legacy"),
    ("hosts", "laptop.json..path2", "laptop.json", 2, "legacy"),
    ("hosts", "web.example.com.json..path1", "web.example.com.json", 1, "legacy"),
    # 1.66+ --conflict-loser num (default) or pathname, default --conflict-suffix "conflict"
    ("root", "conversations.json.conflict1", "conversations.json", 1, None),
    ("root", "conversations.json.conflict2", "conversations.json", 2, None),
    ("root", "session-s1.json.conflict12", "session-s1.json", 12, None),
    ("hosts", "laptop.json.conflict3", "laptop.json", 3, None),
    # 1.66+ --conflict-loser pathname --conflict-suffix path
    ("root", "session-s1.json.path1", "session-s1.json", 1, "pathname"),
    ("hosts", "laptop.json.path2", "laptop.json", 2, "pathname"),
    # 1.66+ with --suffix-keep-extension
    ("root", "conversations.conflict1.json", "conversations.json", 1, "keep-extension"),
    ("hosts", "laptop.conflict2.json", "laptop.json", 2, "keep-extension"),
])
def test_rclone_names_need_no_original_beside_them(where, name, original, number, variant) -> None:
    for listing in ((), [name], [name, original]):  # 1.60's "..pathN": nothing else is left
        got = classify(name, listing, where=where)
        assert isinstance(got, ConflictCopy), (name, listing)
        assert (got.engine, got.original, got.number, got.variant, got.weak) == (
            Engine.RCLONE, original, number, variant, False)
    assert not is_original(name, where=where)
    assert [c.name for c in find_conflicts([name], where=where)] == [name]
    assert make_copy_name(Engine.RCLONE, original, number=number, variant=variant) == name


def test_rclone_conflict_in_a_conflict_belongs_to_the_first_original() -> None:
    for name in ("conversations.json..path1..path2", "session-s1.json.path1.path2",
                 "conversations.json.conflict1.conflict2", "session-s1.json..path1.conflict1"):
        got = classify(name)
        assert isinstance(got, ConflictCopy) and got.engine is Engine.RCLONE, name
        assert got.original == name.split(".json")[0] + ".json"
    got = classify("conversations.sync-conflict-20261130-063049-ZV4TXD3.json..path1")
    assert got.engine is Engine.RCLONE and got.original == "conversations.json"


@pytest.mark.parametrize("name,where", [
    ("conversations.json..path3", "root"),  # only two sides
    ("conversations.json.path0", "root"),
    ("conversations.json.conflict0", "root"),  # rclone numbers from 1
    ("conversations.json.conflict", "root"),
    ("conversations.json.Conflict1", "root"),
    ("conversations.json...path1", "root"),  # original would be "conversations.json." (not ours)
    ("notes.txt..path1", "root"),  # not a file of ours
    ("session-.json..path1", "root"),
    ("session-a b.json.conflict1", "root"),  # not a valid session id
    ("hosts..path1", "root"),
    ("quarantine.conflict1", "root"),
    ("-bad.json..path1", "hosts"),  # not a valid host id
    ("conversations.json.conflict1.json", "root"),  # "conversations.json" + keep-extension: not ours
])
def test_rclone_lookalikes_that_are_not_copies_of_ours(name, where) -> None:
    assert not isinstance(classify(name, [name, "conversations.json"], where=where, include_ambiguous=True),
                          ConflictCopy)


@settings(max_examples=examples(300))
@given(originals())
def test_rclone_markers_never_make_one_of_our_names_a_copy(orig) -> None:
    """Our names end in ".json"; rclone's markers follow it, or sit before it with a dot our session
    ids cannot hold -- so no valid name of ours is read as an rclone copy."""
    where, name = orig
    assert classify(name, where=where) is None
    for variant in (None, "legacy", "pathname", "keep-extension"):
        copy = make_copy_name(Engine.RCLONE, name, number=2, variant=variant)
        assert not is_original(copy, where=where)
        got = classify(copy, where=where)
        assert isinstance(got, ConflictCopy) and got.engine is Engine.RCLONE and got.original == name


def test_rclone_partial_files_are_temp_files() -> None:
    got = classify("conversations.json.a1b2c3d4.partial")
    assert got == TempFile("conversations.json.a1b2c3d4.partial", "rclone", "conversations.json")
    assert not is_original("conversations.json.a1b2c3d4.partial")
