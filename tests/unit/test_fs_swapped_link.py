"""RealFS confined to a home: a directory below it swapped for a symbolic link AFTER the "is a directory on
the way a link?" check and before the open is still never followed (it checked, then opened by path:
the swap in between read or wrote what lies behind the link). The swap is made deterministic by doing it
inside the check, which then answers what it saw: no link."""

from __future__ import annotations

import os

import pytest

from subconscious.state.fs import RealFS


class SwapAfterCheck(RealFS):
    """Every ``_linked`` check sees a real directory (it raced the swap): the directory is a link to
    ``target`` when the operation itself runs."""

    def __init__(self, victim, target):
        super().__init__()
        self.victim, self.target = victim, target

    def _linked(self, path):
        if not self.victim.is_symlink():
            os.rename(self.victim, self.victim.with_name("was-hosts"))
            self.victim.symlink_to(self.target, target_is_directory=True)
        return False  # what every check saw: each one raced the swap


@pytest.fixture
def world(tmp_path):
    home = tmp_path / "home"
    (home / "hosts").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "h1.json").write_text('{"secret": "ssh key"}')
    fs = SwapAfterCheck(home / "hosts", outside).confined(home)
    return fs, home, outside


def test_read_never_follows_a_directory_swapped_for_a_link(world):
    fs, home, outside = world
    got = fs.read(home / "hosts" / "h1.json")
    assert not got.ok and b"ssh key" not in got.data
    assert got.status == "symlink"


def test_writes_never_go_through_a_directory_swapped_for_a_link(world):
    fs, home, outside = world
    with pytest.raises(OSError):
        fs.put_temp(home / "hosts", "h1.json", b"ours")
    assert sorted(os.listdir(outside)) == ["h1.json"]
    with pytest.raises(OSError):
        fs.create_new(home / "hosts" / "lock", b"ours")
    assert sorted(os.listdir(outside)) == ["h1.json"]
    (home / "plain").write_bytes(b"x")
    with pytest.raises(OSError):
        fs.rename(home / "plain", home / "hosts" / "moved")
    assert sorted(os.listdir(outside)) == ["h1.json"]
    assert fs.unlink(home / "hosts" / "h1.json") is False
    with pytest.raises(OSError):  # the atomic swap too (renameat2 relative to the walked directories)
        fs.exchange(home / "plain", home / "hosts" / "h1.json")
    assert (home / "plain").read_bytes() == b"x"
    assert (outside / "h1.json").read_text() == '{"secret": "ssh key"}'
