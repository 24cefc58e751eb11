"""Red team (R2): the racily-clean rule of the read-only caches (state/sessioncache.py) compares a file's
times, written by the clock of the machine that holds the file, with this machine's clock. On a network
file system (NFS, SMB, a NAS) whose server clock runs behind ours, a file changed a moment ago looks
older than the racy window at once, and a same-size rewrite in place within the same tick of the
server's clock keeps the identity the cache recorded: ``status`` shows the old cursor, ``doctor``'s
encryption scan misses a plain value. The file times here are the model of test_session_cache (a 2 s
tick, as FAT's or a coarse server's), stamped by a server clock 10 s behind the model clock."""

from __future__ import annotations

import os

from .test_doctor_quiet_files import blocks, scanned
from .test_session_cache import SIDS, TICK, World

BEHIND = 10_000_000_000  # the file server's clock, behind this machine's by 10 s (no NTP on the NAS)


class ServerBehind(World):
    def write(self, path, digit, replace, garbage=False, keep_mtime=False):
        super().write(path, digit, replace, garbage=garbage, keep_mtime=keep_mtime)
        m, c = self.state["times"][os.fspath(path)]
        self.state["times"][os.fspath(path)] = (m if keep_mtime else m - BEHIND, c - BEHIND)


def test_status_shows_a_same_tick_rewrite_on_a_server_whose_clock_is_behind(tmp_path):
    world = ServerBehind(tmp_path)
    world.state["now"] += 10 * TICK
    target = world.targets()[0]  # the first session's view, rewritten in place (upstream's plugin does)
    world.write(target, 5, replace=False)
    world.state["now"] += TICK // 4
    assert {sid: s.last_processed_index for sid, s, _ in world.read()}[SIDS[0]] == 5
    world.write(target, 6, replace=False)  # the same server tick, size and inode
    world.state["now"] += 10 * TICK
    got = world.read()
    assert got == world.read(cached=False)
    assert {sid: s.last_processed_index for sid, s, _ in got}[SIDS[0]] == 6


def test_doctor_scan_finds_a_plain_value_written_in_the_same_server_tick(tmp_path):
    world = ServerBehind(tmp_path)
    world.state["now"] += 10 * TICK
    target = world.targets()[1]
    blocks(world, target, 123456789)  # not a cached value: nothing to report
    world.state["now"] += TICK // 4
    assert scanned(world) == []
    blocks(world, target, "plain 5")  # the same size and server tick: a plain value
    world.state["now"] += 10 * TICK
    scan = scanned(world)
    assert scan == scanned(world, cached=False) and [s[0] for s in scan] == [os.fspath(target)]
