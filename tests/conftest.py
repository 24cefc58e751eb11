"""Test-wide setup: the real-part harnesses' fixtures (Letta server, Claude Code CLI, sync engines), the
``--full`` switch (tests/harness/sizes.py) and how pytest-xdist's workers share the tests out.

Each harness installs what it needs on first use (cached outside the clone under
~/.cache/subconscious-tests, or SUBCONSCIOUS_TEST_CACHE) and starts only 127.0.0.1 services.

Parallel by default: a run that names a directory, or nothing (the README's command: testpaths), goes to
pytest-xdist workers, ``--dist loadgroup``, as many as :func:`default_workers` says (3 on 2 cores; the env
var SUBCONSCIOUS_TEST_WORKERS=N chooses); a run of files or test ids only (``pytest tests/unit/x.py::t``),
``-s``, ``--pdb``, ``--co`` and an explicit ``-n`` (``-n 0``: serial) or ``-p no:xdist`` are left as given
(pytest_cmdline_main below). Session fixtures are per worker: each worker that gets a real-Letta test starts its own server (one per worker, and
the tests are shared out one by one; SUBCONSCIOUS_TEST_LETTA_SERVERS=N, fewer than the workers, deals the
real-Letta modules to N groups instead, a server each), and a module with a module-scoped fixture of its own
runs on one worker, so the fixture is made once. Everything else is shared out test by test (pytest_xdist_make_scheduler below).
"""

import os
import re

from hypothesis import settings

# Property tests: in CI (``CI`` set) derandomized, so a red run replays exactly; elsewhere random, and a
# failure prints the blob that replays it (``@reproduce_failure``) along with the falsifying example.
settings.register_profile("ci", derandomize=True, print_blob=True, database=None)
settings.register_profile("dev", print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

from tests.harness import sizes

pytest_plugins = [
    "tests.harness.letta_fixtures",
    "tests.harness.claude_fixtures",
    "tests.harness.sync_fixtures",
]


import logging

import pytest


@pytest.fixture(autouse=True)
def _subconscious_logger_restored():
    """Tests that run a hook or the worker in-process set up the "subconscious" logger (its own handlers,
    no propagation); put it back after each test, so a later test's caplog sees the records again."""
    logger = logging.getLogger("subconscious")
    saved = (list(logger.handlers), logger.propagate, logger.level, logger.disabled)
    yield
    for handler in logger.handlers[:]:
        if handler not in saved[0]:
            logger.removeHandler(handler)
            try:
                handler.close()
            except Exception:  # noqa: BLE001 - a handler that cannot close is not this test's failure
                pass
    logger.handlers[:] = saved[0]
    logger.propagate, logger.level, logger.disabled = saved[1], saved[2], saved[3]



def pytest_addoption(parser):
    parser.addoption("--full", action="store_true", default=False,
                     help=f"run stress tests and searches at their full size (same as {sizes.ENV}=1)")


def pytest_configure(config):
    if config.getoption("--full"):
        os.environ[sizes.ENV] = "1"  # before collection, and inherited by workers and writer processes


WORKERS_ENV = "SUBCONSCIOUS_TEST_WORKERS"


def default_workers(args: list[str], rootdir: str, cpus: int | None) -> int:
    """How many xdist workers a run gets when ``-n`` is not given: ``$SUBCONSCIOUS_TEST_WORKERS`` if set; 0
    (in this process) when every path named is a file or a test id, where starting workers and a Letta server
    each costs more than it saves; else one more than the cores (most tests wait on processes and servers,
    not on the CPU: 3 on CI's 2 cores), at most 8."""
    env = os.environ.get(WORKERS_ENV, "").strip()
    if env:
        return int(env)
    named = [a.split("::", 1)[0] for a in args]
    if named and not any(os.path.isdir(os.path.join(rootdir, a)) for a in named):
        return 0
    return min(max(2, (cpus or 1) + 1), 8)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """Before xdist's own (same priority, registered later: called first): the worker count the run gets
    when none was asked for. Not in a worker (it would start workers of its own), not without xdist."""
    if not hasattr(config.option, "numprocesses") or hasattr(config, "workerinput") \
            or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    opt = config.option
    if not (opt.numprocesses is not None or getattr(opt, "tx", None) or opt.collectonly or opt.usepdb
            or getattr(opt, "trace", False) or opt.capture == "no" or getattr(opt, "looponfail", False)):
        workers = default_workers(list(config.args), str(config.rootpath), os.cpu_count())
        if workers > 0:
            opt.numprocesses = workers
    if opt.numprocesses and opt.dist == "no" and not getattr(opt, "distload", False):
        opt.dist = "loadgroup"  # also for an explicit -n N: the grouping _group makes (xdist alone: "load")


LETTA_FIXTURES = ("letta_server", "letta_agent", "letta_env", "fake_llm", "agents_to_delete")
_GROUPS: dict[str, str | None] = {}


def _group(path: str, root: str, servers: int | None = None) -> str | None:
    """The work unit a test module's tests go to as one: with ``servers`` (fewer Letta servers than workers:
    SUBCONSCIOUS_TEST_LETTA_SERVERS), "letta-<i>" for a module that names a real-Letta fixture, the modules
    dealt round-robin to that many groups, a server per group; the module itself if it has a module-scoped
    fixture of its own; the name a module's ``XDIST_GROUP = "<name>"`` gives, for modules whose tests must
    not run beside each other (one opens 120,000 listening sockets, which the served client's walk of
    /proc/net/tcp then gives up on); else None (shared out test by test: by default each worker has a Letta server of its
    own, so a real-Letta test can run on any). Read from the source, as the scheduler sees only test ids; a
    wrong guess costs time (another server, a module on one worker), never a result."""
    if path not in _GROUPS:
        try:
            text = open(os.path.join(root, path), encoding="utf-8").read()
        except OSError:
            text = ""
        shared = re.search(r"^XDIST_GROUP = [\"']([\w-]+)[\"']", text, re.M)
        if shared:  # tests that share a machine-wide resource with each other (see the module's XDIST_GROUP)
            _GROUPS[path] = shared.group(1)
        elif any(re.search(rf"\b{name}\b", text) for name in LETTA_FIXTURES) and servers:
            _GROUPS[path] = f"letta-{sum(1 for g in _GROUPS.values() if g and g.startswith('letta-')) % servers}"
        elif re.search(r"scope=[\"'](module|class|package)[\"']", text):
            _GROUPS[path] = path
        else:
            _GROUPS[path] = None
    return _GROUPS[path]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """--dist loadgroup, grouped as _group says (xdist's own xdist_group marks cannot group under pytest 9:
    it renames test ids through an attribute pytest no longer has)."""
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    root = str(config.rootpath)
    # a Letta server per worker by default, the real-Letta tests shared out one by one: two round-robin groups
    # of modules (the old default) made one worker run 1,066 s of a 1,250 s run
    servers = int(os.environ.get("SUBCONSCIOUS_TEST_LETTA_SERVERS", "") or 0)
    if os.environ.get("SUBCONSCIOUS_LETTA_STATE"):
        servers = 1  # every worker reuses that one server: its scripted model can serve one test at a time
    workers = config.getoption("numprocesses")
    servers = servers if isinstance(workers, int) and 0 < servers < workers else None

    class Grouped(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _group(nodeid.split("::", 1)[0], root, servers) or nodeid

    return Grouped(config, log)


def _sendable(value):
    """``value`` with every string UTF-8-encodable: undecodable bytes a test's output holds (hostile file
    names, surrogate-escaped) shown as ``\\udcXX`` escapes instead of crashing the xdist worker sending it."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_sendable(k): _sendable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_sendable(v) for v in value)
    return value


@pytest.hookimpl(wrapper=True)
def pytest_report_to_serializable(config, report):
    data = yield
    return _sendable(data) if data is not None else data
