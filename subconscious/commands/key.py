"""``subconscious key``: encryption of the cached memory-block values in the shared home.

    subconscious key init [--passphrase]      turn it on for this home (or join it on another machine)
    subconscious key export                   print this home's key as one line, to copy to another machine
    subconscious key import                   add such a line to this machine's key ring
    subconscious key rotate [--passphrase]    re-seal everything under a new key (re-run to resume)
    subconscious key status [--json]          the home's setting, this machine's keys, what is sealed
    subconscious key disable                  turn it off and store the values in plain text again

Secrets are never taken as command-line arguments (they would show in ``ps`` and shell history):
a passphrase comes from ``SUBCONSCIOUS_PASSPHRASE``, else the first line of stdin when stdin is not a
terminal, else a prompt; an exported key from ``SUBCONSCIOUS_KEY``, else stdin, else a prompt.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

PASSPHRASE_ENV = "SUBCONSCIOUS_PASSPHRASE"
KEY_ENV = "SUBCONSCIOUS_KEY"

_SOURCES = (f"The passphrase is read from ${PASSPHRASE_ENV} if set, else from the first line of stdin "
            "if stdin is not a terminal, else asked for (twice when it is new).")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = ("Encrypts the memory-block values cached in session-<id>.json (the shared home) with "
                     "AES-256-GCM. Keys stay in this machine's local state dir, never in LETTA_HOME.")
    sub = parser.add_subparsers(dest="key_command", metavar="COMMAND")

    def add(name: str, help_text: str, description: str) -> argparse.ArgumentParser:
        import textwrap

        text = "\n\n".join(textwrap.fill(par, 78) for par in description.split("\n\n"))
        return sub.add_parser(name, help=help_text, description=text,
                              formatter_class=argparse.RawDescriptionHelpFormatter)

    p = add("init", "turn encryption on for this home, or get its key onto this machine",
            "Turn encryption on for the shared home: make a key (random, or from a passphrase), keep it in "
            "this machine's key ring, record in the home that encryption is on, and seal the values already "
            "cached. In a home where it is on already: with --passphrase, derive the home's key from the "
            "same passphrase on this machine; otherwise re-seal every copy in the home, dropping values in plain "
            "text (while encryption is on they are not trusted: anyone who can write the synced folder could "
            "have put them there; the next prompt caches them again, sealed).\n\n" + _SOURCES)
    _passphrase_options(p)

    p = add("export", "print the home's key as one line (a secret: anyone with it can read the cache)",
            "Print the key as one line for `subconscious key import` on another machine. Treat it like a "
            "password: copy it over a channel you trust, and do not paste it into the synced directory.")
    p.add_argument("--key-id", help="export this key instead of the home's current one")

    add("import", "add a key printed by `key export` to this machine's key ring",
        f"Add an exported key to this machine's key ring. The line is read from ${KEY_ENV} if set, else "
        "from stdin if it is not a terminal, else asked for. Nothing in the home changes.")

    p = add("rotate", "re-seal every cached value under a new key (run again to resume)",
            "Make a new key, make it the home's key, and re-seal every session's cached values under it. "
            "Old keys stay in the key ring for reading until the rotation is done; if it is interrupted, "
            "run it again and it resumes. Other machines need the new key afterwards (key export/import, "
            "or key init --passphrase with the new passphrase).\n\n" + _SOURCES)
    _passphrase_options(p)
    p.add_argument("--drop-old", action="store_true",
                   help="when done, delete old keys from this machine's key ring (only those no longer in use)")

    p = add("status", "show the home's encryption setting, this machine's keys and what is sealed",
            "Show whether encryption is on for the home, which keys this machine holds, and how many "
            "cached values are in plain text or sealed under each key. Writes nothing.")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    add("follow", "confirm here that the home's new key, one this machine held already, is the home's key",
        "A rotation is followed on its own only to a key this machine has not seen before: an old key kept "
        "here (say, imported to open backups) could otherwise be named as the home's \"next generation\" by "
        "anyone who has it. When SessionStart or `doctor` says the home's setting names a key this machine "
        "held already, and it really is the new key (you imported it before the rotation reached this machine), "
        "this confirms it. A key this home rotated away from is never followed.")

    add("disable", "turn encryption off and store the cached values in plain text again",
        "Record in the home that encryption is off and turn every sealed value this machine can open "
        "back into plain text. Values under keys not on this machine stay sealed (run it there too).")


def _passphrase_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--passphrase", action="store_true",
                   help="derive the key from a passphrase (scrypt) so every machine can derive the same key")
    p.add_argument("--scrypt-n", type=int, default=None, metavar="N",
                   help="scrypt cost for a new passphrase key (power of two; default 131072)")


class Failure(Exception):
    """A message for the user; exit status 1."""


def read_secret(env_var: str, prompt: str, *, confirm: bool = False) -> str:
    value = os.environ.get(env_var)
    if value:
        return value
    if not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\r\n")  # only the line ending: spaces belong to a passphrase
    import getpass

    first = getpass.getpass(prompt)
    if confirm and getpass.getpass("Again: ") != first:
        raise Failure("the two passphrases differ; nothing was changed")
    return first


def _new_key(args, confirm: bool = True):
    from ..privacy.keys import ScryptParams, derive_key
    from ..state.seal import Key

    if not args.passphrase:
        return Key.generate(), None, "generated"
    from ..privacy.keys import WEAK_N

    params = ScryptParams.new() if args.scrypt_n is None else ScryptParams.new(n=args.scrypt_n)
    if params.n < WEAK_N:
        print(f"subconscious: warning: --scrypt-n {params.n} is a weak cost (below {WEAK_N}): anyone who can "
              "read the synced home can try passphrases quickly; the default is 131072", file=sys.stderr)
    passphrase = read_secret(PASSPHRASE_ENV, "New passphrase: ", confirm=confirm)
    if len(passphrase) < 12:
        print("subconscious: note: a passphrase of fewer than 12 characters is easy to guess "
              "by anyone who can read the synced home", file=sys.stderr)
    return derive_key(passphrase, params), params, "passphrase"


def _summary(report) -> None:
    print(f"re-sealed {report.changed} cached values in {report.sessions} session files")
    for kid, n in sorted(report.unopened.items()):
        print(f"warning: {n} values are sealed with key {kid}, which is not on this machine; they were left "
              "as they are (they count as not cached until re-written)", file=sys.stderr)


def _everywhere(c: "_Ctx", key, drop_plain: bool = False, trusted=None) -> list:
    """Re-seal every copy in the home (every host's version, copies, displaced, backups/, quarantine/)
    under ``key`` (None: plain text); print what was done and what is left, with a fix each. Returns the
    leftovers."""
    from ..privacy.homeseal import reseal_home

    total = reseal_home(c.store, c.ring, key, drop_plain=drop_plain, trusted=trusted)
    if total.files and not total.left:
        again = reseal_home(c.store, c.ring, key, drop_plain=drop_plain, trusted=trusted)  # what a concurrent writer displaced meanwhile
        total.files += again.files
        total.values += again.values
        total.left = again.left
    print(f"{'re-sealed' if key else 'opened'} {total.values} more values in {total.files} other files of the home "
          "(other hosts' versions, conflict copies, backups/, quarantine/)")
    seen = set()
    for left in total.left:
        if (left.path, left.why) in seen:
            continue
        seen.add((left.path, left.why))
        print(f"warning: left as it is: {left.path}: {left.why}; fix: {left.fix}", file=sys.stderr)
    return total.left


def _pin(c: "_Ctx", policy) -> None:
    from ..privacy.keys import load_pin, pin_to, save_pin

    save_pin(c.rt.local.keys, c.store.home, pin_to(load_pin(c.rt.local.keys, c.store.home), policy))


class _Ctx:
    def __init__(self, read_only: bool = False):
        from ..privacy.keys import KeyRing, effective_policy, load_pin, read_policy
        from ..local.runtime import runtime

        self.rt = runtime()
        self.store = self.rt.store(read_only=read_only)
        self.ring = KeyRing.load(self.rt.local.keys)
        self.shared = read_policy(self.store)
        self.pin = load_pin(self.rt.local.keys, self.store.home)
        # what this machine follows: the shared setting as its pin allows (never turned down from the folder)
        self.policy = effective_policy(self.shared, self.pin, self.ring)[0]
        self.refuse = (self.rt.settings.letta_home, self.rt.settings.state_home)

    def generation(self) -> int:
        from ..privacy.keys import MAX_GENERATION

        pinned = self.pin.generation if self.pin and self.pin.generation < MAX_GENERATION - 1 else 0  # not a damaged pin's
        return max(self.shared.generation, pinned)


def cmd_init(args) -> int:
    from ..injection.blockcache import reseal_all
    from ..privacy.keys import Policy, check_outside, derive_key, write_policy

    c = _Ctx()
    check_outside(c.rt.local.keys, *c.refuse)
    p = c.policy
    if p.pinned and p.key_id in c.ring:
        # the shared setting was turned down (off, or an older key) from the folder: put it back
        print(f"the home's setting was not this machine's: {p.pinned}", file=sys.stderr)
        write_policy(c.store, Policy(True, p.key_id, p.kdf, generation=p.generation))
        print(f"restored the home's setting to key {p.key_id} (generation {p.generation})")
    if p.enabled and not p.damaged:
        if p.key_id not in c.ring:
            if not args.passphrase or p.kdf is None:
                how = ("`subconscious key init --passphrase` with the home's passphrase, or " if p.kdf else "")
                raise Failure(f"encryption is already on in this home, with key {p.key_id}, which is not on this "
                              f"machine; get it with {how}`subconscious key export` on a machine that has it and "
                              "`subconscious key import` here")
            key = derive_key(read_secret(PASSPHRASE_ENV, "Passphrase: "), p.kdf)
            if key.id != p.key_id:
                raise Failure(f"this passphrase does not give the home's key {p.key_id}; nothing was changed")
            c.ring.add(key, source="passphrase", refuse_under=c.refuse)
            print(f"key {key.id} added to this machine's key ring ({c.ring.directory})")
        else:
            print(f"encryption is on in this home with key {p.key_id}; this machine has it")
        if not p.rotation:
            _pin(c, p)
        # on already: a plain value is anyone's (never sealed into an authentic one), and so is one under a
        # key the home no longer reads with (a retired key's holder may have sealed it): both are dropped
        _summary(reseal_all(c.store, c.ring, c.ring[p.key_id], drop_plain=True, trusted=p.reads_with))
        _everywhere(c, c.ring[p.key_id], drop_plain=True, trusted=p.reads_with)
        return 0
    key, params, source = _new_key(args)
    c.ring.add(key, source=source, refuse_under=c.refuse)  # before the setting: never name a key nobody has
    policy = Policy(True, key.id, params, generation=c.generation() + 1)
    write_policy(c.store, policy)
    _pin(c, policy)
    print(f"encryption is on for {c.store.home} with key {key.id} (generation {policy.generation}; "
          f"kept in {c.ring.directory})")
    retired = set(c.pin.retired if c.pin else ())  # off until now: any key but one retired here
    _summary(reseal_all(c.store, c.ring, key, trusted=lambda kid: kid not in retired))
    _everywhere(c, key, trusted=lambda kid: kid not in retired)
    if params is None:
        print("other machines: run `subconscious key export` here and `subconscious key import` there")
    else:
        print("other machines: run `subconscious key init --passphrase` there with the same passphrase")
    return 0


def cmd_export(args) -> int:
    from ..privacy.keys import export_key

    c = _Ctx(read_only=True)
    kid = args.key_id or c.policy.key_id or (next(iter(c.ring)) if len(c.ring) == 1 else None)
    if kid is None:
        raise Failure("no key to export: encryption is off in this home (use --key-id to pick one)")
    key = c.ring.get(kid)
    if key is None:
        raise Failure(f"key {kid} is not on this machine")
    print("subconscious: this line is the key itself; anyone who has it can read the cached blocks",
          file=sys.stderr)
    print(export_key(key))
    return 0


def cmd_import(args) -> int:
    from ..privacy.keys import import_key

    c = _Ctx(read_only=True)
    key = import_key(read_secret(KEY_ENV, "Exported key: "))
    c.ring.add(key, source="imported", refuse_under=c.refuse)
    print(f"key {key.id} added to this machine's key ring ({c.ring.directory})")
    from ..privacy.keys import effective_policy

    policy, new_pin = effective_policy(c.shared, c.pin, c.ring)
    if new_pin is not None:  # the home's key is here now: pinned, so the folder cannot turn it down
        _pin(c, policy)
    c.policy = policy
    if policy.pinned and c.shared.enabled and c.shared.key_id == key.id:
        # the folder names it as the home's key, and this machine pinned another: a key imported to open old
        # backups must never become the sealing key because the folder says so. The user says so, here
        print(f"note: the home's setting names key {key.id} (generation {c.shared.generation}) as its key; this "
              "machine uses it only once you confirm that here: `subconscious key follow`")
    elif c.policy.enabled and c.policy.key_id != key.id:
        print(f"note: this home's current key is {c.policy.key_id}, not {key.id}")
    elif not c.policy.enabled:
        print("note: encryption is off in this home (`subconscious key init` turns it on)")
    return 0


def cmd_rotate(args) -> int:
    from ..injection.blockcache import encryption_findings, reseal_all
    from ..privacy.keys import Policy, read_policy, write_policy

    c = _Ctx()
    p = c.policy
    if not p.enabled or p.damaged:
        raise Failure("encryption is not on in this home; `subconscious key init` turns it on")
    if p.pinned:
        raise Failure(f"{p.pinned}; run `subconscious key init` here first to put the home's setting back")
    if p.rotation:
        key = c.ring.get(p.key_id)
        if key is None:
            raise Failure(f"a rotation to key {p.key_id} was started on host {p.rotation.get('host', '?')}, and that "
                          "key is not on this machine; finish it there, or import the key here first")
        print(f"resuming the rotation from {p.rotation.get('from', '?')} to {key.id}")
        params = p.kdf
    else:
        if p.key_id not in c.ring:
            raise Failure(f"this machine does not have the home's key {p.key_id}, so it cannot re-seal the "
                          "cached values; import it first (`subconscious key import`)")
        from ..privacy.keys import MAX_GENERATION

        if c.generation() + 1 >= MAX_GENERATION - 1:
            raise Failure(f"the home's generation is {c.generation()}, at the ceiling ({MAX_GENERATION}): a writer of "
                          "the folder pushed it there; run `subconscious key disable` and `key init` to start over")
        key, params, source = _new_key(args)
        c.ring.add(key, source=source, refuse_under=c.refuse)
        _confirm(c, key.id)  # held here before the setting names it: this machine follows it (keys.effective_policy)
        write_policy(c.store, Policy(True, key.id, params, generation=c.generation() + 1, rotation={
            "from": p.key_id, "host": c.rt.host.id, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}))
        print(f"rotating from {p.key_id} to {key.id}; old keys stay on this machine until it is done")
    # from the key rotated from (and the new one) only: a value under an older, retired key is dropped
    source = p.rotation.get("from") if p.rotation else p.key_id
    trusted = {key.id, source}.__contains__
    _summary(reseal_all(c.store, c.ring, key, drop_plain=True, trusted=trusted))
    _everywhere(c, key, drop_plain=True, trusted=trusted)
    now = read_policy(c.store)
    if now.key_id != key.id:
        raise Failure(f"the home's key changed to {now.key_id} meanwhile (another machine?); run `key rotate` again")
    # the keys rotated away from, in the setting: a machine that first pins it (a new one, or one offline all
    # along) never follows one of them back as "newer", whether it holds that key or not
    history = tuple(sorted((set(p.retired) | set(c.pin.retired if c.pin else ()) | {source}) - {key.id, None}))
    done = Policy(True, key.id, params, generation=now.generation, retired=history)
    write_policy(c.store, done)
    _pin(c, Policy(True, key.id, params, generation=now.generation, rotation=now.rotation, retired=history))
    print(f"rotation done: the home's key is {key.id} (generation {done.generation})")
    if args.drop_old:
        from ..privacy.homeseal import scan_home

        scan = scan_home(c.store.home)
        refused = 0
        for kid in sorted(set(c.ring) - {key.id}):
            where = scan.naming(kid)
            if where:
                refused += 1
                print(f"kept old key {kid}: {len(where)} files of the home still name it, e.g. {where[0]}",
                      file=sys.stderr)
            elif c.ring.remove(kid):
                print(f"removed old key {kid} from this machine")
        if refused:
            raise Failure("old keys kept (see above): re-seal what still uses them (run `key rotate` on a machine "
                          "that holds them), then `key rotate --drop-old` again")
    return 0


def _confirm(c: "_Ctx", key_id: str) -> None:
    from ..privacy.keys import Pin, confirm, load_pin, save_pin

    pin = load_pin(c.rt.local.keys, c.store.home)
    if pin is not None:
        save_pin(c.rt.local.keys, c.store.home, confirm(pin, key_id))


def cmd_follow(args) -> int:
    from ..privacy.keys import MAX_JUMP, effective_policy, load_pin, save_pin

    c = _Ctx()
    s, pin = c.shared, c.pin
    if not c.policy.pinned:
        raise Failure(f"nothing to confirm: this machine follows the home's setting (key {c.policy.key_id}, "
                      f"generation {c.policy.generation})" if c.policy.enabled else
                      "nothing to confirm: encryption is off in this home")
    awaited = pin is not None and pin.awaiting == s.key_id == pin.key_id and s.key_id in c.ring
    if not awaited and not (s.enabled and not s.damaged and s.key_id and pin is not None
                            and pin.generation < s.generation <= pin.generation + MAX_JUMP):
        raise Failure(f"the home's setting does not name a newer key than this machine's: {c.policy.pinned}")
    if s.key_id in pin.retired:
        raise Failure(f"key {s.key_id} was rotated away from in this home: it is never the home's key here again "
                      "(`subconscious key disable` and `key init` here start over)")
    _confirm(c, s.key_id)
    policy, new_pin = effective_policy(s, load_pin(c.rt.local.keys, c.store.home), c.ring)
    if new_pin is not None:
        save_pin(c.rt.local.keys, c.store.home, new_pin)
    if policy.key_id != s.key_id:
        raise Failure(f"still not followed: {policy.pinned}")
    print(f"confirmed: this machine follows the home's key {s.key_id} (generation {s.generation})"
          + ("" if awaited else f"; key {pin.key_id} is retired here"))
    return 0


def status_info(c: "_Ctx") -> dict:
    from ..see.keys import encryption_status

    return encryption_status(c.store, c.ring, c.policy, c.refuse)


def cmd_status(args) -> int:
    info = status_info(_Ctx(read_only=True))
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    state = "on" if info["enabled"] else "off"
    if info["enabled"]:
        state += f", key {info['keyId']}" + (" (from a passphrase)" if info["passphrase"] else "")
        state += "; this machine has it" if info["hasCurrentKey"] else "; this machine does NOT have it"
    print(f"encryption  {state}")
    print(f"home        {info['home']}")
    print(f"key ring    {info['keyRing']} ({len(info['keys'])} keys)")
    for k in info["keys"]:
        print(f"  {k['id']}  {k['source'] or '?'}  {k['created']}" + ("  current" if k["current"] else ""))
    v = info["values"]
    sealed = ", ".join(f"{n} under {kid} ({info['readableHere'].get(kid, 0)} readable here)"
                       for kid, n in sorted(v.items()) if kid != "plain")
    print(f"cached      {v['plain']} in plain text" + (f"; {sealed}" if sealed else ""))
    d = info["onDisk"]["values"]
    print(f"on disk     {d['plain']} in plain text" + "".join(f"; {n} under {kid}" for kid, n in sorted(d.items())
                                                          if kid != "plain") + " (every file of the home)")
    for f in info["findings"]:
        print(f"  ! {f['severity']}: {f['kind']}: {f['message']}")
    return 0


def cmd_disable(args) -> int:
    from ..injection.blockcache import reseal_all
    from ..privacy.keys import Policy, write_policy

    c = _Ctx()
    write_policy(c.store, Policy(False, generation=c.generation()))  # first: no host seals new values meanwhile
    _pin(c, Policy(False, generation=c.generation()))  # confirmed on this machine: the pin says off
    import shutil

    from ..privacy.keys import seen_dir

    shutil.rmtree(seen_dir(c.rt.local.keys, c.store.home), ignore_errors=True)
    print(f"encryption is off for {c.store.home} (confirmed on this machine; other machines that pinned it "
          "on keep sealing until `subconscious key disable` runs there too)")
    report = reseal_all(c.store, c.ring, None)
    print(f"opened {report.changed} sealed values into plain text in {report.sessions} session files")
    _everywhere(c, None)
    for kid, n in sorted(report.unopened.items()):
        print(f"warning: {n} values are sealed with key {kid}, which is not on this machine; they stay sealed "
              "(run `subconscious key disable` on a machine that has it)", file=sys.stderr)
    return 0


COMMANDS = {"init": cmd_init, "export": cmd_export, "import": cmd_import, "rotate": cmd_rotate,
            "status": cmd_status, "disable": cmd_disable, "follow": cmd_follow}


def run(args: argparse.Namespace) -> int:
    from ..config import ConfigError
    from ..privacy.keys import KeysError
    from ..state.ids import InvalidIdentifier
    from ..state.locks import LockTimeout
    from ..state.store.core import StoreError

    command = COMMANDS.get(getattr(args, "key_command", None) or "")
    if command is None:
        print("subconscious key: choose a command: " + ", ".join(COMMANDS) + " (see --help)", file=sys.stderr)
        return 2
    try:
        return command(args)
    except (ConfigError, InvalidIdentifier) as exc:
        print(f"subconscious: {exc}", file=sys.stderr)
        return 2
    except (Failure, KeysError, StoreError, LockTimeout) as exc:
        print(f"subconscious key {args.key_command}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"subconscious key {args.key_command}: interrupted; run it again to finish", file=sys.stderr)
        return 130
    except OSError as exc:  # e.g. backups/ is a symlink: nothing is written through it
        where = f": {exc.filename}" if exc.filename else ""
        print(f"subconscious key {args.key_command}: {exc.strerror or exc}{where}; fix that and run it again "
              "(it resumes)", file=sys.stderr)
        return 1
