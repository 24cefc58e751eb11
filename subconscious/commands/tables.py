"""Terminal output of the commands people read (status, doctor, memory, messages, sessions, ask): rich
tables that fit the terminal (80 columns when it cannot be measured, ``COLUMNS`` wins), colour only on a
terminal. Imported by those commands only, never by a hook.

This is the one seam where text reaches the terminal: the console's every segment of text (not rich's
own styling) goes through :func:`subconscious.base.termtext.clean`, so no escape or control sequence the agent,
the server or a file wrote is printed; markup is off, so ``[red]`` or ``[link=…]`` in that text is text.
``--json`` goes through :func:`subconscious.base.termtext.json_dumps` (DEL, C1 and bidi controls escaped)."""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, TextIO

from rich.console import Console
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from ..base.termtext import clean, json_dumps

__all__ = ["console", "table", "kv_table", "short_time", "short_id", "Text", "run_with_home", "show", "clean",
           "json_dumps", "SafeConsole"]


class SafeConsole(Console):
    """A rich console that prints no control sequence it was given: each text segment rendered (a table's
    cells included, rendered through here too) is :func:`clean`; rich's own style codes are added after."""

    def render(self, renderable, options=None):
        for seg in super().render(renderable, options):
            if seg.control is None:
                text = clean(seg.text)
                if text != seg.text:
                    seg = Segment(text, seg.style)
            yield seg


def console(file: TextIO | None = None, width: int | None = None) -> Console:
    out = file or sys.stdout
    out = getattr(out, "unfiltered", out)  # past cli's filter, which would take rich's colours too
    cols = width
    if cols is None and os.environ.get("COLUMNS", "").isdigit():
        cols = int(os.environ["COLUMNS"])
    return SafeConsole(file=out, width=cols, soft_wrap=False, highlight=False, emoji=False, markup=False)


def table(*columns: str | tuple[str, dict[str, Any]], title: str | None = None) -> Table:
    """A table with a header row and no outer box (its lines would take columns from the text)."""
    t = Table(title=title, title_justify="left", box=None, pad_edge=False, show_edge=False, header_style="bold",
              padding=(0, 1))
    for col in columns:
        name, kw = (col, {}) if isinstance(col, str) else col
        t.add_column(name, **kw)
    return t


def kv_table() -> Table:
    """Two columns, key and value: the key never wraps, the value wraps (long paths fold)."""
    t = Table(show_header=False, box=None, pad_edge=False, padding=(0, 2, 0, 0))
    t.add_column("key", style="bold", no_wrap=True)
    t.add_column("value", overflow="fold")
    return t


def short_time(iso: str | None) -> str:
    """``2026-12-01T09:51:57.123Z`` → ``12-01 09:51`` (the year and seconds cost columns); ``-`` for none."""
    if not iso or len(iso) < 16:
        return iso or "-"
    return f"{iso[5:10]} {iso[11:16]}"


def short_id(value: str | None, n: int = 8) -> str:
    return (value or "-")[:n]


def show(data: dict, render: Callable[[dict, Console], None], as_json: bool) -> None:
    """A verb's result: indented JSON for ``--json`` (what scripts read), else ``render`` on the console."""
    if as_json:
        print(json_dumps(data, indent=2))
    else:
        render(data, console())


def run_with_home(verb: str, work) -> int:
    """``work(home) -> int`` with a :class:`subconscious.see.SeeHome`; what goes wrong is one line on stderr:
    exit 2 for configuration and usage, 1 for the server or a missing agent/block (under ``--json`` cli.main
prints it as ``{"error", "kind"}`` on stdout)."""
    from ..config import ConfigError
    from ..letta.errors import LettaConfigError, LettaError
    from ..see import SeeHome
    from ..state.ids import InvalidIdentifier
    from .common import fail

    home = SeeHome()
    try:
        return int(work(home) or 0)
    except (ConfigError, InvalidIdentifier, LettaConfigError) as exc:  # LETTA_BASE_URL 'ftp://…' too
        return fail(verb, exc, "config", 2)
    except ValueError as exc:
        return fail(verb, exc, "usage", 2)
    except LettaError as exc:
        return fail(verb, exc, "server", 1)
    except LookupError as exc:
        return fail(verb, str(exc).strip("'\""), "not_found", 1)
    finally:
        home.close()
