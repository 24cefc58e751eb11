"""pytest fixtures for the real Letta server (see letta_server.py).

    letta_server   session: the running harness (.base_url, .fake_llm, .fake_llm_url, .log_tail())
    fake_llm       function: FakeLLMControl, reset (queue and request log emptied) for each test
    letta_agent    function: a fresh agent imported from subconscious/data/Subconscious.af (AgentState dict
                   with blocks), on the fake model; deleted afterwards
    letta_env      function: environment variables pointing subconscious at the harness

Set SUBCONSCIOUS_LETTA_STATE=<harness.json> (printed by ``python -m tests.harness.letta_server start``) to
reuse a server that is already running instead of starting one; it is then left running.
Fixtures talk to Letta with plain httpx, not with subconscious.letta, so client bugs fail the client's
tests, not every test's setup.
"""
from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from tests.harness.fake_llm import FakeLLMControl
from tests.harness.letta_server import LettaServer, start_server

FAKE_MODEL_HANDLE = "openai-proxy/fake-model"
AGENT_FILE = Path(__file__).resolve().parents[2] / "subconscious" / "data" / "Subconscious.af"


@pytest.fixture(scope="session")
def letta_server():
    state = os.environ.get("SUBCONSCIOUS_LETTA_STATE")
    if state:
        srv = LettaServer.load(Path(state))
        try:
            httpx.get(srv.base_url + "/v1/health/", timeout=5).raise_for_status()
        except httpx.HTTPError as e:
            pytest.fail(f"SUBCONSCIOUS_LETTA_STATE={state}: server at {srv.base_url} is not healthy ({e})")
        yield srv
        return
    srv = start_server()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def fake_llm(letta_server) -> FakeLLMControl:
    ctl = FakeLLMControl(letta_server.fake_llm_url)
    ctl.reset()
    return ctl


def import_agent(base_url: str, *, model: str = FAKE_MODEL_HANDLE, af: bytes | None = None) -> dict:
    """Import an agent file (default: the bundled one) on the fake model; return the AgentState with blocks."""
    content = af if af is not None else AGENT_FILE.read_bytes()
    with httpx.Client(base_url=base_url, timeout=60) as http:
        r = http.post("/v1/agents/import", files={"file": ("Subconscious.af", content, "application/json")},
                      data={"append_copy_suffix": "false", "model": model})
        r.raise_for_status()
        agent_id = r.json()["agent_ids"][0]
        r = http.get(f"/v1/agents/{agent_id}", params={"include": "agent.blocks"})
        r.raise_for_status()
        return r.json()


def delete_agent(base_url: str, agent_id: str) -> None:
    with httpx.Client(base_url=base_url, timeout=30) as http:
        http.delete(f"/v1/agents/{agent_id}")


@pytest.fixture
def letta_agent(letta_server, fake_llm) -> dict:
    agent = import_agent(letta_server.base_url)
    yield agent
    delete_agent(letta_server.base_url, agent["id"])


@pytest.fixture
def agents_to_delete(letta_server) -> list[str]:
    """Ids of agents a test made the pipeline import (append them); deleted from the server afterwards."""
    ids: list[str] = []
    yield ids
    for agent_id in ids:
        delete_agent(letta_server.base_url, agent_id)


@pytest.fixture
def letta_env(letta_server) -> dict:
    """Variables for a subconscious process under test (merge into a clean environment)."""
    return {"LETTA_BASE_URL": letta_server.base_url, "LETTA_API_KEY": "test-key-not-checked-by-the-server",
            "LETTA_MODEL": FAKE_MODEL_HANDLE}
