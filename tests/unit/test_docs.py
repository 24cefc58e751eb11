"""The README and the documentation site under docs/, as a reader meets them.

- The README stays a ten-minute read (at most 300 lines) and starts with the two commands, exactly.
- ``mkdocs build --strict`` builds the site (so ``python -m pytest``, which ``.ci/run`` runs, builds the docs):
  a broken link, a missing anchor or a page the nav names that does not exist fails it; a page nobody put in
  the nav is still built (``tools/mkdocs_nav.py`` adds it under "More").
- Links from the README into docs/, and every ``docs/<page>.md`` the code or its messages name, exist.
- Every command in a ```console / ```sh / ```bash / ```shell block of the README, of any page under docs/ and
  of the kit READMEs is either run by a test here (RUN_HERE: the documented text itself, placeholders filled
  in) or listed with the test that runs it (COVERED, checked to exist). A command added to a doc without
  either turns ``test_every_documented_command_is_run_by_a_test`` red, naming the file and line.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = REPO / "docs"
COMMAND_LANGS = {"console", "sh", "bash", "shell", "shell-session"}
README_MAX_LINES = 300


def doc_files() -> list[Path]:
    """Every markdown file a user reads: the README, each page under docs/ (whoever added it), the kit READMEs."""
    files = [README, *sorted(DOCS.rglob("*.md"))]
    files += [p for p in (REPO / "sync" / "README.md", REPO / "deploy" / "README-letta.md") if p.is_file()]
    return files


# ----------------------------------------------------------------------------------------------- commands

_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*\{?\s*\.?([\w-]*)[^`]*$")  # ```sh, ~~~ sh, ```{.sh}, ```sh title="x"
_HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?")


def _cut_comment(line: str) -> str:
    """The line without a trailing shell comment (an unquoted ``#`` at the start or after a blank)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def block_commands(lines: list[str]) -> list[tuple[int, str]]:
    """(offset in the block, command) for each command of a shell block: the ``$ `` lines when the block shows
    a session with output, else every line but comments, with ``\\`` continuations joined and here-documents
    (their body is the command's input) skipped."""
    if any(line.lstrip().startswith("$ ") for line in lines):
        return [(i, " ".join(line.lstrip()[2:].split())) for i, line in enumerate(lines)
                if line.lstrip().startswith("$ ")]
    out: list[tuple[int, str]] = []
    i = 0
    while i < len(lines):
        start, text = i, _cut_comment(lines[i].strip())
        while text.endswith("\\") and i + 1 < len(lines):
            i += 1
            text = text[:-1].rstrip() + " " + _cut_comment(lines[i].strip())
        here = _HEREDOC.search(text)
        if here:
            while i + 1 < len(lines) and lines[i + 1].strip() != here.group(1):
                i += 1
            i += 1  # the terminator
        if text:
            out.append((start, " ".join(text.split())))
        i += 1
    return out


def _indented_block_starts(lines: list[str], i: int) -> bool:
    """An indented code block begins at line i: four spaces after a blank line that follows a paragraph of its
    own (not a list item or its continuation, which an indent only continues)."""
    if not lines[i].startswith("    ") or not lines[i].strip() or i == 0 or lines[i - 1].strip():
        return False
    k = i - 1
    while k >= 0 and not lines[k].strip():
        k -= 1
    return k < 0 or not (lines[k][:1].isspace() or re.match(r"(\s*[-*+]|\s*\d+[.)])\s", lines[k]))


def documented_commands() -> dict[str, list[str]]:
    """command -> the places (``file:line``) that show it."""
    found: dict[str, list[str]] = {}
    for path in doc_files():
        lines = path.read_text(encoding="utf-8").splitlines()
        i = 0
        while i < len(lines):
            m = _FENCE.match(lines[i])
            if not m and _indented_block_starts(lines, i):  # markdown's other code block: commands there count too
                j = i
                while j < len(lines) and (lines[j].startswith("    ") or not lines[j].strip()):
                    j += 1
                body = [line[4:] for line in lines[i:j]]
                for offset, cmd in block_commands(body):
                    found.setdefault(cmd, []).append(f"{path.relative_to(REPO)}:{i + 1 + offset}")
                i = j
                continue
            if not m:
                i += 1
                continue
            indent, ticks, lang = m.groups()
            body, j = [], i + 1
            while j < len(lines) and not (lines[j].strip().startswith(ticks) and not lines[j].strip().strip(ticks[0])):
                body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j])
                j += 1
            if lang.lower() in COMMAND_LANGS:
                for offset, cmd in block_commands(body):
                    found.setdefault(cmd, []).append(f"{path.relative_to(REPO)}:{i + 2 + offset}")
            i = j + 1
    return found


# Commands run by another test: command -> the tests ("path::function") that run it, each checked to exist.
COVERED: dict[str, tuple[str, ...]] = {
    # README's first command: the demo and the install it needs (.ci/run installs the same checkout).
    "pip install . && subconscious demo": (
        "tests/unit/test_demo.py::test_demo_shows_conflicts_repaired_and_counts_with_nothing_lost",
        "tests/integration/test_plugin_setup.py::test_marketplace_install_sets_itself_up_in_the_background_then_works",
    ),
    # README's second command: this suite, as .ci/run runs it (test_ci_runs_the_readmes_test_command).
    "pip install -e '.[test]' && python -m pytest": ("tests/unit/test_docs.py::test_ci_runs_the_readmes_test_command",),
    "claude plugin marketplace add <path or git URL of this repo>": (
        "tests/integration/test_claude_harness.py::test_installed_from_the_repo_as_a_marketplace",),
    "claude plugin install subconscious@subconscious": (
        "tests/integration/test_claude_harness.py::test_installed_from_the_repo_as_a_marketplace",),
    "subconscious serve": ("tests/unit/test_served.py::test_serve_answers_on_the_socket_a_service_manager_passes",
                           "tests/unit/test_served.py::test_session_start_starts_the_server_only_in_served_mode_and_only_when_nothing_answers"),
    # docs/seeing.md's examples are the output of these tests' runs against the real Letta server.
    "subconscious sessions": (
        "tests/integration/test_see_letta.py::test_sessions_shows_both_machines_as_the_state_and_the_server_have_them",),
    "subconscious messages --host desktop --limit 1": (
        "tests/integration/test_see_letta.py::test_messages_says_what_the_agent_said_where_and_whether_claude_saw_it",),
    "subconscious memory --label guidance --since 2026-12-01T10:01:39Z": (
        "tests/integration/test_see_letta.py::test_memory_shows_the_servers_blocks_and_what_changed_since",),
    'subconscious ask "SAY Run the db/0042 migration, then pytest -x."': (
        "tests/integration/test_see_letta.py::test_ask_answers_on_its_own_conversation_and_leaves_the_sessions_alone",),
    "subconscious ui": ("tests/integration/test_viewer_launcher.py::test_ui_gives_the_browser_a_private_file_and_no_process_sees_the_token",),
    "subconscious ui --port 8765 --no-browser --print-url": (
        "tests/integration/test_viewer_launcher.py::test_ui_gives_the_browser_a_private_file_and_no_process_sees_the_token",),
    "subconscious key init": ("tests/unit/test_seal_cli.py::test_init_export_import_between_two_machines",),
    "subconscious key export": ("tests/unit/test_seal_cli.py::test_init_export_import_between_two_machines",),
    "subconscious key import": ("tests/unit/test_seal_cli.py::test_init_export_import_between_two_machines",),
    # docs/letta-server.md's block: the script's verbs with a provider file, as the user runs them.
    "mkdir -p ~/.local/share/subconscious/letta-server": (
        "tests/integration/test_letta_deploy.py::test_install_start_status_stop_with_the_users_provider",),
    "cat > ~/.local/share/subconscious/letta-server/server.env <<'EOF'": (
        "tests/integration/test_letta_deploy.py::test_install_start_status_stop_with_the_users_provider",),
    "chmod 600 ~/.local/share/subconscious/letta-server/server.env": (
        "tests/integration/test_letta_deploy.py::test_install_start_status_stop_with_the_users_provider",),
    "deploy/letta-server.sh start": ("tests/integration/test_letta_deploy.py::test_install_start_status_stop_with_the_users_provider",),
    "deploy/letta-server.sh status": ("tests/integration/test_letta_deploy.py::test_install_start_status_stop_with_the_users_provider",),
    'eval "$(deploy/letta-server.sh env)"': (
        "tests/integration/test_letta_deploy.py::test_install_start_status_stop_with_the_users_provider",),
    "export LETTA_MODEL=openai/gpt-4.1-mini": (
        "tests/integration/test_letta_deploy.py::test_install_start_status_stop_with_the_users_provider",),
    # docs/sync-engines.md: bisync with the kit's filters (Debian's 1.60 has neither 1.66 flag; the harness
    # runs the rest of the line), and the git config setup-git writes (run here too, below).
    'rclone bisync "$LETTA_HOME" remote:letta --filters-file sync/rclone-filters.txt --conflict-resolve newer --resilient -v': (
        "tests/multihost/test_rclone_unison.py::test_changes_on_both_sides_end_identical_with_every_session_in_the_view",),
    # docs/performance.md: the side-by-side benchmark's set-up (network: upstream's repository and npm) and
    # run; test_the_benchmarks_documented_flags_exist runs the benchmark's own argument parser on it.
    "git clone https://github.com/letta-ai/claude-subconscious /tmp/upstream": (
        "tests/unit/test_docs.py::test_the_benchmarks_documented_flags_exist",),
    "(cd /tmp/upstream && npm install --no-package-lock)": ("tests/unit/test_docs.py::test_the_benchmarks_documented_flags_exist",),
    "python benchmarks/hooks_bench.py --upstream /tmp/upstream --runs 20": (
        "tests/unit/test_docs.py::test_the_benchmarks_documented_flags_exist",),
    # docs/scale-and-bounds.md: the scale benchmark (minutes; --against needs a second checkout): its parser
    # is run on the documented lines; the linearity it shows is asserted by counting, in test_scale_reads.
    "python benchmarks/bounds_scale_bench.py --against ../main # full: 1,000–8,000, 10,000, 100,000": (
        "tests/unit/test_docs.py::test_the_scale_benchmarks_documented_flags_exist",
        "tests/unit/test_scale_reads.py::test_reading_every_session_looks_at_each_name_a_bounded_number_of_times"),
    "python benchmarks/bounds_scale_bench.py --quick # a minute or two": (
        "tests/unit/test_docs.py::test_the_scale_benchmarks_documented_flags_exist",),
    # docs/sync-rclone.md: bisync with the kit's filters and two real watchers (Debian's rclone 1.60)
    'rclone bisync "$LETTA_HOME" remote:letta --filters-file ~/.config/subconscious/rclone-filters.txt --resync -v': (
        "tests/multihost/test_rclone_watch.py::test_bisync_with_watch_rebuilding_views_on_both_machines_settles",),
    'rclone bisync "$LETTA_HOME" remote:letta --filters-file ~/.config/subconscious/rclone-filters.txt -v': (
        "tests/multihost/test_rclone_watch.py::test_bisync_with_watch_rebuilding_views_on_both_machines_settles",),
    "subconscious watch --rebuild-views": (
        "tests/multihost/test_rclone_watch.py::test_bisync_with_watch_rebuilding_views_on_both_machines_settles",),
    'rclone lsf -R --files-only --filter-from sync/rclone-filters.txt "$LETTA_HOME"': (
        "tests/multihost/test_rclone_watch.py::test_the_kits_filters_keep_the_views_out_and_the_shards_in",),
    # docs/delivery.md: the give-up line in status --json; the schedule tests it names
    "subconscious status --json | jq .gave_up": (
        "tests/unit/test_delivery_findings.py::test_a_run_still_stuck_after_its_re_delivery_is_given_up_with_a_reason_and_a_status_line",),
    "python -m pytest tests/unit/test_delivery_schedules.py -s # 301 schedules in-process": (
        "tests/unit/test_delivery_schedules.py::test_every_line_reaches_the_agents_completed_turns_exactly_once",),
    "python -m pytest tests/integration/test_delivery_kill_schedules.py -s # real workers SIGKILLed": (
        "tests/integration/test_delivery_kill_schedules.py::test_real_workers_killed_anywhere_while_the_transcript_grows_deliver_every_line_once",),
    "python -m pytest tests/integration/test_injection_hook_schedules.py -s # real hooks, shortcut, TTL": (
        "tests/integration/test_injection_hook_schedules.py::test_every_note_is_shown_once_by_real_hooks_through_the_shortcut_the_ttl_and_the_full_path",),
    # --full: the same tests at full size (tests/conftest.py's option; the CI sizes are tests/harness/sizes.py's)
    # docs/views-and-filesystems.md, docs/upstream-compat.md: the simulation's explorer, which these tests
    # drive at the CI budget (--full is the same explorer with the bigger budget)
    "python -m tests.simulation # CI's fixed-seed part": ("tests/simulation/test_simulation.py::test_simulation",),
    "python -m tests.simulation --full # more than 100,000 interleavings": ("tests/simulation/test_simulation.py::test_simulation",),
    "python -m tests.simulation --no-exchange # a file system that cannot swap (NFS)": (
        "tests/simulation/test_no_exchange.py::test_no_exchange_six_hosts_stop_hooks",),
    "python -m tests.simulation --no-publish # neither swap nor hard links (SMB, Windows)": (
        "tests/simulation/test_no_exchange.py::test_no_exchange_two_actors",),
    "python -m tests.simulation --legacy-start": ("tests/simulation/test_simulation.py::test_simulation_from_legacy_homes",),
    "python -m pytest tests/multihost/test_shared_cursor.py -s": (
        "tests/multihost/test_shared_cursor.py::test_six_hosts_on_one_directory_never_move_a_cursor_back",),
    # docs/testing.md: how to run this suite; test_the_documented_test_commands_are_accepted runs each pytest
    # line collect-only (its options, workers and paths accepted), the harness's start verb by its parser
    "pip install -e '.[test]'": ("tests/unit/test_docs.py::test_ci_runs_the_readmes_test_command",),
    "python -m pytest": ("tests/unit/test_docs.py::test_ci_runs_the_readmes_test_command",),
    "python -m tests.simulation --full # the simulation's >= 100,000-interleaving run": (
        "tests/simulation/test_simulation.py::test_simulation",),
    "python -m tests.harness.letta_server start # prints SUBCONSCIOUS_LETTA_STATE=...": (
        "tests/unit/test_docs.py::test_the_documented_test_commands_are_accepted",),
    "python -m pytest tests/unit/test_upstream_adoption.py -q": (
        "tests/unit/test_upstream_adoption.py::test_upstreams_stale_rewrite_does_not_bring_a_legacy_entry_back_after_our_put",),
}

# Commands this file runs as documented (test_the_documented_commands_do_what_the_docs_say), with the
# placeholders the docs use and what they stand for here.
RUN_HERE: dict[str, dict[str, str]] = {
    "subconscious status": {},
    "subconscious doctor": {},
    "subconscious doctor --fix": {},
    "subconscious preview": {},
    "subconscious install --dry-run": {},
    "subconscious install": {},
    "subconscious install --project DIR": {"DIR": "{proj}"},
    "subconscious install --settings FILE": {"FILE": "{settings}"},
    "subconscious uninstall [same options]": {"[same options]": "--settings {settings}"},
    "subconscious install --served": {},
    "subconscious install --served --http": {},
    # docs/encryption.md; the random-key forms and two machines are tests/unit/test_seal_cli.py's
    "subconscious key init --passphrase": {},
    "subconscious key rotate [--passphrase] [--drop-old]": {"[--passphrase] [--drop-old]": "--passphrase --drop-old"},
    'git config merge.subconscious.name "subconscious JSON state merge"': {},
    'git config merge.subconscious.driver "<path of subconscious> merge-driver %O %A %B %P"': {
        "<path of subconscious>": "{exe}"},
}


def _test_exists(ref: str) -> bool:
    path, _, name = ref.partition("::")
    file = REPO / path
    return file.is_file() and re.search(rf"^def {re.escape(name)}\(", file.read_text(encoding="utf-8"), re.M) is not None


def test_every_documented_command_is_run_by_a_test():
    found = documented_commands()
    assert found, "no command blocks found at all: the parser is broken"
    unknown = {cmd: where for cmd, where in found.items() if cmd not in COVERED and cmd not in RUN_HERE}
    assert not unknown, (
        "commands in the docs that no test runs (run them in a test and add them to RUN_HERE or COVERED in "
        "tests/unit/test_docs.py with the test's name):\n"
        + "\n".join(f"  {cmd!r}  ({', '.join(where)})" for cmd, where in sorted(unknown.items())))
    stale = sorted((set(COVERED) | set(RUN_HERE)) - set(found))
    assert not stale, f"listed as documented but in no doc any more (remove them): {stale}"
    missing = sorted({ref for refs in COVERED.values() for ref in refs if not _test_exists(ref)})
    assert not missing, f"COVERED names tests that do not exist: {missing}"


def test_the_command_parser_sees_what_a_reader_sees():
    block = ["# a comment line", "subconscious install --dry-run   # show it", "rclone bisync a b \\",
             "  --filters-file f -v", "cat > f <<'EOF'", "X=1  # not a command", "EOF", "", "echo '#not a comment'"]
    assert [c for _, c in block_commands(block)] == [
        "subconscious install --dry-run", "rclone bisync a b --filters-file f -v", "cat > f <<'EOF'",
        "echo '#not a comment'"]
    page = ["Text.", "", "    subconscious watch --once", "", "- item", "", "    continued item text"]
    assert [_indented_block_starts(page, i) for i in range(len(page))] == [False, False, True, False, False, False, False]
    session = ["$ subconscious sessions", "session  project", "$ subconscious  messages --limit 1", "when"]
    assert [c for _, c in block_commands(session)] == ["subconscious sessions", "subconscious messages --limit 1"]


def test_every_fence_form_is_read(tmp_path, monkeypatch):
    page = tmp_path / "docs" / "forms.md"
    page.parent.mkdir()
    page.write_text("# Forms\n\n```Console\nsubconscious a\n```\n\n~~~sh\nsubconscious b\n~~~\n\n"
                    '```bash title="x"\nsubconscious c\n```\n\n```{.shell}\nsubconscious d\n````\n\n'
                    "```text\nsubconscious not-a-command\n```\n\n- a list\n\n  ```sh\n  subconscious e\n  ```\n")
    (tmp_path / "README.md").write_text("# x\n")
    for name, value in (("DOCS", tmp_path / "docs"), ("REPO", tmp_path), ("README", tmp_path / "README.md")):
        monkeypatch.setattr(sys.modules[__name__], name, value)
    assert sorted(documented_commands()) == [f"subconscious {c}" for c in "abcde"]


def test_a_command_added_to_a_page_without_a_test_is_caught(tmp_path, monkeypatch):
    """The check reads whatever pages docs/ holds (another page, another helper's): a new command is red."""
    page = tmp_path / "docs" / "new-topic.md"
    page.parent.mkdir()
    page.write_text("# New\n\n```console\nsubconscious frobnicate --all   # new\n```\n\nOr:\n\n    subconscious frob\n")
    monkeypatch.setattr(sys.modules[__name__], "DOCS", tmp_path / "docs")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    (tmp_path / "README.md").write_text("# x\n")
    monkeypatch.setattr(sys.modules[__name__], "README", tmp_path / "README.md")
    assert documented_commands() == {"subconscious frobnicate --all": ["docs/new-topic.md:4"],
                                     "subconscious frob": ["docs/new-topic.md:9"]}
    with pytest.raises(AssertionError, match=r"'subconscious frobnicate --all'  \(docs/new-topic.md:4\)"):
        test_every_documented_command_is_run_by_a_test()


def _sandbox(tmp_path: Path) -> dict[str, str]:
    home, state, letta_home, proj = (tmp_path / n for n in ("home", "state", "letta-home", "proj"))
    for d in (home, state, letta_home, proj):
        d.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "CLAUDE_"))}
    env.update(HOME=str(home), SUBCONSCIOUS_STATE_DIR=str(state), LETTA_HOME=str(letta_home),
               SUBCONSCIOUS_HOST="laptop", LETTA_BASE_URL="http://127.0.0.1:9",  # nothing listens: no server
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    return env


def _run(doc_cmd: str, cwd: Path, env: dict[str, str], **fill: str) -> subprocess.CompletedProcess:
    """Run a documented command as written, its placeholders (RUN_HERE) filled in."""
    cmd = doc_cmd
    for placeholder, value in RUN_HERE[doc_cmd].items():
        cmd = cmd.replace(placeholder, value.format(**fill))
    r = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"{cmd}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


def _our_hooks(settings: Path) -> set[str]:
    if not settings.exists():
        return set()
    hooks = json.loads(settings.read_text()).get("hooks", {})
    return {event for event, groups in hooks.items()
            for g in groups for h in g.get("hooks", []) if "subconscious" in json.dumps(h)}


def test_the_documented_commands_do_what_the_docs_say(tmp_path):
    env = _sandbox(tmp_path)
    fill = {"proj": str(tmp_path / "proj"), "settings": str(tmp_path / "settings.json")}
    user_settings = tmp_path / "home" / ".claude" / "settings.json"

    # docs/troubleshooting.md: where to look first. They read; an empty home is reported, not created.
    assert "laptop" in _run("subconscious status", tmp_path, env).stdout
    assert "no problems found" in _run("subconscious doctor", tmp_path, env).stdout
    assert "fixed: nothing to do" in _run("subconscious doctor --fix", tmp_path, env).stdout
    assert "nothing to send" in _run("subconscious preview", tmp_path, env).stdout
    assert not (tmp_path / "letta-home" / ".letta").exists()

    # docs/install.md: the settings-file install, each target; --dry-run writes nothing.
    shown = _run("subconscious install --dry-run", tmp_path, env).stdout
    assert "SessionStart" in shown and not user_settings.exists()
    _run("subconscious install", tmp_path, env)
    assert {"SessionStart", "PreToolUse", "Stop", "SessionEnd"} <= _our_hooks(user_settings)
    _run("subconscious install --project DIR", tmp_path, env, **fill)
    assert "Stop" in _our_hooks(tmp_path / "proj" / ".claude" / "settings.json")
    _run("subconscious install --settings FILE", tmp_path, env, **fill)
    assert "Stop" in _our_hooks(Path(fill["settings"]))
    _run("subconscious uninstall [same options]", tmp_path, env, **fill)
    assert _our_hooks(Path(fill["settings"])) == set()

    # docs/served.md: the two served forms, then back to command hooks.
    _run("subconscious install --served", tmp_path, env)
    served = json.loads(user_settings.read_text())["hooks"]
    assert '"subconscious-served"' in json.dumps(served["PreToolUse"])  # the bash client, not a Python start
    _run("subconscious install --served --http", tmp_path, env)
    assert '"type": "http"' in json.dumps(json.loads(user_settings.read_text())["hooks"]["PreToolUse"])
    _run("subconscious install", tmp_path, env)
    assert '"type": "http"' not in user_settings.read_text() and "subconscious-served" not in user_settings.read_text()


def test_a_passphrase_key_rotates_with_the_old_key_dropped_as_documented(tmp_path):
    """docs/encryption.md: a passphrase key, then a rotation to a new passphrase with the old key dropped (the
    passphrase from SUBCONSCIOUS_PASSPHRASE, as the page says scripts give it)."""
    env = dict(_sandbox(tmp_path), SUBCONSCIOUS_PASSPHRASE="correct horse battery staple")
    made = _run("subconscious key init --passphrase", tmp_path, env).stdout
    first = re.search(r"with key (k[0-9a-f]+) \(generation 1", made).group(1)
    env["SUBCONSCIOUS_PASSPHRASE"] = "a new passphrase after the laptop was lost"
    out = _run("subconscious key rotate [--passphrase] [--drop-old]", tmp_path, env).stdout
    assert "(generation 2)" in out and f"removed old key {first}" in out
    assert first not in "".join(p.name for p in (tmp_path / "state" / "keys").iterdir())


def test_setup_git_sets_the_git_config_the_sync_page_shows(tmp_path):
    """docs/sync-engines.md shows the two ``git config`` lines ``subconscious sync setup-git`` runs in a clone:
    run them as shown (the driver's path filled in), and check setup-git leaves exactly that config."""
    env = _sandbox(tmp_path)
    repo = tmp_path / "letta-home"
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env)
    env_git = dict(env, GIT_DIR=str(repo / ".git"))
    r = subprocess.run(["subconscious", "sync", "setup-git", str(repo)], cwd=repo, env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    get = lambda key: subprocess.run(["git", "config", "--get", key], env=env_git, capture_output=True,  # noqa: E731
                                     text=True).stdout.strip()
    by_setup = get("merge.subconscious.name"), get("merge.subconscious.driver")
    exe = by_setup[1].split(" merge-driver ")[0]
    assert by_setup[1] == f"{exe} merge-driver %O %A %B %P" and Path(exe).name == "subconscious"
    for key in ("merge.subconscious.name", "merge.subconscious.driver"):
        subprocess.run(["git", "config", "--unset", key], env=env_git, check=True)
    _run('git config merge.subconscious.name "subconscious JSON state merge"', repo, env)
    _run('git config merge.subconscious.driver "<path of subconscious> merge-driver %O %A %B %P"', repo, env, exe=exe)
    assert (get("merge.subconscious.name"), get("merge.subconscious.driver")) == by_setup


def test_the_benchmarks_documented_flags_exist():
    """docs/performance.md's side-by-side run needs upstream's checkout and npm (the network): its set-up is
    not run here; the benchmark's own parser is, on the documented line, so a renamed flag is red."""
    doc = "python benchmarks/hooks_bench.py --upstream /tmp/upstream --runs 20"
    assert doc in documented_commands()
    r = subprocess.run([sys.executable, "benchmarks/hooks_bench.py", "--help"], cwd=REPO, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    for flag in re.findall(r"(--[\w-]+)", doc):
        assert flag in r.stdout, f"{flag} is documented but hooks_bench.py --help does not know it"
    assert "--upstream PATH" in r.stdout


def test_the_scale_benchmarks_documented_flags_exist():
    """docs/scale-and-bounds.md's benchmark runs for minutes: its own parser is run here on the documented
    lines, so a renamed flag is red."""
    docs = [c for c in documented_commands() if c.startswith("python benchmarks/bounds_scale_bench.py")]
    assert len(docs) == 2, docs
    r = subprocess.run([sys.executable, "benchmarks/bounds_scale_bench.py", "--help"], cwd=REPO, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    for doc in docs:
        for flag in re.findall(r"(--[\w-]+)", doc.split("#", 1)[0]):
            assert flag in r.stdout, f"{flag} is documented but bounds_scale_bench.py --help does not know it"


def _pytest_lines() -> list[str]:
    return [c for c in documented_commands() if re.match(r"^(\w+=\S+ )*python -m pytest .", c)]


for _line in _pytest_lines():  # each is covered by the test below (names resolved when the module loads)
    COVERED.setdefault(_line, ("tests/unit/test_docs.py::test_the_documented_test_commands_are_accepted",))


def test_the_documented_test_commands_are_accepted():
    """docs/testing.md's ways to run this suite: each pytest line, run collect-only (its options, its worker
    count and its paths must be accepted: a renamed option or a moved file is red); the Letta harness's verb
    by its own parser. Running them in full is what the suite itself is."""
    lines = _pytest_lines()
    assert len(lines) >= 6, lines
    runs = []
    for line in lines:
        words = shlex.split(line.split(" #", 1)[0])
        env = dict(os.environ)
        while "=" in words[0]:
            k, v = words.pop(0).split("=", 1)
            env[k] = v
        args = [w for w in words[3:] if w != "--pdb"]
        if not any(a.startswith("tests") for a in args):
            args.append("tests/unit/test_docs.py")
        runs.append((line, subprocess.Popen([sys.executable, "-m", "pytest", *args, "--co", "-q", "-p", "no:cacheprovider"],
                                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
    for line, p in runs:
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0, (line, out[-2000:])  # 0: options accepted and tests collected (5: none, 4: usage)
    doc = next(c for c in documented_commands() if c.startswith("python -m tests.harness.letta_server start"))
    r = subprocess.run([sys.executable, "-m", "tests.harness.letta_server", "--help"], cwd=REPO, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and doc.split()[3] in r.stdout, r.stdout


def test_ci_runs_the_readmes_test_command():
    """README's second command is what .ci/run runs on a clean clone (with pip as a module)."""
    ci = (REPO / ".ci" / "run").read_text()
    first = README.read_text().split("```sh\n", 1)[1].split("```", 1)[0].splitlines()
    assert first[1].startswith("pip install -e '.[test]' && python -m pytest ")
    assert "python3 -m pip install -q -e '.[test]'" in ci and re.search(r"^python3 -m pytest\b", ci, re.M)
    import tomllib

    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    assert any(re.match(r"mkdocs\b", dep) for dep in extra)  # the README's test command installs what builds the docs


# ----------------------------------------------------------------------------------------------- the README

def test_readme_is_a_ten_minute_read_that_starts_with_the_two_commands():
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; at most {README_MAX_LINES}: move detail to docs/"
    assert lines[0] == "# subconscious"
    assert lines[2:6] == [
        "```sh",
        "pip install . && subconscious demo                   # install, then watch several machines share one state dir safely",
        "pip install -e '.[test]' && python -m pytest         # run the tests (installs the real parts they need on first use)",
        "```",
    ]
    for heading in ("## Install as a Claude Code plugin", "## Configuration", "## The guarantees", "## Where to read more"):
        assert heading in lines, heading


def _slug(heading: str) -> str:
    from markdown.extensions.toc import slugify  # mkdocs's own (the [test] extra has it)

    return slugify(re.sub(r"[`*]", "", heading), "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.M | re.S)
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+?)\s*$", text, re.M)}


def test_readmes_links_lead_to_pages_and_headings_that_exist():
    """mkdocs checks the links between pages; the README is outside the site, so its links are checked here."""
    for path in [README, *(p for p in (REPO / "sync" / "README.md", REPO / "deploy" / "README-letta.md"))]:
        text = path.read_text(encoding="utf-8")
        targets = re.findall(r"\]\(<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\)", text)  # [x](a.md), [x](<a.md> "title")
        targets += re.findall(r"^\s*\[[^\]]+\]:\s*<?([^\s>]+)", text, re.M)  # [x]: a.md
        for target in targets:
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            dest = (path.parent / file).resolve() if file else path
            assert dest.exists(), f"{path.name}: link to {target}: no such file"
            if anchor:
                assert anchor in _anchors(dest), f"{path.name}: link to {target}: no such heading"


def test_every_docs_page_the_code_names_exists():
    """Messages and docstrings that send a reader to docs/<page>.md(#anchor) point at a page that is there."""
    named = set()
    for root in ("subconscious", "hooks", "sync", "deploy", "benchmarks", "tests/harness", ".ci"):
        for p in (REPO / root).rglob("*"):
            if p.is_file() and p.suffix in {".py", ".txt", ".bash", ".json", ".service", ".plist", ""}:
                named |= set(re.findall(r"docs/([\w-]+\.md)(?:#([\w-]+))?", p.read_text(errors="replace")))
    assert ("sync-engines.md", "") in named  # git setup's refusal names it
    for page, anchor in named:
        assert (DOCS / page).is_file(), f"docs/{page} is named by the code but does not exist"
        if anchor:
            assert anchor in _anchors(DOCS / page), f"docs/{page}#{anchor}"


# ----------------------------------------------------------------------------------------------- the site

def _build(config_dir: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(config_dir / "mkdocs.yml"), "--site-dir", str(site)],
                          cwd=config_dir, capture_output=True, text=True, timeout=120)


def test_the_docs_build_strict_and_every_page_is_in_the_site(tmp_path):
    r = _build(REPO, tmp_path / "site")
    assert r.returncode == 0, r.stderr
    assert "WARNING" not in r.stderr, r.stderr
    for page in DOCS.rglob("*.md"):
        rel = page.relative_to(DOCS).with_suffix("")
        built = tmp_path / "site" / ("index.html" if rel.name == "index" else rel / "index.html")
        assert built.is_file(), f"{page.relative_to(REPO)} was not built"
    assert (tmp_path / "site" / "viewer.png").is_file()


def _copy_site_sources(dest: Path) -> Path:
    shutil.copytree(DOCS, dest / "docs")
    shutil.copytree(REPO / "tools", dest / "tools")
    shutil.copy(REPO / "mkdocs.yml", dest / "mkdocs.yml")
    return dest


def test_a_broken_link_anchor_or_nav_entry_fails_the_build_and_an_unlisted_page_is_built(tmp_path):
    """Pages other work adds (docs/<topic>.md) are in the site, under "More", before anyone edits the nav, and
    their links are checked like every other page's; a broken link or anchor, or a nav entry naming a page
    that is not there, fails the strict build, each named in its output."""
    src = _copy_site_sources(tmp_path / "src")
    (src / "docs" / "zz-new-topic.md").write_text("# A new topic\n\nBack to [the tests](tests.md#tests).\n")
    r = _build(src, tmp_path / "site")
    assert r.returncode == 0, r.stderr
    page = tmp_path / "site" / "zz-new-topic" / "index.html"
    assert page.is_file() and "A new topic" in page.read_text()
    assert "More" in (tmp_path / "site" / "index.html").read_text()

    (src / "docs" / "zz-new-topic.md").write_text("# A new topic\n\nSee [the missing page](missing-page.md).\n")
    with open(src / "docs" / "install.md", "a") as f:
        f.write("\nSee [a heading](configuration.md#no-such-heading).\n")
    cfg = src / "mkdocs.yml"
    cfg.write_text(cfg.read_text().replace("  - Measurements: performance.md\n", "  - Measurements: performance.md\n  - Gone: gone.md\n"))
    r = _build(src, tmp_path / "site2")
    assert r.returncode != 0
    for said in ("'missing-page.md'", "#no-such-heading", "'gone.md'"):
        assert re.search(rf"^WARNING .*{re.escape(said)}", r.stderr, re.M), r.stderr  # a warning, which --strict fails
