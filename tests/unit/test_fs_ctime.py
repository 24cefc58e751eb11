"""Caches that a file system without a real change time cannot fool (issue 37, item 3; state/fskind.py).

On sshfs, an rclone mount or vfat the ctime *is* the mtime (on Windows ``st_ctime`` is the creation time): a
same-size rewrite whose mtime is put back keeps every time a cache compares. There the file system seam
tells no identity (file and directory tokens are None), so ``sessions``/``status``, ``doctor``'s scan and a
hook's listing read the files again. The file system's kind comes from its mount; here it is injected."""
from __future__ import annotations

import os

import pytest

from subconscious.state import fskind
from subconscious.state.fs import RealFS
from tests.unit.test_session_cache import SIDS, TICK, ModelTimes, World

MOUNTINFO = """\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:1 / / rw,relatime - ext4 /dev/vda rw
90 27 0:52 / /home/me/remote rw,nosuid,nodev,relatime - fuse.sshfs me@server:/data rw,user_id=0
91 27 0:53 / /home/me/gdrive rw,nosuid,nodev,relatime shared:5 - fuse.rclone gdrive: rw,user_id=0
92 27 8:17 / /media/usb rw,relatime - vfat /dev/sdb1 rw,fmask=0022
"""


def test_the_kind_of_a_mount_is_read_from_mountinfo():
    assert fskind.mount_type(MOUNTINFO, 254, 1) == "ext4"
    assert fskind.mount_type(MOUNTINFO, 0, 52) == "fuse.sshfs"
    assert fskind.mount_type(MOUNTINFO, 0, 53) == "fuse.rclone"  # (an optional field before the "-")
    assert fskind.mount_type(MOUNTINFO, 8, 17) == "vfat"
    assert fskind.mount_type(MOUNTINFO, 9, 9) is None
    assert {"ext4", "apfs", "btrfs", "xfs"} <= fskind.KEEPS
    assert not {"fuse.sshfs", "fuse.rclone", "vfat", "exfat", "fuseblk", "cifs", None} & fskind.KEEPS


@pytest.fixture
def kind(monkeypatch):
    """Make every device look like a file system of the given type."""
    def set_kind(name: str | None) -> None:
        monkeypatch.setattr(fskind, "_memo", {})
        monkeypatch.setattr(fskind, "fs_type", lambda path, dev=None: name)
    return set_kind


@pytest.mark.parametrize("name", ["fuse.sshfs", "fuse.rclone", "vfat", None])
def test_the_seam_tells_no_identity_where_the_change_time_is_not_kept(tmp_path, kind, name):
    (tmp_path / "f.json").write_text("{}")
    kind(name)
    fs = RealFS()
    assert fs.file_token(tmp_path / "f.json") is None and fs.listing_token(tmp_path) is None
    kind("ext4")
    assert fs.file_token(tmp_path / "f.json") and fs.listing_token(tmp_path)


def test_windows_never_trusts_a_change_time(tmp_path, monkeypatch):
    monkeypatch.setattr(fskind, "_memo", {})
    monkeypatch.setattr(fskind.os, "name", "nt")
    assert fskind.keeps_change_time(tmp_path) is False


def test_where_the_ctime_is_the_mtime_a_rewrite_with_its_time_put_back_is_read_again(tmp_path, kind, monkeypatch):
    """Red team finding: ``sessions --json`` kept cursor 100 while the file held 199: a same-size rewrite with
    its mtime put back, on a file system that reports the mtime as the ctime."""
    real_token = ModelTimes.file_token

    def mtime_as_ctime(self, path):  # what sshfs, rclone mount and vfat report
        token = real_token(self, path)
        return token if not token else (*token[:4], token[3])
    monkeypatch.setattr(ModelTimes, "file_token", mtime_as_ctime)
    kind("fuse.sshfs")
    world = World(tmp_path)
    world.state["now"] += 10 * TICK
    target = world.targets()[1]
    world.write(target, 5, replace=False)
    world.state["now"] += 10 * TICK
    world.read()
    world.read()  # trusted by now, if it were kept
    world.write(target, 6, replace=False, keep_mtime=True)
    world.state["now"] += 10 * TICK
    got = world.read()
    assert got == world.read(cached=False)
    assert {sid: s.last_processed_index for sid, s, _ in got}[SIDS[0]] == 6
