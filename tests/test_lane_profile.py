"""benchmarks/profile_docker_lane.py gives each engine action of the Docker lane to the test that
caused it: through the run label of the container, matched to the test's tmp_path."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "profile_docker_lane.py"


def load_profiler():
    spec = importlib.util.spec_from_file_location("profile_docker_lane", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def event(action: str, **labels: str) -> dict:
    return {"Type": "container", "Action": action, "Actor": {"ID": "c1", "Attributes": {"image": "img", **labels}}}


def test_each_engine_action_goes_to_the_test_whose_tmp_path_holds_the_run():
    profiler = load_profiler()
    tests = [{"test": "t.py::a", "tmp_path": "/tmp/p/gw0/test_a0"},
             {"test": "t.py::a10", "tmp_path": "/tmp/p/gw0/test_a10"},  # a prefix of test_a0's path is not it
             {"test": "t.py::plain", "tmp_path": None}]
    run_a, run_a10 = {"org.tbscale.run": "/tmp/p/gw0/test_a0/run"}, {"org.tbscale.run": "/tmp/p/gw0/test_a10/x/run"}
    events = [event("create", **run_a), event("start", **run_a), event("exec_create: sh -c true", **run_a),
              event("exec_create: sh -c true", **run_a), event("restart", **run_a),
              event("create", **run_a10), event("commit", **run_a10),
              event("create", **{"org.tbscale.run": "/elsewhere/run"}),
              event("create"), event("exec_create: ls"),
              {"Type": "image", "Action": "tag", "Actor": {"Attributes": {"org.tbscale.run": "/tmp/p/gw0/test_a0"}}}]
    per = profiler.attribute(events, tests)
    assert dict(per["t.py::a"]) == {"create": 1, "exec_create": 2, "restart": 1}  # `start` is not counted
    assert dict(per["t.py::a10"]) == {"create": 1, "commit": 1}
    assert dict(per["(a run outside every test's tmp_path) /elsewhere/run"]) == {"create": 1}
    assert dict(per["(no run label) img"]) == {"create": 1, "exec_create": 1}
    assert set(per) == {"t.py::a", "t.py::a10", "(a run outside every test's tmp_path) /elsewhere/run",
                        "(no run label) img"}


def test_the_lane_is_the_makefiles_unless_arguments_follow_a_double_dash(monkeypatch):
    profiler = load_profiler()
    monkeypatch.setenv("TEST_WORKERS", "3")
    assert profiler.lane_args([]) == ["-m", "docker and not serial", "-n", "3", "--dist", "loadgroup",
                                      "--no-loadscope-reorder"]
    assert profiler.lane_args(["--", "-m", "docker", "tests/test_forks.py"]) == ["-m", "docker", "tests/test_forks.py"]
    makefile = (SCRIPT.parent.parent / "Makefile").read_text()
    assert '-m "docker and not serial" -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder' in makefile
