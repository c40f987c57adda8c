"""What the verification of one attempt asks of the engine, and that asking less changed no verdict:
the reward files are read in the exec that digests the tests after their run and an empty
artifacts folder in a container where nothing else runs is not copied out (nothing is copied out
of a passing trivial trial), while a reward file that is a link is still no reward, one too big
for that exec is still read, and an artifacts folder the agent filled, or that a process left
running could still fill, is still copied out."""

from __future__ import annotations

import asyncio
import collections
import json
import threading
from pathlib import Path

import pytest

from tbscale.config import Experiment
from tbscale.environments.base import ExecResult
from tbscale.runner import Runner
from tbscale.tasks import load_task
from tbscale.verifiers import script
from tbscale_testing.tasks import write_harbor_task

REWARD = "/logs/verifier/reward.txt"


class EngineCalls:
    """Counts the docker SDK's requests by (method, last path part), e.g. ("GET", "archive")."""

    def __init__(self):
        self.counts: collections.Counter = collections.Counter()
        self._lock = threading.Lock()

    def __enter__(self):
        from docker.api.client import APIClient

        self._orig = orig = APIClient.request

        def request(session, method, url, *a, **k):
            with self._lock:
                self.counts[(method.upper(), url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1])] += 1
            return orig(session, method, url, *a, **k)

        APIClient.request = request
        return self

    def __exit__(self, *exc):
        from docker.api.client import APIClient

        APIClient.request = self._orig


def run(tmp_path: Path, name: str, *, test_sh: str, solve: str, environment: dict | None = None,
        trials: int = 1) -> tuple[list[dict], Path, EngineCalls]:
    write_harbor_task(tmp_path / "tasks", name, test_sh=test_sh, solve=solve)
    task = load_task(tmp_path / "tasks" / name)
    exp = Experiment.model_validate({"name": "rt", "tasks": {"path": str(tmp_path / "tasks")}, "trials": trials,
                                     "concurrency": 2, "settings": [{"name": "oracle", "agent": "oracle"}],
                                     **({"environment": environment} if environment else {})})
    run_dir = tmp_path / f"run-{name}"
    with EngineCalls() as calls:
        asyncio.run(Runner(exp, [task], run_dir).run())
    rows = [json.loads(x) for x in (run_dir / "trials.jsonl").read_text().splitlines()]
    return rows, run_dir, calls


@pytest.mark.docker
def test_a_passing_trial_copies_nothing_out_and_still_restarts_before_the_verifier(tmp_path):
    rows, run_dir, calls = run(tmp_path, "plain", test_sh=f"#!/bin/bash\ngrep -qx done /app/out.txt && echo 1 > {REWARD}"
                               f" || echo 0 > {REWARD}\n", solve="#!/bin/bash\necho done > /app/out.txt\n", trials=2)
    assert [(r["passed"], r["reward"], r["ending"]) for r in rows] == [(True, 1.0, "pass")] * 2
    assert calls.counts[("GET", "archive")] == 0, calls.counts
    assert calls.counts[("POST", "restart")] == 2, calls.counts  # the process sweep is a restart, as before
    # Eight execs a trial: the guard's baseline (which makes the log folders too), the oracle's
    # clearing of /solution and its run, the process listing, the guard's check, the tests'
    # preparation, the tests, and their digest with the reward read.
    assert calls.counts[("POST", "exec")] == 2 * 8, calls.counts
    # as when the empty folder was copied out: the trial's artifacts folder stays, empty
    for r in rows:
        assert r["artifacts_path"] is None
    assert sorted(p.name for p in (run_dir / "artifacts").iterdir()) == sorted(r["trial_key"] for r in rows)
    assert not any(p.is_file() for p in (run_dir / "artifacts").rglob("*"))


@pytest.mark.docker
def test_reward_files_read_in_an_exec_are_read_as_a_copy_reads_them(tmp_path):
    link = run(tmp_path, "link", test_sh="#!/bin/bash\necho 1 > /tmp/r; ln -s /tmp/r /logs/verifier/reward.txt\n",
               solve="#!/bin/bash\ntrue\n")[0][0]
    assert (link["reward"], link["stop_reason"]) == (None, "reward_missing"), link
    big = run(tmp_path, "big", test_sh="#!/bin/bash\n{ printf '{\"reward\": 1'; head -c 100000 /dev/zero | tr '\\0' ' ';"
                                       " echo '}'; } > /logs/verifier/reward.json\n",
              solve="#!/bin/bash\ntrue\n")[0][0]
    assert (big["reward"], big["passed"]) == (1.0, True), big
    both = run(tmp_path, "both", test_sh="#!/bin/bash\necho '{\"reward\": 0.25, \"style\": 1}' > /logs/verifier/reward.json;"
                                         " echo 1 > /logs/verifier/reward.txt\n",
               solve="#!/bin/bash\ntrue\n")[0][0]
    assert both["reward"] == 0.25 and both["rewards"] == {"reward": 0.25, "style": 1.0}, both


@pytest.mark.docker
def test_an_artifacts_folder_with_files_is_collected(tmp_path):
    test_sh = f"#!/bin/bash\necho 1 > {REWARD}\n"
    rows, run_dir, _ = run(tmp_path, "filled", test_sh=test_sh,
                           solve="#!/bin/bash\necho made > /logs/artifacts/made.txt\n")
    art = run_dir / rows[0]["artifacts_path"]
    assert (art / "logs" / "artifacts" / "made.txt").read_text() == "made\n"


@pytest.mark.docker
def test_the_folder_is_known_empty_only_when_nothing_runs_that_could_fill_it(tmp_path):
    from tbscale.environments import StartSpec
    from tbscale.environments import docker as dk
    from tbscale.runner.guard import VerifierGuard

    write_harbor_task(tmp_path / "tasks", "probe")
    task = load_task(tmp_path / "tasks" / "probe")
    image, _ = dk.ensure_image(task)
    box = dk.Container.start(StartSpec(image, network="none", labels={"org.tbscale.test": "round-trips"}))
    try:
        box.exec("mkdir -p /logs/agent /logs/verifier /logs/artifacts && chmod 777 /logs/*", 30, user="0")
        found = {}
        for case, sweep, agent in [("swept", True, "nohup sleep 600 >/dev/null 2>&1 &"),
                                   ("kept, nothing left", False, "true"),
                                   ("kept, a writer left", False, "nohup sleep 600 >/dev/null 2>&1 &"),
                                   ("filled", True, "echo x > /logs/artifacts/x")]:
            guard = VerifierGuard(box, task.verifier, sweep=sweep)
            guard.baseline()
            box.exec(agent, 30)
            guard.seal([(1, agent)])
            found[case] = guard.artifacts_folder
            box.exec("rm -rf /logs/artifacts/*", 30, user="0")
        assert found == {"swept": "empty", "kept, nothing left": "empty", "kept, a writer left": None,
                         "filled": None}, found
        box.exec("rm -rf /logs/artifacts", 30, user="0")
        guard = VerifierGuard(box, task.verifier)
        guard.baseline()
        guard.seal([])
        assert guard.artifacts_folder == "absent"
    finally:
        box.stop()


class Scripted:
    """An environment whose exec answers one scripted output and exit code."""

    def __init__(self, output: str, exit_code: int = 0):
        self.output, self.exit_code = output, exit_code
        self.commands: list[str] = []

    def exec(self, command, timeout_sec, **kw):
        self.commands.append(command)
        return ExecResult(self.exit_code, self.output, False, 0.01)


def test_the_digest_and_files_exec_is_parsed_line_by_line():
    out = "D\tabc123\nF\t/logs/verifier/reward.json\tnone\nF\t/logs/verifier/reward.txt\tb64\tMQo=\n"
    digest, files, _ = script.tests_digest_and_files(Scripted(out), "/tests", ["/logs/verifier/reward.json",
                                                                   "/logs/verifier/reward.txt"])
    assert digest == "abc123" and files == {"/logs/verifier/reward.json": None, "/logs/verifier/reward.txt": b"1\n"}
    # too big or no base64: left out (copied out instead); a failed exec gives no file at all
    _, files, _ = script.tests_digest_and_files(Scripted("D\t\nF\t/a\tcopy\nF\t/b\tb64\t!!\n"), "/tests", ["/a", "/b"])
    assert files == {}
    digest, files, _ = script.tests_digest_and_files(Scripted(out, exit_code=137), "/tests", ["/logs/verifier/reward.txt"])
    assert files == {} and digest == "abc123"
    # a line given twice with different values (something beside the exec wrote into its output):
    # that file is copied out instead, and both are noted
    twice = out + "F\t/logs/verifier/reward.txt\tb64\tMAo=\nD\tfff000\n"
    conflicts: list[str] = []
    digest, files, _ = script.tests_digest_and_files(Scripted(twice), "/tests", ["/logs/verifier/reward.json",
                                                                     "/logs/verifier/reward.txt"], conflicts)
    assert files == {"/logs/verifier/reward.json": None} and digest == "abc123"
    assert conflicts == ["file /logs/verifier/reward.txt", "tests digest"]
    conflicts = []
    script.tests_digest_and_files(Scripted(out + out), "/tests", ["/logs/verifier/reward.txt"], conflicts)
    assert conflicts == []
    # the digest alone, with a command before it in the same exec
    box = Scripted("D\t\n")
    assert script.tests_digest(box, "/tests", first="chmod +x /tests/test.sh") is None
    assert box.commands[0].startswith("{ chmod +x /tests/test.sh")


def test_what_outlived_the_tests_and_when_the_reward_changed_are_read_with_it():
    """The exec that reads the verdict kills first what the verification left running (`O` lines)
    and gives each file's status change time (`C`); the command's own last line gives its end."""
    out = ("O\t41\tpython3 -m pytest /tests\nD\tabc\nC\t/logs/verifier/reward.txt\t1796554084.2509642000\n"
           "F\t/logs/verifier/reward.txt\tb64\tMQo=\nC\t/elsewhere\t5\n")
    box = Scripted(out)
    _, files, after = script.tests_digest_and_files(box, "/tests", ["/logs/verifier/reward.txt"], live=["1:100", "7:900"])
    assert after.outlived == ["41 python3 -m pytest /tests"] and after.changed_at == {"/logs/verifier/reward.txt": 1796554084.2509642}
    assert box.commands[0].index("_outlived &&") < box.commands[0].index("sha256sum")  # killed before anything is read
    # no list of what ran before: nothing is killed; a `C` line without a time (no GNU find) is no time
    box = Scripted("D\tabc\nC\t/r\t\nF\t/r\tnone\n")
    assert script.tests_digest_and_files(box, "/tests", ["/r"])[2] == script.AfterTests([], {})
    assert "_outlived" not in box.commands[0]


@pytest.mark.parametrize("output, rest, ends", [
    ("5 passed\n\n--m--\t1796554084.175651\n", "5 passed\n", [1796554084.175651]),
    ("--m--\t12.5\n", "", [12.5]),
    ("no line: cut short\n", "no line: cut short\n", []),
    ("x\n--m--\t1796554084.N\n", "x", [None]),  # busybox's date prints %N as it is
    # the tests' code read the mark and printed a later end of its own: both taken off, both given
    ("a\n--m--\t99.0\nb\n\n--m--\t12.5\n", "ab\n", [99.0, 12.5]),
])
def test_the_end_line_is_taken_off_the_output(output, rest, ends):
    res, at = script._ended(ExecResult(0, output, False, 0.1), "--m--")
    assert (res.output, at) == (rest, ends)


class CountingBox:
    """An environment that records the commands it is asked to run, passing everything through."""

    def __init__(self, box):
        self.box, self.commands = box, []

    def exec(self, command, timeout_sec, **kw):
        self.commands.append(command)
        return self.box.exec(command, timeout_sec, **kw)

    def __getattr__(self, name):
        return getattr(self.box, name)


@pytest.mark.docker
def test_the_tests_are_staged_then_put_in_place_by_the_exec_that_prepares_the_verifier(tmp_path):
    """The tests are copied in under a new name first; one root exec then makes the fresh
    /logs/verifier, replaces the old tests folder with them, makes the script executable and
    digests them (it took two execs before). Nothing of the staged copy is left behind, whether
    the swap works or fails (a later step's agent would read it)."""
    import dataclasses

    from tbscale.environments import StartSpec
    from tbscale.environments import docker as dk

    d = write_harbor_task(tmp_path / "tasks", "staged",
                          test_sh=f"#!/bin/bash\ngrep -qx helped /tests/sub/helper.txt && [ ! -e /tests/planted ] "
                                  f"&& echo 1 > {REWARD} || echo 0 > {REWARD}\n")
    (d / "tests" / "sub").mkdir()
    (d / "tests" / "sub" / "helper.txt").write_text("helped\n")
    (d / "tests" / "test.sh").chmod(0o644)  # made executable by the preparing exec
    task = load_task(d)
    image, _ = dk.ensure_image(task)
    box = dk.Container.start(StartSpec(image, network="none", labels={"org.tbscale.test": "round-trips"}))
    try:
        # what an agent (or an earlier step) left: an old tests folder and a verifier log
        box.exec("mkdir -p /tests /logs/verifier && echo x > /tests/planted && echo 0 > /logs/verifier/reward.txt",
                 30, user="0")
        counting = CountingBox(box)
        res = script.run_tests(counting, task.verifier, task.reward, 60)
        assert (res.reward, res.error) == (1.0, None), res
        assert res.details.get("tests_changed") is None, res.details
        assert len(counting.commands) == 3, counting.commands  # prepare (and swap, digest), the tests, the digest
        assert "/.tbscale-tests-" in counting.commands[0] and counting.commands[1].startswith(f"{{ {task.verifier.command}\n}}")
        assert "outlived" not in res.details and "reward_written_late" not in res.details
        assert box.exec("ls -A / | grep -c tbscale-tests", 30).output.strip() == "0"
        # a tests folder that cannot be made (its parent is a file): the tests are not run, and the
        # staged copy is removed all the same
        broken = dataclasses.replace(task.verifier, tests_mount="/etc/hostname/tests",
                                     command="/etc/hostname/tests/test.sh")
        res = script.run_tests(box, broken, task.reward, 60)
        assert (res.error, res.details["stage"], res.details["exit_code"]) == ("tests_not_run", "prepare", 3), res
        assert box.exec("ls -A / | grep -c tbscale-tests", 30).output.strip() == "0"
    finally:
        box.stop()


def test_idle_means_only_the_environments_own_init_and_keep_alive():
    from tbscale.environments.base import IdleProcesses

    own = IdleProcesses(init=("/sbin/init-x -- keep", "keep"), children=("keep",))
    init = {"pid": 1, "ppid": 0, "cmd": "/sbin/init-x -- keep"}
    child = {"pid": 7, "ppid": 1, "cmd": "keep"}
    assert own.only([init, child])
    assert not own.only([init, child, {"pid": 9, "ppid": 1, "cmd": "sleep 600"}])  # something the agent left
    assert not own.only([init, {"pid": 9, "ppid": 7, "cmd": "keep"}])  # the keep-alive's name, not under the init
    assert not own.only([{"pid": 1, "ppid": 0, "cmd": "keep 2"}])  # an init started otherwise
