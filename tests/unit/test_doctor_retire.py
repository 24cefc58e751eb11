"""doctor finds shards that nobody writes any more and --fix retires them, so that old deletes can be
pruned at last — without losing what those shards held, and without letting them bring a delete back."""

from __future__ import annotations

import json

from subconscious.state.records import SessionState
from subconscious.state.store.core import DAY_MS

from .test_doctor import Home


def _stale(home: Home, host: str, days: int):
    path = home.state / "hosts" / f"{host}.json"
    doc = json.loads(path.read_text())
    doc["written"] -= days * DAY_MS
    path.write_text(json.dumps(doc))


def test_doctor_reports_a_machine_gone_quiet_and_fix_retires_it_without_loss(tmp_path):
    home = Home(tmp_path)
    gone = home.store("oldpc")
    gone.put_conversation("theirs", "conv-t", "agent-a")
    gone.update_session("theirs", lambda cur: SessionState("theirs", conversation_id="conv-t", last_processed_index=12))
    home.store().put_conversation("mine", "conv-m", "agent-a")
    _stale(home, "oldpc", 120)
    out = home.doctor("--json")
    found = [f for f in json.loads(out.stdout)["findings"] if f["kind"] == "stale-shard"]
    assert [f["host"] for f in found] == ["oldpc"] and found[0]["fixable"]
    fixed = home.doctor("--fix")
    assert "retired host oldpc" in fixed.stdout
    assert not (home.state / "hosts" / "oldpc.json").exists()
    assert not list((home.state / "hosts").glob("oldpc/session-*.json"))
    me = home.store()
    assert me.conversation("theirs").conversation_id == "conv-t"
    assert me.session("theirs").last_processed_index == 12
    assert list((home.state / "backups").rglob("hosts__oldpc.json"))
    after = json.loads(home.doctor("--json").stdout)["findings"]
    assert not [f for f in after if f["kind"] == "stale-shard"]


def test_a_host_id_replaced_on_the_same_machine_is_reported(tmp_path):
    home = Home(tmp_path)
    home.store("alpha-old", host_name="laptop").put_conversation("s1", "conv-1", "agent-a")
    store = home.store(host_name="laptop")
    store.put_conversation("s2", "conv-2", "agent-a")
    env = home.env()
    del env["SUBCONSCIOUS_HOST"]  # this machine's id and readable name come from its state dir
    (tmp_path / "local-alpha" / "host.json").write_text(json.dumps({"id": "alpha", "name": "laptop"}))
    out = home.doctor("--json", env=env)
    found = [f for f in json.loads(out.stdout)["findings"] if f["kind"] == "stale-shard"]
    assert [f["host"] for f in found] == ["alpha-old"], out.stdout
