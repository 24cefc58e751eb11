"""Agent resolution and model choice: pure decisions (properties) and the shell over recorded payloads."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from subconscious.letta.agent import PREFERRED_MODELS, ModelChoice, agent_candidates, choose_model, model_patch, \
    read_user_config, resolve_agent, write_user_config
from subconscious.letta.client import LettaClient
from subconscious.letta.config import LettaSettings
from subconscious.letta.errors import LettaConfigError, LettaNotFoundError

A1 = "agent-11111111-1111-4111-8111-111111111111"
A2 = "agent-22222222-2222-4222-8222-222222222222"
A3 = "agent-33333333-3333-4333-8333-333333333333"
REC = Path(__file__).resolve().parents[1] / "fixtures" / "letta"

_handles = st.lists(st.sampled_from(list(PREFERRED_MODELS) + ["letta/letta-free", "openai-proxy/fake-model",
                                                              "x/y", "ollama/llama3"]), unique=True, max_size=6)


# ---------------------------------------------------------------- pure

def test_env_agent_is_the_only_candidate_and_must_be_valid():
    cands, notes = agent_candidates(A1, A2, A3)
    assert [(c.source, c.agent_id, c.strict) for c in cands] == [("env", A1, True)] and notes == []
    with pytest.raises(LettaConfigError, match="agent name"):
        agent_candidates("my-subconscious", A2, None)


def test_fallback_order_and_bad_values_noted():
    cands, notes = agent_candidates(None, A2, A3)
    assert [(c.source, c.agent_id) for c in cands] == [("pinned", A2), ("user_config", A3)]
    cands, notes = agent_candidates("", "garbage", A2)
    assert [(c.source, c.agent_id) for c in cands] == [("user_config", A2)] and "garbage" in notes[0]
    cands, _ = agent_candidates(None, A2, A2)
    assert len(cands) == 1
    assert agent_candidates(None, None, None) == ([], [])


@given(_handles, st.one_of(st.none(), st.sampled_from(["openai/gpt-4.1-mini", "x/y", "gone/model"])),
       st.one_of(st.none(), st.sampled_from(["ollama/llama3", "letta/auto", "missing/m"])))
def test_choose_model_rules(available, current, requested):
    c = choose_model(available, current, requested)
    if not available:
        assert c.model is None and c.reason == "none-available"
        return
    assert c.model in available  # never picks something the server does not offer
    if requested in available:
        assert (c.model, c.reason) == (requested, "requested")
    elif current in available:
        assert (c.model, c.reason) == (current, "kept")
    else:
        prefs = [p for p in PREFERRED_MODELS if p in available]
        others = [m for m in available if m != "letta/letta-free"] or available
        assert c.model == (prefs[0] if prefs else others[0])
    if requested and requested not in available:
        assert any("LETTA_MODEL" in n for n in c.notes)


def test_letta_free_only_as_a_last_resort():
    assert choose_model(["letta/letta-free", "openai-proxy/m"], None, None).model == "openai-proxy/m"
    assert choose_model(["letta/letta-free"], None, None).model == "letta/letta-free"


def test_model_patch():
    keep = ModelChoice("a/b", "kept")
    assert model_patch("a/b", 32000, keep, None, 128000) is None
    assert model_patch("a/b", 32000, keep, 16000, 128000) == {"model": "a/b", "context_window_limit": 16000}
    assert model_patch("old/m", 32000, ModelChoice("a/b", "preferred"), None, 128000) == {
        "model": "a/b", "context_window_limit": 128000}
    assert model_patch("old/m", 32000, ModelChoice("a/b", "preferred"), None, None) == {"model": "a/b"}
    assert model_patch("old/m", 1, ModelChoice(None, "none-available"), 5000, None) is None


def test_user_config_roundtrip_keeps_unknown_keys_and_is_private(tmp_path):
    p = tmp_path / "home" / ".letta" / "claude-subconscious" / "config.json"
    assert read_user_config(p) == (None, True)
    write_user_config(p, A1, "m/x")
    assert read_user_config(p) == (A1, True)
    doc = json.loads(p.read_text())
    doc["extra"] = 1
    p.write_text(json.dumps(doc))
    write_user_config(p, A2, None)
    assert json.loads(p.read_text())["extra"] == 1 and read_user_config(p) == (A2, True)
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(p.parent).st_mode) == 0o700
    p.write_text("{broken")
    assert read_user_config(p) == (None, False)


# ---------------------------------------------------------------- shell, over payloads recorded from 0.16.8

def _recorded(idx: int) -> object:
    return json.loads(json.loads((REC / "setup.json").read_text())[idx]["response"]["text"])


MODELS = _recorded(1)  # GET /v1/models/ : letta/letta-free, openai-proxy/fake-model
AGENT = _recorded(3)  # GET /v1/agents/{id}?include=agent.blocks of the imported Subconscious agent


class FakeServer:
    """A minimal stand-in built from recorded payloads: knows some agents, records calls."""

    def __init__(self, agents: dict[str, str], models=MODELS):
        self.agents = {aid: dict(AGENT, id=aid, model=m, llm_config=dict(AGENT["llm_config"], handle=m))
                       for aid, m in agents.items()}
        self.models = models
        self.calls: list[tuple[str, str]] = []
        self.imported_with: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        request.read()
        path = request.url.path
        self.calls.append((request.method, path))
        if path == "/v1/models/":
            return httpx.Response(200, json=self.models)
        if path == "/v1/agents/import":
            new = "agent-99999999-9999-4999-8999-999999999999"
            model = next((line for line in request.content.split(b"\r\n") if line.endswith(b"fake-model")), b"")
            self.imported_with.append(model.decode())
            self.agents[new] = dict(AGENT, id=new)
            return httpx.Response(200, json={"agent_ids": [new]})
        if path.startswith("/v1/agents/"):
            aid = path.rsplit("/", 1)[1]
            if aid not in self.agents:
                return httpx.Response(404, json={"detail": f"Agent with ID {aid} not found"})
            if request.method == "PATCH":
                body = json.loads(request.content)
                a = self.agents[aid]
                a.update(model=body["model"], llm_config=dict(a["llm_config"], handle=body["model"],
                                                              context_window=body.get("context_window_limit",
                                                                                      a["llm_config"]["context_window"])))
            return httpx.Response(200, json=self.agents[aid])
        return httpx.Response(404, json={"detail": "no route"})


def _resolve(server, tmp_path, env=None, pinned=None, save=True):
    settings = LettaSettings.from_env({"LETTA_BASE_URL": "http://letta.test", **(env or {})})
    with LettaClient(settings.base_url, transport=httpx.MockTransport(server)) as c:
        return resolve_agent(c, settings, pinned_agent_id=pinned, config_path=tmp_path / "config.json",
                             save_user_config=save)


def test_existing_agent_with_offered_model_costs_two_calls(tmp_path):
    srv = FakeServer({A2: "openai-proxy/fake-model"})
    r = _resolve(srv, tmp_path, pinned=lambda: A2)
    assert (r.agent_id, r.source, r.model, r.model_changed) == (A2, "pinned", "openai-proxy/fake-model", False)
    assert len(srv.calls) == 2
    assert not (tmp_path / "config.json").exists()


def test_env_agent_missing_is_an_error_not_a_silent_import(tmp_path):
    srv = FakeServer({})
    with pytest.raises(LettaNotFoundError, match="LETTA_AGENT_ID"):
        _resolve(srv, tmp_path, env={"LETTA_AGENT_ID": A1})
    assert ("POST", "/v1/agents/import") not in srv.calls


def test_pinned_missing_falls_back_to_user_config(tmp_path):
    write_user_config(tmp_path / "config.json", A3, None)
    srv = FakeServer({A3: "openai-proxy/fake-model"})
    r = _resolve(srv, tmp_path, pinned=A2)
    assert (r.agent_id, r.source) == (A3, "user_config")
    assert any(A2 in n for n in r.notes)


def test_nothing_known_imports_the_bundled_agent_and_records_it(tmp_path):
    srv = FakeServer({})
    r = _resolve(srv, tmp_path, env={"LETTA_MODEL": "openai-proxy/fake-model"})
    assert r.source == "imported"
    assert srv.imported_with == ["openai-proxy/fake-model"]
    assert read_user_config(tmp_path / "config.json") == (r.agent_id, True)


def test_unparseable_user_config_is_never_overwritten(tmp_path):
    (tmp_path / "config.json").write_text("{half a file")
    r = _resolve(FakeServer({}), tmp_path, env={"LETTA_MODEL": "openai-proxy/fake-model"})
    assert r.source == "imported"
    assert (tmp_path / "config.json").read_text() == "{half a file"
    assert any("could not be read" in n for n in r.notes)


def test_unoffered_model_is_replaced_by_patch(tmp_path):
    srv = FakeServer({A2: "anthropic/claude-sonnet-4-5"})
    r = _resolve(srv, tmp_path, pinned=A2, env={"LETTA_MODEL": "gone/model", "LETTA_CONTEXT_WINDOW": "20000"})
    # LETTA_MODEL not offered, current not offered, no preference offered -> the server's first model,
    # skipping letta/letta-free (hosted inference) when the server offers the user's own provider
    assert r.model_changed and r.model == "openai-proxy/fake-model"
    assert r.agent["llm_config"]["context_window"] == 20000
    assert ("PATCH", f"/v1/agents/{A2}") in srv.calls
    assert any("gone/model" in n for n in r.notes)
