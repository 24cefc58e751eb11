"""Issue 23: fourteen realistic secret formats went out unredacted through Read. Each is put in a file of a
project and read the two ways a file's text leaves this machine — the agent's own Read tool (its result goes to
Letta as it is) and Claude Code's Read result in the transcript (the worker's update) — and the secret must be
in neither. The values are fakes written for this test (the corpus of generated fakes is
tests/fixtures/secrets/)."""
from __future__ import annotations

import base64
import json

import pytest

from subconscious.privacy.redact import REDACTED, find_secrets, redact
from subconscious.agent_tools.loop import ToolCallRequest
from subconscious.agent_tools.registry import ToolContext, execute
from subconscious.delivery.transcript import build_update

B64 = base64.b64encode(b"deploy:Zr7#Qm2v/Kp9@x").decode()
K8S_A, K8S_B = base64.b64encode(b"Xu83-prod-Pw").decode(), base64.b64encode(b"postgres://app:Wq9z@db/app").decode()

# (name, file name, file text, the fragments that must not leave)
FINDINGS = [
    ("authorization basic in a python dict", "client.py",
     f"import requests\nHEADERS = {{'Authorization': 'Basic {B64}', 'Accept': 'application/json'}}\n", [B64]),
    ("authorization in json", "settings.json",
     json.dumps({"upstream": {"headers": {"Authorization": "Basic " + B64}}}, indent=2), [B64]),
    ("bearer in a python dict", "api.py", "h = {'Authorization': 'Bearer Kq7Zr2mVx9Lp4Wt8Ns'}\n", ["Kq7Zr2mVx9Lp4Wt8Ns"]),
    ("url password with slash and at", "app.conf",
     "DATABASE_URL=https://user:p@ss/w0rd@db.internal:5432/app\n", ["p@ss/w0rd", "ss/w0rd"]),
    ("url password with at only", "deploy.sh", "git clone https://ci:Tq8@zX4m@git.example.com/acme/app.git\n",
     ["Tq8@zX4m", "zX4m"]),
    ("curl -u user:token", "release.sh",
     "curl -fsS -u deploy:Gh7rVq2ZmK9x https://ci.example.com/api/release\n", ["Gh7rVq2ZmK9x"]),
    ("mysql -pPASS", "backup.sh", "mysqldump -u root -pMy5qlR00t! --all-databases > all.sql\n", ["My5qlR00t!"]),
    ("mysql --password=", "restore.sh", "mysql --user=app --password=Rst0re#Pw app < dump.sql\n", ["Rst0re#Pw"]),
    ("sshpass -p", "push.sh", "sshpass -p 'SshP4ss-2026' rsync -a dist/ deploy@web1:/srv/app\n", ["SshP4ss-2026"]),
    ("docker config.json auth", "config.json",
     json.dumps({"auths": {"https://index.docker.io/v1/": {"auth": B64}}}, indent="\t"), [B64]),
    ("kubernetes secret data", "secret.yaml",
     f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ntype: Opaque\ndata:\n  password: {K8S_A}\n"
     f"  url: {K8S_B}\n", [K8S_A, K8S_B]),
    ("twilio sid and auth token", "sms.py",
     "from twilio.rest import Client\nclient = Client('AC0f1e2d3c4b5a69788796a5b4c3d2e1f0', "
     "'9f8e7d6c5b4a39281706f5e4d3c2b1a0')\n", ["0f1e2d3c4b5a69788796a5b4c3d2e1f0", "9f8e7d6c5b4a39281706f5e4d3c2b1a0"]),
    ("ethereum private key", "hardhat.config.js",
     "module.exports = { networks: { sepolia: { accounts: "
     "['0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318'] } } }; // deployer private key\n",
     ["4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"]),
    ("netrc password", "netrc.sample", "machine api.heroku.com\n  login me@example.com\n  password 01ab-Hk9-Netrc\n",
     ["01ab-Hk9-Netrc"]),
    ("pw = assignment", "db.py", "pw = 'Qz7!kd93'\nconn = connect('db', 'app', pw)\n", ["Qz7!kd93"]),
    ("passwd assignment", "db2.py", "PASSWD=\"hXq+7tt\"\n", ["hXq+7tt"]),
    ("anthropic key split across literals", "bot.py",
     'KEY = ("sk-ant-" "api03-Zq8xW2mN4pL7vB1cR5tY9uI3oE6aS0dF"\n       "Kj5Hg7Fd3Sa1Lp9Ok8")\n',
     ["Zq8xW2mN4pL7vB1cR5tY9uI3oE6aS0dF", "Kj5Hg7Fd3Sa1Lp9Ok8"]),
    ("aws key id joined with +", "aws.js", "const id = 'AKIA' + 'ZQ7XW2MN4PL7VB1C';\n", ["ZQ7XW2MN4PL7VB1C"]),
]


def _agent_read(proj, name: str) -> str:
    req = ToolCallRequest("call_1", "Read", {"file_path": name}, json.dumps({"file_path": name}))
    return execute(req, ToolContext.for_session("read-only", str(proj))).result.output


def _claude_code_read(path: str, text: str) -> str:
    """Claude Code's Read of ``path`` as its transcript records it, through the worker's update."""
    numbered = "\n".join("%6d\t%s" % (i + 1, line) for i, line in enumerate(text.split("\n")))
    lines = [json.dumps({"type": "assistant", "message": {"role": "assistant", "content": [
                 {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": path}}]}}),
             json.dumps({"type": "user", "message": {"role": "user", "content": [
                 {"type": "tool_result", "tool_use_id": "toolu_1", "content": numbered}]}})]
    return build_update(lines, -1, "s-23").payload


@pytest.mark.parametrize("name,file,text,secrets", FINDINGS, ids=[f[0] for f in FINDINGS])
def test_the_finding_is_redacted_on_every_path_out(tmp_path, name, file, text, secrets):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / file).write_text(text)
    outs = {"agent Read": _agent_read(proj, file), "Claude Code Read": _claude_code_read(str(proj / file), text),
            "redact": redact(text)}
    for where, out in outs.items():
        assert REDACTED in out, (where, out)
        for secret in secrets:
            assert secret not in out, (where, secret, out)
    assert find_secrets(outs["redact"]) == []


@pytest.mark.parametrize("text", [
    "ssh://git@github.com:22/Acme/App",  # a user, no password
    "see https://ci-bot:TOKEN@github.com/Acme/App in the docs",  # a placeholder
    "docker run -u 1000:1000 image", "curl -u $USER:$TOKEN https://h", "mysql -p -u root", "mysql -P 3306 -h db",
    "tx = '0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318'  # the block's hash",
    "sha = 'd41d8cd98f00b204e9800998ecf8427e'", "by default the password is asked for",
    "kind: ConfigMap\ndata:\n  mode: fast\n", "x = 'a' 'b'", 'print("key" "board")',
    "TOKEN_HEADER = \"X-Subconscious-Token\"", "OPENAI_API_KEY=sk-...",
    "ALNUM = \"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789\"",
    'SECRET = b"-----BEGIN OPENSSH PRIVATE KEY-----\\nabc"\nDEEP = b"[" * 200\nLONG = "x" * 2',
])
def test_lookalikes_stay_readable(text):
    out = redact(text)
    if "BEGIN OPENSSH" in text:  # the key literal goes, the code after it stays
        assert out.endswith('DEEP = b"[" * 200\nLONG = "x" * 2'), out
    else:
        assert out == text


def test_a_url_password_is_cut_at_the_last_at_before_the_host():
    out = redact("postgres://app:p@ss/w0rd@db.internal:5432/app?sslmode=require")
    assert out == "postgres://app:[REDACTED]@db.internal:5432/app?sslmode=require"


def test_a_kubernetes_secret_as_kubectl_prints_it_and_as_json():
    yaml_out = redact(f"apiVersion: v1\ndata:\n  password: {K8S_A}\nkind: Secret\nmetadata:\n  name: db\n")
    assert K8S_A not in yaml_out and "name: db" in yaml_out and "kind: Secret" in yaml_out
    json_out = redact(json.dumps({"kind": "Secret", "data": {"password": K8S_A, "url": K8S_B}}))
    assert K8S_A not in json_out and K8S_B not in json_out and '"kind": "Secret"' in json_out


@pytest.mark.parametrize("text,secret", [
    (r'{\"password\": \"hunter2x\", \"user\": \"a\"}', "hunter2x"),  # JSON inside JSON (a log line, a Bash cat)
    ('{"password" : "hunter2x"}', "hunter2x"),  # a space before the colon
    ("PASSWORD='correct horse battery staple'", "horse battery staple"),  # a quoted value with spaces
    ('db_password: "p@ss w0rd with spaces"', "w0rd with spaces"),
])
def test_found_by_red_team(text, secret):
    """Attacks on the rules above after they were written: each leaked before its fix."""
    out = redact(text)
    assert secret not in out and REDACTED in out, out


@pytest.mark.parametrize("text", [
    "Limits: when the counter would pass :data:`MAX_COUNT` it carries",  # a space before the colon, no quote
    'r = key("init", SUBCONSCIOUS_PASSPHRASE=PASSPHRASE)', '{"SUBCONSCIOUS_SERVE_TOKEN": self.token}',
    '(\'{"../../etc/passwd": "conv-x"}\\n\', "invalid-entry")',
])
def test_code_the_red_team_fixes_left_readable(text):
    """False positives measured in this repository after the fixes above (each was changed before)."""
    assert redact(text) == text
