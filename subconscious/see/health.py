"""The shared home's health as ``doctor --json`` reports it (conflict copies per engine, clock skew per
host, quarantined files, encryption state): the same dict, read only."""

from __future__ import annotations


def health(home) -> dict:
    from ..doctor.findings import report_json
    from ..doctor.checks import diagnose

    import os

    return report_json(diagnose(home.env, home.cwd or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()))
