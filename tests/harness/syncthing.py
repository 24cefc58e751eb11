"""Two real Syncthing instances on 127.0.0.1 sharing one folder.

Usage::

    pair = SyncthingPair(tmp_path).start()      # installs syncthing with apt-get if missing
    (pair.a_dir / "x.json").write_text("{}")
    pair.scan("A"); pair.wait_in_sync()
    pair.cut(); ...; pair.restore()
    pair.stop()

Pitfalls avoided (seen with Debian's 1.19.2):
* both devices dialling each other at once can stall the TLS hello for 20 s -> only B
  dials (A lists B as ``dynamic``; discovery is off so A never finds an address);
* B's first dial may race A's listener, then the dial loop sleeps >= 5 s -> if not
  connected after both REST APIs answer, B pauses+unpauses A (unpause dials at once);
* ``syncthing serve`` forks a monitor and an inner process: we stop via REST, then
  TERM/KILL the recorded monitor PID and the inner PIDs recorded at start -- never by name;
* discovery (global/local), relays, NAT, STUN, usage/crash reporting, upgrades and the
  browser are all off; every port is a free one picked on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.harness.procs import pid_alive

REPO_ROOT = Path(__file__).resolve().parents[2]
STIGNORE_TEMPLATE = REPO_ROOT / "sync" / "stignore"
APT_PACKAGE = "syncthing"


class SyncthingError(RuntimeError):
    """The harness could not do what a test needs (install, start, sync): a hard failure."""


# --------------------------------------------------------------------------- install

_INSTALL_SECONDS: float | None = None


def install_seconds() -> float | None:
    """Seconds this process spent installing syncthing with apt (None: it was there)."""
    return _INSTALL_SECONDS


def ensure_syncthing() -> str:
    """Path of the ``syncthing`` binary; installs Debian's package if it is missing."""
    from .debian import INSTALL_SECONDS, MissingBinary, ensure_binary

    global _INSTALL_SECONDS
    try:
        found = ensure_binary("syncthing", APT_PACKAGE)
    except MissingBinary as exc:
        raise SyncthingError(str(exc)) from None
    _INSTALL_SECONDS = INSTALL_SECONDS.get(APT_PACKAGE, _INSTALL_SECONDS)
    return found


def free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...; comm may hold spaces/parens: split after the last ')'
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            out.append(int(d.name))
    return out


# --------------------------------------------------------------------------- nodes


@dataclass
class Node:
    name: str  # "A" | "B"
    root: Path  # <base>/<name>
    folder: Path  # the synced folder (replica)
    gui_port: int
    sync_port: int
    api_key: str
    device_id: str = ""
    proc: subprocess.Popen | None = None
    pid: int | None = None
    inner_pids: list[int] = field(default_factory=list)

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def log(self) -> Path:
        return self.root / "syncthing.log"

    @property
    def gui(self) -> str:
        return f"127.0.0.1:{self.gui_port}"

    @property
    def short_id(self) -> str:
        """The 7-char id Syncthing puts in conflict-copy names."""
        return self.device_id[:7]


def _config_xml(node: Node, peer: Node, folder_id: str, watch_delay: int, rescan: int,
                dials: bool) -> str:
    peer_addr = f"tcp://127.0.0.1:{peer.sync_port}" if dials else "dynamic"
    devs = sorted([node, peer], key=lambda n: n.name)
    dev_lines = "\n".join(f'        <device id="{d.device_id}" introducedBy=""></device>' for d in devs)

    def device(d: Node, addr: str) -> str:
        return (f'    <device id="{d.device_id}" name="host{d.name}" compression="metadata" introducer="false">\n'
                f"        <address>{addr}</address>\n        <paused>false</paused>\n"
                f"        <autoAcceptFolders>false</autoAcceptFolders>\n    </device>")

    return f"""<configuration version="36">
    <folder id="{folder_id}" label="{folder_id}" path="{node.folder}" type="sendreceive" rescanIntervalS="{rescan}" fsWatcherEnabled="true" fsWatcherDelayS="{watch_delay}" ignorePerms="false" autoNormalize="true">
        <filesystemType>basic</filesystemType>
{dev_lines}
        <minDiskFree unit="%">1</minDiskFree>
        <maxConflicts>10</maxConflicts>
        <markerName>.stfolder</markerName>
    </folder>
{device(node, f"tcp://127.0.0.1:{node.sync_port}")}
{device(peer, peer_addr)}
    <gui enabled="true" tls="false" debugging="false">
        <address>{node.gui}</address>
        <apikey>{node.api_key}</apikey>
        <theme>default</theme>
    </gui>
    <options>
        <listenAddress>tcp://127.0.0.1:{node.sync_port}</listenAddress>
        <globalAnnounceServer></globalAnnounceServer>
        <globalAnnounceEnabled>false</globalAnnounceEnabled>
        <localAnnounceEnabled>false</localAnnounceEnabled>
        <reconnectionIntervalS>1</reconnectionIntervalS>
        <relaysEnabled>false</relaysEnabled>
        <startBrowser>false</startBrowser>
        <natEnabled>false</natEnabled>
        <urAccepted>-1</urAccepted>
        <urSeen>3</urSeen>
        <autoUpgradeIntervalH>0</autoUpgradeIntervalH>
        <crashReportingEnabled>false</crashReportingEnabled>
        <stunKeepaliveStartS>0</stunKeepaliveStartS>
        <stunKeepaliveMinS>0</stunKeepaliveMinS>
        <stunServer></stunServer>
        <announceLANAddresses>false</announceLANAddresses>
        <setLowPriority>false</setLowPriority>
        <restartOnWakeup>false</restartOnWakeup>
    </options>
</configuration>
"""


# --------------------------------------------------------------------------- the pair


class SyncthingPair:
    """Two Syncthing devices, A and B, sharing folder ``folder_id`` on loopback."""

    def __init__(self, base: Path, *, folder_id: str = "letta-home", watch_delay: int = 1,
                 rescan: int = 60, stignore: str | None = None, timeout: float = 60.0):
        self.base = Path(base)
        self.folder_id = folder_id
        self.watch_delay = watch_delay
        self.rescan = rescan
        self.stignore = STIGNORE_TEMPLATE.read_text() if stignore is None else stignore
        self.timeout = timeout
        self.timings: dict[str, float] = {}
        self.binary = ""
        self.a: Node | None = None
        self.b: Node | None = None

    # -- paths ---------------------------------------------------------------

    @property
    def a_dir(self) -> Path:
        return self._node("A").folder

    @property
    def b_dir(self) -> Path:
        return self._node("B").folder

    def dir(self, side: str) -> Path:
        return self._node(side).folder

    def _node(self, side: str) -> Node:
        node = {"A": self.a, "B": self.b}.get(side.upper())
        if node is None:
            raise SyncthingError(f"no node {side!r} (pair not started?)")
        return node

    def _peer(self, side: str) -> Node:
        return self._node("B" if side.upper() == "A" else "A")

    # -- REST ----------------------------------------------------------------

    def api(self, side: str, method: str, path: str, body: object | None = None,
            timeout: float = 30.0) -> object:
        node = self._node(side)
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"http://{node.gui}{path}", data=data, method=method,
                                     headers={"X-API-Key": node.api_key})
        if data is not None:
            req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
        if not raw.strip():
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode(errors="replace")

    def _try(self, fn: Callable[[], bool]) -> bool:
        try:
            return bool(fn())
        except (OSError, urllib.error.URLError, ValueError, KeyError):
            return False

    def wait_for(self, cond: Callable[[], bool], desc: str, timeout: float | None = None,
                 interval: float = 0.05) -> float:
        """Poll ``cond`` until true; returns seconds waited, raises SyncthingError on timeout."""
        timeout = self.timeout if timeout is None else timeout
        t0 = time.monotonic()
        while not self._try(cond):
            for n in (self.a, self.b):
                if n and n.proc and n.proc.poll() is not None:
                    raise SyncthingError(f"syncthing {n.name} exited ({n.proc.returncode}) while "
                                         f"waiting for {desc}; log tail:\n{self.log_tail(n.name)}")
            if time.monotonic() - t0 > timeout:
                raise SyncthingError(f"timeout after {timeout:.0f}s waiting for {desc}\n"
                                     f"--- A log:\n{self.log_tail('A')}\n--- B log:\n{self.log_tail('B')}")
            time.sleep(interval)
        return time.monotonic() - t0

    def log_tail(self, side: str, chars: int = 1500) -> str:
        try:
            return self._node(side).log.read_text(errors="replace")[-chars:]
        except (OSError, SyncthingError):
            return "(no log)"

    # -- state probes ----------------------------------------------------------

    def connected(self, side: str) -> bool:
        conns = self.api(side, "GET", "/rest/system/connections")["connections"]
        return bool(conns.get(self._peer(side).device_id, {}).get("connected"))

    def idle(self, side: str) -> bool:
        st = self.api(side, "GET", f"/rest/db/status?folder={self.folder_id}")
        return st["state"] == "idle" and st["needTotalItems"] == 0

    def peer_complete(self, side: str) -> bool:
        peer = self._peer(side).device_id
        c = self.api(side, "GET", f"/rest/db/completion?folder={self.folder_id}&device={peer}")
        return c["completion"] == 100 and c["needItems"] == 0 and c.get("needDeletes", 0) == 0

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> SyncthingPair:
        t0 = time.monotonic()
        self.binary = ensure_syncthing()
        t_installed = time.monotonic()
        if self.base.exists():
            shutil.rmtree(self.base)
        ports = free_ports(4)
        self.a = Node("A", self.base / "A", self.base / "A" / "LETTA_HOME", ports[0], ports[2],
                      f"harness-key-A-{os.getpid()}")
        self.b = Node("B", self.base / "B", self.base / "B" / "LETTA_HOME", ports[1], ports[3],
                      f"harness-key-B-{os.getpid()}")
        for n in (self.a, self.b):
            n.home.mkdir(parents=True, mode=0o700)
            (n.folder / ".stfolder").mkdir(parents=True, mode=0o700)
            n.folder.chmod(0o700)
            (n.folder / ".stignore").write_text(self.stignore)
            self._run(["generate", f"--home={n.home}", "--no-default-folder", "--skip-port-probing"])
            n.device_id = self._run(["serve", f"--home={n.home}", "--device-id"]).strip()
        (self.a.home / "config.xml").write_text(
            _config_xml(self.a, self.b, self.folder_id, self.watch_delay, self.rescan, dials=False))
        (self.b.home / "config.xml").write_text(
            _config_xml(self.b, self.a, self.folder_id, self.watch_delay, self.rescan, dials=True))
        try:
            for n in (self.a, self.b):
                self._launch(n)
            for n in (self.a, self.b):
                self.wait_for(lambda n=n: "pong" in str(self.api(n.name, "GET", "/rest/system/ping")),
                              f"{n.name} REST API")
                n.inner_pids = _children(n.pid)
            if not self._try(lambda: self.connected("B")):
                self._set_paused("B", True)
                self._set_paused("B", False)
            self.wait_for(lambda: self.connected("A"), "A connected to B")
            self.wait_for(lambda: self.connected("B"), "B connected to A")
            self.wait_in_sync()
        except BaseException:
            self.stop()
            raise
        self.timings["start"] = time.monotonic() - t_installed
        self.timings["install_check"] = t_installed - t0
        return self

    def _run(self, args: list[str]) -> str:
        r = subprocess.run([self.binary, *args], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise SyncthingError(f"`syncthing {' '.join(args)}` failed ({r.returncode}): "
                                 f"{(r.stdout + r.stderr)[-1000:]}")
        return r.stdout

    def _launch(self, n: Node) -> None:
        env = dict(os.environ, STNORESTART="1", STNOUPGRADE="1", STNODEFAULTFOLDER="1")
        out = open(n.root / "stdout.log", "ab")
        try:
            n.proc = subprocess.Popen(
                [self.binary, "serve", f"--home={n.home}", "--no-browser", "--no-restart",
                 "--no-upgrade", "--logflags=7", f"--logfile={n.log}"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                start_new_session=True)
        finally:
            out.close()
        n.pid = n.proc.pid
        (n.root / "pid").write_text(str(n.pid))

    def stop(self) -> None:
        """REST shutdown, then TERM/KILL the recorded monitor PID and its recorded children."""
        nodes = [n for n in (self.a, self.b) if n is not None and n.pid is not None]
        kids: dict[str, set[int]] = {}
        for n in nodes:  # ask both first, so they shut down in parallel
            kids[n.name] = set(n.inner_pids) | (set(_children(n.pid)) if pid_alive(n.pid) else set())
            try:
                self.api(n.name, "POST", "/rest/system/shutdown", timeout=5)
            except (OSError, urllib.error.URLError, ValueError):
                pass
        for n in nodes:
            t0 = time.monotonic()
            self._reap(n, 10)
            if pid_alive(n.pid):
                os.kill(n.pid, signal.SIGTERM)
                self._reap(n, 3)
            if pid_alive(n.pid):
                os.kill(n.pid, signal.SIGKILL)
                self._reap(n, 3)
            for k in kids[n.name]:
                if pid_alive(k):
                    try:
                        os.kill(k, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            self.timings[f"stop_{n.name}"] = time.monotonic() - t0
            n.pid = None
            (n.root / "pid").unlink(missing_ok=True)

    @staticmethod
    def _reap(n: Node, seconds: float) -> None:
        if n.proc is not None:
            try:
                n.proc.wait(timeout=seconds)
            except subprocess.TimeoutExpired:
                pass

    def __enter__(self) -> SyncthingPair:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- test controls ---------------------------------------------------------

    def _set_paused(self, side: str, paused: bool) -> None:
        self.api(side, "PATCH", f"/rest/config/devices/{self._peer(side).device_id}",
                 {"paused": paused})

    def cut(self) -> float:
        """Cut the link: each side pauses the other device; returns seconds until both saw it."""
        t0 = time.monotonic()
        self._set_paused("A", True)
        self._set_paused("B", True)
        self.wait_for(lambda: not self.connected("A"), "A disconnected")
        self.wait_for(lambda: not self.connected("B"), "B disconnected")
        return time.monotonic() - t0

    def restore(self) -> float:
        """Restore the link; returns seconds until both sides are connected again."""
        t0 = time.monotonic()
        self._set_paused("A", False)
        self._set_paused("B", False)
        self.wait_for(lambda: self.connected("A"), "A reconnected")
        self.wait_for(lambda: self.connected("B"), "B reconnected")
        return time.monotonic() - t0

    def scan(self, side: str, sub: str | None = None) -> None:
        """Force a rescan of the folder (or ``sub``) on ``side``; returns when it is done."""
        q = f"folder={self.folder_id}"
        if sub:
            q += "&sub=" + urllib.request.quote(sub)
        self.api(side, "POST", f"/rest/db/scan?{q}", timeout=self.timeout)

    def wait_in_sync(self, timeout: float | None = None) -> float:
        """Wait until both sides are idle and each sees the other 100% complete."""
        t0 = time.monotonic()
        self.wait_for(lambda: self.idle("A"), "A idle", timeout)
        self.wait_for(lambda: self.idle("B"), "B idle", timeout)
        self.wait_for(lambda: self.peer_complete("A"), "A sees B complete", timeout)
        self.wait_for(lambda: self.peer_complete("B"), "B sees A complete", timeout)
        return time.monotonic() - t0

    def wait_file(self, side: str, relpath: str, content: str | bytes | None = None,
                  timeout: float | None = None) -> float:
        """Wait until ``relpath`` exists on ``side`` (with ``content`` if given)."""
        path = self.dir(side) / relpath

        def ok() -> bool:
            if content is None:
                return path.exists()
            data = path.read_bytes()
            return data == (content.encode() if isinstance(content, str) else content)

        return self.wait_for(ok, f"{relpath} on {side}", timeout)
