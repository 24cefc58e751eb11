"""Terminal output of the commands people read (status, doctor, memory, messages, sessions, ask): rich
tables that fit the terminal (80 columns when it cannot be measured, ``COLUMNS`` wins), colour only on a
terminal. Imported by those commands only, never by a hook."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

__all__ = ["console", "table", "kv_table", "short_time", "short_id", "Text", "run_with_home", "show"]


def console(file: TextIO | None = None, width: int | None = None) -> Console:
    out = file or sys.stdout
    cols = width
    if cols is None and os.environ.get("COLUMNS", "").isdigit():
        cols = int(os.environ["COLUMNS"])
    return Console(file=out, width=cols, soft_wrap=False, highlight=False, emoji=False, markup=False)


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
        print(json.dumps(data, indent=2))
    else:
        render(data, console())


def run_with_home(verb: str, work) -> int:
    """``work(home) -> int`` with a :class:`subconscious.see.SeeHome`; what goes wrong is one line on stderr:
    exit 2 for configuration and usage, 1 for the server or a missing agent/block."""
    from ..config import ConfigError
    from ..letta.errors import LettaError
    from ..see import SeeHome
    from ..state.ids import InvalidIdentifier

    home = SeeHome()
    try:
        return int(work(home) or 0)
    except (ConfigError, InvalidIdentifier, ValueError) as exc:
        print(f"subconscious {verb}: {exc}", file=sys.stderr)
        return 2
    except (LettaError, LookupError) as exc:
        print(f"subconscious {verb}: {exc}", file=sys.stderr)
        return 1
    finally:
        home.close()
