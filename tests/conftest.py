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
  is made once; modules holding `slow` tests are handed out first, so no long test starts last.
"""

from __future__ import annotations

import os
import signal

import pytest

# litellm otherwise downloads its price map at import time; tests never leave the machine.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
# A proxy configured in the environment must not capture loopback traffic.
_no_proxy = {p for p in os.environ.get("NO_PROXY", os.environ.get("no_proxy", "")).split(",") if p}
os.environ["NO_PROXY"] = os.environ["no_proxy"] = ",".join(sorted(_no_proxy | {"127.0.0.1", "localhost"}))

from _docker import docker_problem  # noqa: E402
from tbscale_testing import LoopbackModel  # noqa: E402


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


def pytest_configure(config):
    # A shell starts a background job without job control (`(make test &)`, some CI runners) with
    # SIGINT ignored, and every process it starts inherits that: a `tbscale run` the Ctrl-C tests
    # interrupt would never hear their SIGINT, and finish. Tests send it on purpose, so they get it
    # back (a handler, unlike an ignored signal, resets to the default in the programs they start).
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # Known without pytest-xdist too (a plain `pytest` run ignores it).
    config.addinivalue_line("markers", "xdist_group(name): run on one xdist worker with the rest of its group")
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
        if _shares_a_module_fixture(item) and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    # Modules with slow tests first, each module kept whole (its module fixtures are made once).
    slow_modules = {item.nodeid.split("::")[0] for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in slow_modules)
