"""Debian packages the real-part tests need, installed on first use (as the README's test command
promises on a fresh machine): ``ensure_binary("rclone")`` returns the binary's path, installing the
package with apt-get when it is missing and this is root; otherwise it raises with the command to run."""

from __future__ import annotations

import os
import shutil
import subprocess
import time


class MissingBinary(RuntimeError):
    pass


INSTALL_SECONDS: dict[str, float] = {}


def ensure_binary(binary: str, package: str | None = None) -> str:
    found = shutil.which(binary)
    if found:
        return found
    package = package or binary
    if shutil.which("apt-get") is None:
        raise MissingBinary(f"{binary} is not installed and apt-get is not available: install Debian's package "
                            f"(`apt-get install -y {package}`) or your system's to run these tests")
    if os.geteuid() != 0:
        raise MissingBinary(f"{binary} is not installed and this user is not root: "
                            f"run `apt-get install -y {package}` as root first")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    t0 = time.monotonic()
    for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "--no-install-recommends", package]):
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            raise MissingBinary(f"`{' '.join(cmd)}` failed (exit {r.returncode}); cannot install {package}:\n"
                                + (r.stdout + r.stderr)[-2000:])
    INSTALL_SECONDS[package] = time.monotonic() - t0
    found = shutil.which(binary)
    if not found:
        raise MissingBinary(f"apt-get installed `{package}` but no {binary} binary is on PATH")
    return found
