"""pytest fixtures for real Syncthing pairs and git repos.

Enable with ``-p tests.harness.sync_fixtures`` or ``pytest_plugins`` in tests/conftest.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.harness.gitrepos import GitWorld
from tests.harness.syncthing import SyncthingPair, ensure_syncthing


@pytest.fixture(scope="session")
def syncthing_binary() -> str:
    """Path of syncthing; installs the Debian package once if missing (never skips)."""
    return ensure_syncthing()


@pytest.fixture
def syncthing_pair(syncthing_binary: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SyncthingPair]:
    """A fresh, connected, in-sync pair A<->B (folder ``letta-home``) for one test."""
    pair = SyncthingPair(tmp_path_factory.mktemp("stpair")).start()
    try:
        yield pair
    finally:
        pair.stop()


@pytest.fixture(scope="module")
def syncthing_pair_module(syncthing_binary: str,
                          tmp_path_factory: pytest.TempPathFactory) -> Iterator[SyncthingPair]:
    """One pair shared by a module's tests (use distinct file names per test; restore() if cut)."""
    pair = SyncthingPair(tmp_path_factory.mktemp("stpair-mod")).start()
    try:
        yield pair
    finally:
        pair.stop()


@pytest.fixture
def git_world(tmp_path_factory: pytest.TempPathFactory) -> GitWorld:
    """A bare remote plus a factory for clones with their own identities."""
    return GitWorld(tmp_path_factory.mktemp("gitworld"))
