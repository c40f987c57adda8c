"""Shared fixtures and how the suite is laid out.

- `loopback_model`: a running tbscale.testing.LoopbackModel (an OpenAI-compatible server on
  127.0.0.1); set `.responder`, `.latency` or call `.fail_next(...)` on it, and build a model config
  with `.model_config()`. Closed after the test.
- `docker_available`: skips the test (with the reason) when no Docker engine answers; under CI
  (env CI set) that is a failure instead. A test marked `@pytest.mark.docker` gets it, and a test
  that asks for it is marked: `-m "not docker"` (make test-fast) is exactly the suite that runs
  without an engine.
- Under pytest-xdist (make test runs `--dist loadgroup`), the tests of a module that share a
  module-scoped fixture (a Ray cluster, a built SWE-bench image) run on one worker, so the fixture
  is made once.
- litellm takes about 6 CPU-seconds to import, in every process that reaches a model: the tests
  that do (marked `litellm`; a test that asks for `loopback_model` is marked) run on one worker,
  so one worker pays the import, not each of them. A test that calls tbscale's litellm import
  without the mark fails (at teardown) saying so. Docker tests are left out: they run 4 at a time.
- A test measured to take more than a tenth of pytest-timeout's limit (600 s) gets ten times its
  measured seconds instead, so a loaded machine does not fail it for being slow.
- Longest first: the suite is ordered by what each test (or group) took when last measured
  (tests/durations.json, which lists those that took a second or more; a test not in it counts
  half a second, 30 s if marked `slow`), so that no long test starts last while the
  other workers stand idle (one 85 s test that waits on a timeout, handed out last, kept three of
  four workers idle for 85 s at the end of a Docker lane). `pytest --update-durations ...` measures
  the tests it runs again and merges them into the file.
"""

from __future__ import annotations

import json
import os
import signal
from collections import defaultdict
from pathlib import Path

import pytest

# litellm otherwise downloads its price map at import time; tests never leave the machine.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
# A proxy configured in the environment must not capture loopback traffic.
_no_proxy = {p for p in os.environ.get("NO_PROXY", os.environ.get("no_proxy", "")).split(",") if p}
os.environ["NO_PROXY"] = os.environ["no_proxy"] = ",".join(sorted(_no_proxy | {"127.0.0.1", "localhost"}))

from _docker import docker_problem  # noqa: E402
from tbscale_testing import LoopbackModel  # noqa: E402
from tbscale_testing.browser import Browser, chromium_path  # noqa: E402


@pytest.fixture
def loopback_model():
    with LoopbackModel(max_lifetime_sec=600) as srv:
        yield srv
    if srv.errors:  # a responder that raised is a broken test, even if the test did not notice
        raise srv.errors[0]


@pytest.fixture(scope="session")
def docker_available() -> None:
    problem = docker_problem()
    if problem and os.environ.get("CI"):  # CI brings an engine up (make test), so none is a failure
        pytest.fail(f"needs a Docker engine: {problem}")
    if problem:
        pytest.skip(f"needs a Docker engine: {problem} (run scripts/ensure_docker.sh)")


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium per test process for every page a test loads (starting one per page
    cost a CPU-second each; tbscale_testing/browser.py)."""
    if chromium_path() is None:
        pytest.skip("headless Chromium is not installed (scripts/ensure_test_tools.sh installs it)")
    with Browser() as shared:
        yield shared


DURATIONS = Path(__file__).with_name("durations.json")
UNMEASURED_SEC = 0.5  # a test not in DURATIONS: new, or shorter than LISTED_SEC when measured
UNMEASURED_SLOW_SEC = 30.0
LISTED_SEC = 1.0


def pytest_addoption(parser):
    parser.addoption("--update-durations", action="store_true",
                     help=f"measure the tests run and merge their seconds into {DURATIONS.name} (the suite's order)")


def base_id(nodeid: str) -> str:
    """A test's id without the `@group` suffix pytest-xdist adds under --dist loadgroup."""
    head, sep, tail = nodeid.rpartition("@")
    return head if sep and "::" in head and "::" not in tail and "]" not in tail else nodeid


class DurationRecorder:
    """Seconds per test (setup, call and teardown), from every report; under xdist the controller
    sees them all. Merged into DURATIONS at the end of the session."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report) -> None:
        self.seconds[base_id(report.nodeid)] += report.duration

    def pytest_sessionfinish(self, session) -> None:
        if not self.seconds:
            return
        known = measured_durations()
        for nodeid, seconds in self.seconds.items():
            if seconds >= LISTED_SEC:
                known[nodeid] = round(seconds, 1)
            else:
                known.pop(nodeid, None)
        DURATIONS.write_text(json.dumps(dict(sorted(known.items())), indent=0) + "\n")


def measured_durations() -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(DURATIONS.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def pytest_configure(config):
    if config.getoption("update_durations") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(DurationRecorder(), "tbscale-duration-recorder")
    # A shell starts a background job without job control (`(make test &)`, some CI runners) with
    # SIGINT ignored, and every process it starts inherits that: a `tbscale run` the Ctrl-C tests
    # interrupt would never hear their SIGINT, and finish. Tests send it on purpose, so they get it
    # back (a handler, unlike an ignored signal, resets to the default in the programs they start).
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # Known without pytest-xdist too (a plain `pytest` run ignores it).
    config.addinivalue_line("markers", "xdist_group(name): run on one xdist worker with the rest of its group")
    config.pluginmanager.register(LitellmWatch(), "tbscale-litellm-watch")
    if getattr(config.option, "dist", None) == "loadgroup" and not _ids_take_a_group_suffix():
        raise pytest.UsageError(f"--dist loadgroup: pytest {pytest.__version__} ignores the group pytest-xdist gives a "
                                "test, so each worker would make a group's module fixtures again; install the "
                                "versions pyproject.toml names")


def _ids_take_a_group_suffix() -> bool:
    """Whether a test's id is the `_nodeid` that `--dist loadgroup` appends the group's name to (in
    the workers): pytest 9.2 derives the id from another field, and xdist 3.8 then spreads a group
    over the workers. The suite would still pass, only far slower (a Ray cluster per test)."""
    class Probe(pytest.Item):
        def runtest(self) -> None:
            pass

    probe = object.__new__(Probe)  # not collected: only its id is read
    probe._nodeid = "t.py::probe@group"
    try:
        return probe.nodeid == "t.py::probe@group"
    except Exception:  # noqa: BLE001 - an id made some other way
        return False


def _shares_a_module_fixture(item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    for name in item.fixturenames:
        defs = info.name2fixturedefs.get(name) if info is not None else None
        if defs and defs[-1].scope in ("module", "package", "class"):
            return True
    return False


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects and before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    for item in items:
        if "docker_available" in item.fixturenames and not item.get_closest_marker("docker"):
            item.add_marker(pytest.mark.docker)
        if item.get_closest_marker("docker") and "docker_available" not in item.fixturenames:
            item.fixturenames.insert(0, "docker_available")
        if "loopback_model" in item.fixturenames and not item.get_closest_marker("litellm"):
            item.add_marker(pytest.mark.litellm)
        if (item.get_closest_marker("litellm") and not item.get_closest_marker("docker")  # marked just above
                and not item.get_closest_marker("xdist_group")):
            item.add_marker(pytest.mark.xdist_group("litellm"))
        if _shares_a_module_fixture(item) and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    known = measured_durations()
    _time_limits_from_durations(config, items, known)
    items[:] = longest_first(items, known)


def _time_limits_from_durations(config, items, known: dict[str, float]) -> None:
    """pytest-timeout's limit (pyproject's `timeout`, for a hang) is raised for a test that was
    measured to take more than a tenth of it, to ten times its measured seconds (setup included:
    a module fixture's Ray cluster counts toward its first test). With both cores kept busy by
    another process, a Ray test whose measure is 143 s hit 600 s: its cluster took 6 min to start."""
    try:
        default = float(config.getini("timeout") or 0)
    except (ValueError, TypeError):  # pytest-timeout is not installed
        return
    for item in items:
        seconds = known.get(base_id(item.nodeid))
        if default and seconds and 10 * seconds > default and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(round(10 * seconds)))


class LitellmWatch:
    """Which tests reach litellm through tbscale (`tbscale.models.llm`'s `litellm_module` and
    `litellm_async`, the ways tbscale gets the module; a call that finds it imported counts too,
    so the answer does not depend on which test a worker ran first). One of them without the
    `litellm` mark fails at teardown: unmarked, it may run on the other worker and import litellm
    there again."""

    def __init__(self) -> None:
        from tbscale.models import llm

        self.current: pytest.Item | None = None
        self.callers: set[str] = set()
        real_module, real_async = llm.litellm_module, llm.litellm_async

        def note() -> None:
            if self.current is not None:
                self.callers.add(self.current.nodeid)

        def litellm_module():
            note()
            return real_module()

        async def litellm_async():
            note()
            return await real_async()

        llm.litellm_module, llm.litellm_async = litellm_module, litellm_async

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        self.current = item
        try:
            return (yield)
        finally:
            self.current = None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = yield
        if (call.when == "teardown" and item.nodeid in self.callers and report.passed
                and not item.get_closest_marker("litellm") and not item.get_closest_marker("docker")):
            report.outcome = "failed"
            report.longrepr = (f"{item.nodeid} reaches litellm (tbscale.models.llm) but is not marked `litellm`: "
                               "add @pytest.mark.litellm (tests/conftest.py says why)")
        return report


def longest_first(items: list, known: dict[str, float]) -> list:
    """`items` in the order to hand them out: each unit (the tests of an xdist group, kept together
    in their order, or a test of its own) by its measured seconds (`known`), longest first."""
    units: dict[str, list] = {}
    for item in items:
        group = item.get_closest_marker("xdist_group")
        key = f"group {group.args[0] if group.args else group.kwargs.get('name')}" if group else item.nodeid
        units.setdefault(key, []).append(item)

    def seconds(item) -> float:
        default = UNMEASURED_SLOW_SEC if item.get_closest_marker("slow") else UNMEASURED_SEC
        return known.get(base_id(item.nodeid), default)

    cost = {key: sum(seconds(i) for i in members) for key, members in units.items()}
    return [item for key in sorted(units, key=lambda k: -cost[k]) for item in units[key]]

