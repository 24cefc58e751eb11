"""Sealed values: authenticated encryption of one cached string, bound to where it belongs.

A small, misuse-resistant API in the spirit of Fernet::

    key = Key.generate()                      # or keys.derive_key(passphrase, params)
    env = seal(key, "text", session_id="s1", label="guidance")   # a JSON-ready dict
    open_envelope({key.id: key}, env, session_id="s1", label="guidance")  # -> "text"

- AES-256-GCM with a fresh random 96-bit nonce per seal (the ``cryptography`` package, imported on
  first use only: a hook that meets no sealed value never pays for it).
- The envelope is versioned and names the key by id::

      {"sealed": 2, "alg": "A256GCM", "kid": "k<16 hex>", "v": <n>, "nonce": "<b64url>", "ct": "<b64url>"}

  ``v`` is the value's version: one more than the version it replaces for that session and label, so
  a reader that has seen version n knows an envelope of version < n is an older one put back (format 1
  envelopes, without ``v``, read as version 0).
- The associated data binds the format version, the algorithm, the key id, the value's version, the
  session and the block label, so an envelope copied to another session or label, relabelled with
  another key id or given another version number, does not open.
- Base64url is decoded strictly: one alphabet, no padding, no whitespace, canonical trailing bits.
- Key ids are derived from the key (HMAC-SHA256 under a fixed label), so the same key, however it
  reached a machine (generated, imported, derived from a passphrase), has the same id everywhere. The
  id reveals nothing about the key; the AEAD key itself is a separate derivation of the same secret.
- Every way an envelope can fail to open (unknown key, damaged, tampered, moved, unknown version)
  raises :class:`SealError`; its message never holds plaintext or key material.

Pure apart from the random nonce; no file IO.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import re
from typing import Any, Mapping, Protocol

FORMAT = 2
FORMATS = (1, 2)  # read; format 1 has no version field (reads as version 0)
ALG = "A256GCM"
KEY_BYTES = 32
NONCE_BYTES = 12
TAG_BYTES = 16
KEY_ID_PREFIX = "k"
KEY_ID_HEX = 16
_ID_LABEL = b"subconscious/key-id/v1"
_AEAD_LABEL = b"subconscious/aead/v1"
_AD_TAG = "subconscious-sealed-value"
_ENVELOPE_KEYS = {1: frozenset({"sealed", "alg", "kid", "nonce", "ct"}),
                  2: frozenset({"sealed", "alg", "kid", "v", "nonce", "ct"})}
MAX_VERSION = 2**53  # JSON-safe integers only
_B64URL = re.compile(r"[A-Za-z0-9_-]*")


class SealError(ValueError):
    """An envelope that does not open here. ``reason`` is one of ``unknown-key`` (no key with its id
    on this machine), ``malformed`` (not an envelope of a format we read), ``unsupported`` (a newer
    format or another algorithm) and ``does-not-open`` (tampered, damaged, or moved to another session
    or label). ``key_id`` is the envelope's key id when it names one."""

    def __init__(self, reason: str, message: str, key_id: str | None = None):
        super().__init__(message)
        self.reason = reason
        self.key_id = key_id


def key_id_of(secret: bytes) -> str:
    """The public id of a key: deterministic, so a key has the same id on every machine."""
    return KEY_ID_PREFIX + hmac.new(secret, _ID_LABEL, hashlib.sha256).hexdigest()[:KEY_ID_HEX]


def is_key_id(value: object) -> bool:
    return (
        isinstance(value, str)
        and len(value) == len(KEY_ID_PREFIX) + KEY_ID_HEX
        and value.startswith(KEY_ID_PREFIX)
        and all(c in "0123456789abcdef" for c in value[len(KEY_ID_PREFIX):])
    )


class Key:
    """A 256-bit secret and its id. The secret never shows in ``repr`` or ``str``."""

    __slots__ = ("_secret", "id", "_aead")

    def __init__(self, secret: bytes):
        if not isinstance(secret, (bytes, bytearray)) or len(secret) != KEY_BYTES:
            raise ValueError(f"a key is {KEY_BYTES} bytes")
        self._secret = bytes(secret)
        self.id = key_id_of(self._secret)
        self._aead = None

    @classmethod
    def generate(cls) -> "Key":
        return cls(os.urandom(KEY_BYTES))

    @property
    def secret(self) -> bytes:
        return self._secret

    def cipher(self):
        """The AEAD object for this key (built once; imports ``cryptography`` on first use)."""
        if self._aead is None:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM

            self._aead = AESGCM(hmac.new(self._secret, _AEAD_LABEL, hashlib.sha256).digest())
        return self._aead

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Key) and hmac.compare_digest(self._secret, other._secret)

    def __hash__(self) -> int:
        return hash(self.id)

    def __repr__(self) -> str:
        return f"Key(id={self.id!r})"

    __str__ = __repr__


class KeyLookup(Protocol):
    """What :func:`open_envelope` needs from a key ring: a dict ``{key_id: Key}`` will do."""

    def get(self, key_id: str, /) -> Key | None: ...


def _b64e(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64d(text: str) -> bytes:
    """Strict unpadded base64url: only ``A-Z a-z 0-9 - _``, no ``=``, no whitespace, and the text must
    be the one encoding of its bytes (unused trailing bits zero), so one value has one spelling."""
    if not isinstance(text, str) or not _B64URL.fullmatch(text) or len(text) % 4 == 1:
        raise ValueError("not unpadded base64url")
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64e(data) != text:
        raise ValueError("not the canonical base64url of its bytes")
    return data


def associated_data(fmt: int, alg: str, key_id: str, session_id: str, label: str, version: int = 0) -> bytes:
    """What every envelope is bound to, as unambiguous bytes (a JSON array, ASCII-escaped)."""
    fields: list[Any] = [_AD_TAG, fmt, alg, key_id, session_id, label]
    if fmt >= 2:
        fields.append(version)
    return json.dumps(fields, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # any Python str round-trips, even lone surrogates


def seal(key: Key, plaintext: str, *, session_id: str, label: str, version: int = 1) -> dict[str, Any]:
    """Encrypt ``plaintext`` for ``label`` of ``session_id`` under ``key``: a JSON-ready envelope.
    ``version``: the value's version (one more than the one it replaces; see the module docstring)."""
    if not isinstance(key, Key):
        raise TypeError("seal() needs a Key")
    if not isinstance(plaintext, str) or not isinstance(session_id, str) or not isinstance(label, str):
        raise TypeError("seal() seals a str for a str session id and a str label")
    if type(version) is not int or not (0 <= version <= MAX_VERSION):
        raise TypeError("a sealed value's version is an int in [0, 2**53]")
    nonce = os.urandom(NONCE_BYTES)
    ad = associated_data(FORMAT, ALG, key.id, session_id, label, version)
    ct = key.cipher().encrypt(nonce, _encode(plaintext), ad)
    return {"sealed": FORMAT, "alg": ALG, "kid": key.id, "v": version, "nonce": _b64e(nonce), "ct": _b64e(ct)}


def envelope_version(value: object) -> int:
    """The version an envelope claims (0 for format 1 or a malformed one); authentic once it opened."""
    if is_envelope(value):
        v = value.get("v", 0)  # type: ignore[union-attr]
        return v if type(v) is int and 0 <= v <= MAX_VERSION else 0
    return 0


def is_envelope(value: object) -> bool:
    """Whether ``value`` claims to be a sealed value (it may still fail to open)."""
    return isinstance(value, dict) and "sealed" in value


def envelope_key_id(value: object) -> str | None:
    """The key id an envelope names, if it names a well-formed one."""
    if is_envelope(value):
        kid = value.get("kid")  # type: ignore[union-attr]
        return kid if is_key_id(kid) else None
    return None


def open_envelope(keyring: KeyLookup | Mapping[str, Key], envelope: object, *, session_id: str, label: str) -> str:
    """The plaintext of ``envelope``, sealed for ``label`` of ``session_id``; :class:`SealError` if it
    cannot be opened here for any reason."""
    if not isinstance(envelope, dict) or "sealed" not in envelope:
        raise SealError("malformed", "not a sealed value")
    version, alg, kid = envelope.get("sealed"), envelope.get("alg"), envelope.get("kid")
    if type(version) is not int or version not in FORMATS or alg != ALG:
        raise SealError("unsupported", f"sealed value of format {str(version)[:12]!r} / {str(alg)[:16]!r}; "
                        f"this version reads formats {FORMATS} / {ALG}", envelope_key_id(envelope))
    if not is_key_id(kid) or set(envelope) != _ENVELOPE_KEYS[version]:
        raise SealError("malformed", "sealed value with missing, unknown or malformed fields")
    number = envelope.get("v", 0)
    if type(number) is not int or not (0 <= number <= MAX_VERSION):
        raise SealError("malformed", "sealed value with a malformed version", kid)
    try:
        nonce, ct = _b64d(envelope["nonce"]), _b64d(envelope["ct"])
    except (ValueError, binascii.Error):
        raise SealError("malformed", "sealed value whose nonce or ciphertext is not base64url", kid) from None
    if len(nonce) != NONCE_BYTES or len(ct) < TAG_BYTES:
        raise SealError("malformed", "sealed value with a nonce or ciphertext of the wrong length", kid)
    key = keyring.get(kid)
    if key is None:
        raise SealError("unknown-key", f"sealed with key {kid}, which is not on this machine", kid)
    from cryptography.exceptions import InvalidTag

    try:
        data = key.cipher().decrypt(nonce, ct, associated_data(version, ALG, kid, session_id, label, number))
    except InvalidTag:
        raise SealError("does-not-open", f"sealed value under key {kid} does not open for this session and "
                        "label (damaged, tampered with, or moved)", kid) from None
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:  # authentic but not text: only a foreign writer could have made it
        raise SealError("malformed", "sealed value is not text", kid) from None
