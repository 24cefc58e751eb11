"""Encryption keys: the machine-local key ring, passphrase derivation, export/import, and the home's
``encryption`` setting.

- The key ring is one file per key, ``<local state dir>/keys/<key id>.key`` (0600, dir 0700): machine
  local, never synced, and refused anywhere inside LETTA_HOME.
- A passphrase becomes a key with scrypt; the salt and cost parameters are not secret and live in the
  home's shared ``encryption`` setting, so the same passphrase on every machine of a home yields the
  same key (and the same key id) without copying any file.
- ``export_key`` / ``import_key``: the key as one copyable line, checked against its id on import.
- The ``encryption`` setting (last-writer-wins, shared by every host of the home)::

      {"enabled": true, "keyId": "k…", "generation": <n>, "kdf": {"name": "scrypt", "salt", "n", "r", "p"} | null,
       "rotation": {"from": "k…", "host": "…", "started": "…"} | null}

- The pin (machine-local, ``<local state dir>/encryption/pin-<home hash>.json``, 0600): what this machine
  knows of the home's encryption whatever the shared setting says — that it is on, its key and key
  generation, and the keys retired by rotations. Anyone who can write the synced folder can write the
  shared setting; :func:`effective_policy` follows it only where it moves forward (a newer generation
  whose key this machine holds), never where it turns encryption off or names an older key: that
  takes ``subconscious key disable`` (or ``key init``) on this machine.

Stdlib only (hashlib's scrypt): nothing here imports ``cryptography``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import stat
import time
import unicodedata
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator, Mapping

from ..state.files import atomic_write, ensure_dir
from ..state.seal import KEY_BYTES, Key, is_key_id

SETTING = "encryption"  # the home setting's key
KEY_SUFFIX = ".key"
KEY_FILE_FORMAT = 1
EXPORT_PREFIX = "subconscious-key-1"
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**17, 8, 1  # ~128 MiB, a few tenths of a second (OWASP's minimum)
_MIN_N, _MAX_N = 2**10, 2**22
_MAX_NR, _MAX_WORK = 2**23, 2**25  # scrypt takes 128 * n * r bytes: 1 GiB at most; work 32x the default
WEAK_N = 2**14  # below this, a guessed passphrase is cheap to try: warned about
PIN_PREFIX, PIN_FORMAT = "pin-", 1
MAX_GENERATION = 2**31  # a setting above is damaged: never followed, never pinned (init's +1 stays readable)
MAX_JUMP = 1000  # a pinned machine follows a setting at most this many generations ahead


class KeysError(ValueError):
    """A key, key file, export string, passphrase or setting that cannot be used; says why."""


KeyProblem = dict  # {"kind", "severity", "path", "message"}: plain data for doctor


def _b64e(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64d(text: object) -> bytes:
    if not isinstance(text, str) or not text.isascii():
        raise ValueError("not base64url")
    text = text.strip().rstrip("=")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# --------------------------------------------------------------------------- passphrases


@dataclass(frozen=True)
class ScryptParams:
    """How a passphrase becomes a key. Not secret: stored in the home setting."""

    salt: bytes
    n: int = SCRYPT_N
    r: int = SCRYPT_R
    p: int = SCRYPT_P

    @classmethod
    def new(cls, n: int = SCRYPT_N, r: int = SCRYPT_R, p: int = SCRYPT_P) -> "ScryptParams":
        return cls._checked(os.urandom(16), n, r, p)

    @classmethod
    def _checked(cls, salt: bytes, n: Any, r: Any, p: Any) -> "ScryptParams":
        ints = all(type(v) is int for v in (n, r, p))
        if not ints or not (_MIN_N <= n <= _MAX_N) or n & (n - 1) or not (1 <= r <= 32) or not (1 <= p <= 16):
            raise KeysError(f"scrypt parameters out of range: n must be a power of two in "
                            f"[{_MIN_N}, {_MAX_N}], 1 <= r <= 32, 1 <= p <= 16")
        if n * r > _MAX_NR or n * r * p > _MAX_WORK:  # the home's setting is anyone's: no 16 GiB from it
            raise KeysError(f"scrypt parameters too costly: n * r at most {_MAX_NR} (1 GiB of memory) and "
                            f"n * r * p at most {_MAX_WORK}")
        if len(salt) < 16:
            raise KeysError("scrypt salt must be at least 16 bytes")
        return cls(bytes(salt), n, r, p)

    def to_json(self) -> dict[str, Any]:
        return {"name": "scrypt", "salt": _b64e(self.salt), "n": self.n, "r": self.r, "p": self.p}

    @classmethod
    def from_json(cls, value: Any) -> "ScryptParams":
        if not isinstance(value, dict) or value.get("name") != "scrypt":
            raise KeysError("the home's key derivation is not scrypt (written by a newer subconscious?)")
        try:
            salt = _b64d(value.get("salt"))
        except (ValueError, binascii.Error):
            raise KeysError("the home's scrypt salt is not base64url") from None
        return cls._checked(salt, value.get("n"), value.get("r"), value.get("p"))


def normalize_passphrase(passphrase: str) -> bytes:
    """NFC, so the same passphrase typed on macOS, Linux or Windows gives the same bytes."""
    if not isinstance(passphrase, str) or not passphrase:
        raise KeysError("the passphrase is empty")
    return unicodedata.normalize("NFC", passphrase).encode("utf-8")


def derive_key(passphrase: str, params: ScryptParams) -> Key:
    """The key a passphrase gives under ``params`` (the same on every machine)."""
    secret = hashlib.scrypt(normalize_passphrase(passphrase), salt=params.salt, n=params.n, r=params.r,
                            p=params.p, maxmem=128 * params.r * (params.n + params.p + 2) + (1 << 20), dklen=KEY_BYTES)
    return Key(secret)


# --------------------------------------------------------------------------- export / import


def export_key(key: Key) -> str:
    """One line holding the key (anyone with it can read what it sealed): ``subconscious-key-1:<id>:<key>``."""
    return f"{EXPORT_PREFIX}:{key.id}:{_b64e(key.secret)}"


def import_key(text: str) -> Key:
    """The key in an :func:`export_key` line; the id in the line must match the key (catches typos)."""
    parts = (text or "").strip().split(":")
    if len(parts) != 3 or parts[0] != EXPORT_PREFIX or not is_key_id(parts[1]):
        raise KeysError(f"not an exported key: expected one line '{EXPORT_PREFIX}:<key id>:<key>' "
                        "as printed by `subconscious key export`")
    try:
        secret = _b64d(parts[2])
    except (ValueError, binascii.Error):
        secret = b""
    if len(secret) != KEY_BYTES:
        raise KeysError("the exported key is damaged (wrong length); copy the whole line again")
    key = Key(secret)
    if key.id != parts[1]:
        raise KeysError(f"the exported key does not match its id {parts[1]}; copy the whole line again")
    return key


# --------------------------------------------------------------------------- key ring


def check_outside(directory: Path, *homes: Path) -> None:
    """Refuse a key directory inside any of ``homes`` (LETTA_HOME and the state home: synced places)."""
    where = Path(os.path.realpath(directory))
    for home in homes:
        if home is not None and where.is_relative_to(Path(os.path.realpath(home))):
            raise KeysError(f"refusing to keep keys in {directory}: it is inside {home}, which is synced; "
                            "point SUBCONSCIOUS_STATE_DIR at a machine-local directory")


@dataclass(frozen=True)
class KeyInfo:
    id: str
    source: str  # generated | passphrase | imported
    created: str
    path: Path


@dataclass
class KeyRing(Mapping[str, Key]):
    """The keys this machine holds, by id (read-only mapping; :meth:`add` writes a key file)."""

    directory: Path | None
    keys: dict[str, Key] = field(default_factory=dict)
    info: dict[str, KeyInfo] = field(default_factory=dict)
    problems: list[KeyProblem] = field(default_factory=list)

    @classmethod
    def load(cls, directory: Path) -> "KeyRing":
        """Every readable key file in ``directory`` (missing dir: an empty ring). Damaged files are
        skipped and reported in ``problems``, never changed."""
        ring = cls(Path(directory))
        try:
            names = sorted(e.name for e in os.scandir(directory) if e.name.endswith(KEY_SUFFIX))
        except (FileNotFoundError, NotADirectoryError):
            return ring
        except OSError as exc:
            ring._problem("key-file-unreadable", "error", str(directory), f"cannot list the key directory: {exc.strerror}")
            return ring
        for name in names:
            ring._load_file(Path(directory) / name)
        return ring

    def _problem(self, kind: str, severity: str, path: str, message: str) -> None:
        self.problems.append({"kind": kind, "severity": severity, "path": path, "message": message})

    def _load_file(self, path: Path) -> None:
        try:
            mode = path.stat().st_mode
            data = json.loads(path.read_text(encoding="utf-8"))
            key = Key(_b64d(data["secret"]))
            if key.id != data.get("keyId") or path.name != key.id + KEY_SUFFIX:
                raise ValueError("the key does not match its id")
        except (OSError, ValueError, KeyError, TypeError, binascii.Error) as exc:
            why = exc.strerror if isinstance(exc, OSError) else "damaged key file"
            self._problem("key-file-damaged", "error", str(path), f"key file skipped: {why}")
            return
        if stat.S_IMODE(mode) & 0o077:
            self._problem("key-file-permissions", "error", str(path),
                          f"key file is readable by others (mode {stat.S_IMODE(mode):o}); run: chmod 600 {path}")
        self.keys[key.id] = key
        self.info[key.id] = KeyInfo(key.id, str(data.get("source", "")), str(data.get("created", "")), path)

    def add(self, key: Key, *, source: str, refuse_under: tuple[Path, ...] = ()) -> Path:
        """Keep ``key`` on this machine (atomic write, 0600, dir 0700). Idempotent."""
        if self.directory is None:
            raise KeysError("this key ring has no directory")
        check_outside(self.directory, *refuse_under)
        path = self.directory / f"{key.id}{KEY_SUFFIX}"
        if key.id not in self.keys or not path.exists():
            ensure_dir(self.directory)
            os.chmod(self.directory, 0o700)
            record = {"format": KEY_FILE_FORMAT, "keyId": key.id, "secret": _b64e(key.secret),
                      "source": source, "created": _now()}
            atomic_write(path, json.dumps(record, indent=1) + "\n")
            self.info[key.id] = KeyInfo(key.id, source, record["created"], path)
        self.keys[key.id] = key
        return path

    def remove(self, key_id: str) -> bool:
        """Forget a key on this machine (deletes its file)."""
        info = self.info.pop(key_id, None)
        self.keys.pop(key_id, None)
        if info is None:
            return False
        try:
            os.unlink(info.path)
        except FileNotFoundError:
            pass
        return True

    # Mapping
    def __getitem__(self, key_id: str) -> Key:
        return self.keys[key_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys)

    def __len__(self) -> int:
        return len(self.keys)

    def __repr__(self) -> str:
        return f"KeyRing({str(self.directory)!r}, ids={sorted(self.keys)})"


# --------------------------------------------------------------------------- the home setting


@dataclass(frozen=True)
class Policy:
    """The home's ``encryption`` setting. ``damaged``: a setting we cannot read, handled as "on, with a
    key nobody here has" so that nothing is ever written in plain text because of it."""

    enabled: bool = False
    key_id: str | None = None
    kdf: ScryptParams | None = None
    rotation: dict[str, Any] | None = None
    damaged: bool = False
    generation: int = 0  # 1 for the first key, +1 per rotation; 0: off / never set
    pinned: str | None = None  # set by effective_policy: why the shared setting was not followed
    retired: tuple[str, ...] = ()  # keys the home rotated away from: a machine that pins this setting learns them

    def __post_init__(self) -> None:
        if self.enabled and self.generation < 1:  # a key is at least generation 1
            object.__setattr__(self, "generation", 1)

    def to_json(self) -> dict[str, Any]:
        return {
            "enabled": self.enabled,
            "keyId": self.key_id,
            "generation": self.generation,
            "kdf": self.kdf.to_json() if self.kdf else None,
            "rotation": self.rotation,
            **({"retired": sorted(set(self.retired))} if self.retired else {}),
        }

    def reads_with(self, key_id: str | None) -> bool:
        """May a value sealed under ``key_id`` be read (shown) under this policy? The current key, and
        during a rotation the key it rotates from; any key when encryption is off."""
        if not self.enabled:
            return True
        return key_id == self.key_id or (bool(self.rotation) and key_id == (self.rotation or {}).get("from"))

    @classmethod
    def from_json(cls, value: Any) -> "Policy":
        if value is None:
            return cls()
        try:
            if not isinstance(value, dict) or type(value.get("enabled")) is not bool:
                raise KeysError("'enabled' must be true or false")
            kid = value.get("keyId")
            if value["enabled"] and not is_key_id(kid):
                raise KeysError("'keyId' is missing or malformed")
            kdf = ScryptParams.from_json(value["kdf"]) if value.get("kdf") is not None else None
            rotation = value.get("rotation")
            gen = value.get("generation", 1 if value["enabled"] else 0)
            if type(gen) is not int or not (0 <= gen < MAX_GENERATION):  # one rotation a second for 68 years
                raise KeysError(f"'generation' must be an integer in [0, {MAX_GENERATION})")
            retired = value.get("retired")
            retired = tuple(r for r in retired[:1000] if is_key_id(r) and r != kid) if isinstance(retired, list) else ()
            return cls(value["enabled"], kid if is_key_id(kid) else None, kdf,
                       rotation if isinstance(rotation, dict) else None, generation=gen, retired=retired)
        except KeysError:
            return cls(enabled=True, damaged=True)


def policy_of(settings: Mapping[str, Any]) -> Policy:
    """The policy from a snapshot's settings (``Snapshot.settings``: key → Setting), no extra read."""
    record = settings.get(SETTING)
    return Policy.from_json(getattr(record, "value", None))


def read_policy(store) -> Policy:
    return Policy.from_json(store.setting(SETTING))


def write_policy(store, policy: Policy) -> None:
    store.put_setting(SETTING, policy.to_json())


# --------------------------------------------------------------------------- the local pin


@dataclass(frozen=True)
class Pin:
    """This machine's record of one home's encryption (never synced)."""

    enabled: bool = False
    key_id: str | None = None
    generation: int = 0
    retired: tuple[str, ...] = ()  # keys this home has rotated away from: never current again here
    home: str = ""
    confirmed: str | None = None  # a key this machine held before, which the user confirmed here (`key follow`)
    awaiting: str | None = None  # the pinned key, followed before this machine held it: used once confirmed

    def to_json(self) -> dict[str, Any]:
        out = {"format": PIN_FORMAT, "home": self.home, "enabled": self.enabled, "keyId": self.key_id,
               "generation": self.generation, "retired": list(self.retired)}
        if self.confirmed:
            out["confirmed"] = self.confirmed
        if self.awaiting:
            out["awaiting"] = self.awaiting
        return out


def home_digest(home: Path) -> str:
    return hashlib.sha256(os.fsencode(os.path.realpath(home))).hexdigest()[:24]


def pin_path(key_dir: Path, home: Path) -> Path:
    """Beside the key ring: ``<local state dir>/encryption/pin-<hash of the home's real path>.json``."""
    return Path(key_dir).parent / "encryption" / f"{PIN_PREFIX}{home_digest(home)}.json"


def seen_dir(key_dir: Path, home: Path) -> Path:
    """Where this machine keeps the versions of sealed values it has seen in ``home``, one file a session."""
    return Path(key_dir).parent / "encryption" / f"seen-{home_digest(home)}"


def load_pin(key_dir: Path, home: Path) -> Pin | None:
    """The pin for ``home``, or None if this machine has none. A damaged pin reads as "on, with no key
    this machine accepts" only when it cannot be parsed at all: never as "off"."""
    path = pin_path(key_dir, home)
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return Pin(True, None, 2**53 - 1, (), str(home))
    try:
        kid, gen, retired = data.get("keyId"), data.get("generation"), data.get("retired", [])
        if type(data.get("enabled")) is not bool or type(gen) is not int or not isinstance(retired, list):
            raise ValueError
        confirmed, awaiting = data.get("confirmed"), data.get("awaiting")
        return Pin(data["enabled"], kid if is_key_id(kid) else None, gen,
                   tuple(r for r in retired if is_key_id(r)), str(data.get("home", "")),
                   confirmed if is_key_id(confirmed) else None, awaiting if is_key_id(awaiting) else None)
    except (AttributeError, ValueError):
        return Pin(True, None, 2**53 - 1, (), str(home))


def save_pin(key_dir: Path, home: Path, pin: Pin) -> Path:
    path = pin_path(key_dir, home)
    ensure_dir(path.parent)
    os.chmod(path.parent, 0o700)
    pin = Pin(pin.enabled, pin.key_id, pin.generation, tuple(sorted(set(pin.retired))),
              os.path.realpath(home), pin.confirmed, pin.awaiting)
    atomic_write(path, json.dumps(pin.to_json(), indent=1) + "\n")
    return path


def pin_to(pin: Pin | None, policy: Policy) -> Pin:
    """The pin after this machine accepted ``policy`` as the home's (its key is held here)."""
    retired = set(pin.retired if pin else ()) | set(policy.retired)  # what the home says it rotated away from
    if pin is not None and pin.key_id and pin.key_id != policy.key_id:
        retired.add(pin.key_id)
    if policy.rotation and is_key_id(policy.rotation.get("from")):
        retired.add(policy.rotation["from"])
    if not policy.enabled:
        return Pin(False, None, max(pin.generation if pin else 0, policy.generation), tuple(retired))
    retired.discard(policy.key_id or "")
    return Pin(True, policy.key_id, max(policy.generation, pin.generation if pin else 0), tuple(retired))


def confirm(pin: Pin, key_id: str) -> Pin:
    """``pin`` with ``key_id`` confirmed by the user here as the home's next key (a key held before)."""
    return replace(pin, confirmed=key_id)


def effective_policy(shared: Policy, pin: Pin | None, keyring: Mapping[str, Key] | None = None
                     ) -> tuple[Policy, Pin | None]:
    """The policy this machine follows, and the pin to record (None: leave it as it is).

    - No pin, or a pin that says off (``key disable`` ran here): the shared setting, pinned as soon as
      it is on with a key this machine holds.
    - Pinned on: the shared setting when it names the pinned key, or a newer generation with a key this
      machine has not seen before (then the pin moves on and the old key is retired, even when the new key
      is not here yet: nothing is cached until it is imported, and the old key's holder cannot set it back).
      A key this machine already holds is not new: an old key imported to open backups would otherwise
      come back as "generation N+1" from anyone who has it; it is followed only once the user confirmed it
      here (``key follow``: ``pin.confirmed``). Otherwise — off, damaged, an older generation, a retired
      key, a key held here and not confirmed, another key of the same generation — the pinned key stays
      the home's key here, and ``pinned`` says why."""
    ring = keyring if keyring is not None else {}

    def held(kid: str | None) -> bool:
        return bool(kid) and ring.get(kid) is not None  # type: ignore[arg-type]

    if pin is not None and shared.rotation and shared.rotation.get("from") in pin.retired:
        # "rotating from" a key this machine saw retired: a rotation marker put back (by the holder of that
        # key) would make it readable again; its values are not read here
        shared = replace(shared, rotation=None)
    if pin is None or not pin.enabled:
        retired = set(pin.retired) if pin else set()
        if shared.enabled and not shared.damaged and shared.key_id in retired:
            return Policy(True, None, damaged=True, generation=shared.generation,
                          pinned=f"the home's setting names key {shared.key_id}, which this home rotated away "
                                 "from; not followed (run `subconscious key init` to choose a key)"), None
        if shared.enabled and not shared.damaged and held(shared.key_id) and shared.rotation is None:
            new = pin_to(pin, shared)
            return shared, (new if new != pin else None)
        return shared, None
    if shared.enabled and not shared.damaged and shared.key_id not in pin.retired:
        if shared.key_id == pin.key_id:
            if shared.generation >= pin.generation:
                if pin.awaiting != pin.key_id or not held(pin.key_id):
                    return shared, None  # (awaiting and not held yet: nothing can be sealed anyway)
                if pin.confirmed == pin.key_id:
                    return shared, replace(pin, awaiting=None, confirmed=None)
                # followed before it was held here, and held now: used once the user confirms it
        elif shared.generation > pin.generation + MAX_JUMP:
            pass  # refused below: no machine rotates that often
        elif shared.generation > pin.generation and held(shared.key_id) and pin.confirmed != shared.key_id:
            pass  # a key seen here before: refused below, until the user confirms it
        elif shared.generation > pin.generation:
            if shared.rotation is None:
                # pinned even when the new key is not here yet (nothing is cached until it is imported):
                # the old key is retired on this machine, so its holder cannot set it back as the home's.
                # A key not here yet is awaited: importing it later (say, an old key to open backups, named
                # by its holder as the next generation) does not make it the key values are sealed with
                # here until the user confirms it (`key follow`)
                new = pin_to(pin, shared)
                return shared, (new if held(shared.key_id) else replace(new, awaiting=shared.key_id))
            if shared.rotation.get("from") != pin.key_id:
                shared = replace(shared, rotation=None)  # only the pinned key may be rotated from
            return shared, None
    if pin.key_id is None:
        why = ("this machine's record of the home's encryption (in its local state dir, encryption/pin-*.json) "
               "is damaged, so no key is trusted here; remove that file to follow the home's setting again")
    elif not shared.enabled and not shared.damaged:
        why = ("the home's setting turns encryption off, but this machine pinned it on with key "
               f"{pin.key_id}; values are still sealed here. To turn it off on this machine too, run "
               "`subconscious key disable` here")
    elif shared.damaged:
        why = f"the home's encryption setting cannot be read; this machine keeps its pinned key {pin.key_id}"
    elif shared.key_id == pin.key_id and pin.awaiting == pin.key_id:
        why = (f"this machine followed the home's key {pin.key_id} (generation {pin.generation}) before it held "
               "it, and holds it now: it is used once you confirm it here (`subconscious key follow`), so that "
               "a key imported for another reason (an old one, to open backups) is never made the home's key "
               "by the folder")
    elif shared.generation > pin.generation + MAX_JUMP:
        why = (f"the home's setting jumps from generation {pin.generation} to {shared.generation} (key "
               f"{shared.key_id}); not followed (no home rotates that often). If it is really wanted, run "
               "`subconscious key disable` and `key init` here")
    elif shared.generation > pin.generation and shared.key_id not in pin.retired and held(shared.key_id):
        why = (f"the home's setting names key {shared.key_id} (generation {shared.generation}), a key this machine "
               f"held already (made or imported here) and never saw become the home's key; a rotation is "
               f"followed here only to a new key, so it keeps key {pin.key_id} (generation {pin.generation}). If "
               f"{shared.key_id} really is the home's new key, run `subconscious key follow` here")
    else:
        why = (f"the home's setting names key {shared.key_id} (generation {shared.generation}), older than or "
               f"retired by the key {pin.key_id} (generation {pin.generation}) this machine pinned; not followed. "
               "If that is really wanted, run `subconscious key disable` and `key init` here")
    return Policy(True, pin.key_id, shared.kdf if shared.key_id == pin.key_id else None, None,
                  generation=pin.generation, pinned=why), None
