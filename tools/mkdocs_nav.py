"""mkdocs hook: a page under docs/ that mkdocs.yml's nav does not list is added under "More" (sorted by
file name), so a new page is in the site, its links checked, before someone places it in the nav; a page
the nav names that does not exist still fails the strict build."""

from __future__ import annotations

from pathlib import Path


def _listed(nav) -> set[str]:
    found: set[str] = set()
    for item in nav or []:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        if isinstance(value, list):
            found |= _listed(value)
        elif isinstance(value, str):
            found.add(value)
    return found


def on_config(config, **_):
    if not config.get("nav"):
        return config
    docs = Path(config["docs_dir"])
    listed = _listed(config["nav"])
    extra = sorted(p.relative_to(docs).as_posix() for p in docs.rglob("*.md")
                   if p.relative_to(docs).as_posix() not in listed)
    if extra:
        config["nav"] = [*config["nav"], {"More": extra}]
    return config
