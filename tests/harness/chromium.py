"""A real headless Chromium (Debian's ``chromium`` package, installed on first use) for tests that check
what a person sees in a page: the DOM after the page's scripts ran, and a screenshot.

    dom = Dom.parse(dump_dom(url))
    [card] = dom.find(cls="block", **{"data-label": "guidance"}); card.text
    screenshot(url, tmp / "page.png")

``--virtual-time-budget`` lets the page's fetches and scripts finish before the DOM is taken (virtual time
waits for the network). Each call uses a profile directory of its own, removed afterwards; nothing is left running.
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

from tests.harness.debian import ensure_binary

BUDGET_MS = 20000
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


def chromium() -> str:
    return ensure_binary("chromium")


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--no-first-run", "--disable-extensions", "--hide-scrollbars", f"--user-data-dir={profile}",
               f"--virtual-time-budget={BUDGET_MS}", *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"chromium exited {proc.returncode}: {proc.stderr[-2000:]}")
    return proc


def dump_dom(url: str, timeout: float = 60) -> str:
    """The page's DOM (serialized HTML) once its scripts have run."""
    return _run(["--dump-dom", url], timeout).stdout


def screenshot(url: str, out: Path, *, width: int = 1280, height: int = 2400, timeout: float = 60) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    _run([f"--window-size={width},{height}", f"--screenshot={out}", url], timeout)
    if not out.is_file() or out.stat().st_size == 0:
        raise AssertionError(f"chromium wrote no screenshot at {out}")
    return out


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    children: list["Element | str"] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text for c in self.children)

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def iter(self):
        yield self
        for c in self.children:
            if isinstance(c, Element):
                yield from c.iter()

    def find(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> list["Element"]:
        """Descendants (and self) with this tag, class and attribute values."""
        return [e for e in self.iter() if (tag is None or e.tag == tag) and (cls is None or cls in e.classes)
                and all(e.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())]


class Dom(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]

    @classmethod
    def parse(cls, html: str) -> Element:
        p = cls()
        p.feed(html)
        p.close()
        return p.root

    def handle_starttag(self, tag, attrs):
        el = Element(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(el)
        if tag not in VOID:
            self.stack.append(el)

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        self.stack[-1].children.append(data)
