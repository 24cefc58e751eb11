"""Red team of issue 23, redaction: a secret written with string escapes — a JSON file or a log that escapes
characters (``"\\u0073k-ant-…"``, ``"https:\\/\\/user:pw@host"``, a key in ``\\x`` escapes) — is the same
secret to whoever reads it, so it is found on the text with the escapes decoded and its escaped form is
redacted, in what the worker sends."""
from __future__ import annotations

from subconscious.privacy.redact import redact
from tests.unit.test_private_transcript import T, update

KEY_TAIL = "ant-api03-Ab3dEf9hIjKlMn0pQrStUvWxYz012345678_abcdefghijklmnopqrstuvwx-yzABCDEFGHIJKLMNOPQRSTUVWXYZab-cdAA"
GH_TAIL = "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def test_escaped_secrets_in_a_read_result_are_redacted(tmp_path):
    t = T()
    t.tool("Read", {"file_path": str(tmp_path / "settings.json")}, "\n".join([
        '     1\t{"anthropic": "\\u0073k-' + KEY_TAIL + '",',
        '     2\t "dsn": "https:\\/\\/admin:Xy9pQ2rT7vWq@db.example.com\\/app",',
        '     3\t "gh": "\\x67\\x68\\x70\\x5f' + GH_TAIL + '",',
        '     4\t "name": "public-name-\\u00e9t\\u00e9"}']))
    out = update(t)
    for fragment in (KEY_TAIL[:30], KEY_TAIL[-30:], "Xy9pQ2rT7vWq", GH_TAIL[:20]):
        assert fragment not in out
    assert "public-name-\\u00e9t\\u00e9" in out and "db.example.com" in out  # the rest as it was


def test_escapes_around_no_secret_change_nothing():
    for text in ('print("a\\nb\\tc")', '{"path": "C:\\\\Users\\\\me", "x": "\\u00e9"}', "re.compile(r'\\x41+\\/')"):
        assert redact(text) == text
