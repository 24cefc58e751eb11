"""``subconscious doctor``: find what sync engines, git and clocks did to the shared state, and repair
what is safe. ``checks.diagnose`` (read-only) → findings; ``fix.apply`` (with backups)."""
