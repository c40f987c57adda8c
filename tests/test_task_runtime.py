"""The run time's rules without an engine: verdicts from reward files and parsers (and the
verifier errors), multi-step reward strategies, healthcheck timing, network refusals and overrides,
the reasons `tasks check` gives, and the storage-limit option's place in a setting's identity."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tbscale.config import Experiment
from tbscale.environments.base import ExecResult
from tbscale.errors import HealthcheckFailed
from tbscale.tasks.model import NetworkPolicy, RewardSpec, VerifierSpec
from tbscale.tasks.schema import Healthcheck
from tbscale.verifiers.result import VerifierResult, classify_ending
from tbscale.verifiers.script import RewardFileError, parse_reward_file, reward_key, run_tests


class FakeBox:
    """Answers exec with scripted results (the test command's last), and serves files."""

    def __init__(self, *, exit_code: int = 0, output: str = "", files: dict[str, bytes] | None = None,
                 timed_out: bool = False):
        self.exit_code, self.output, self.timed_out = exit_code, output, timed_out
        self.files = files or {}
        self.calls: list[tuple[str, dict]] = []
        self.workdir = "/app"

    def exec(self, command, timeout_sec, **kw):
        self.calls.append((command, kw))
        if command.startswith(("mkdir", "chmod", "rm -rf", "set -u", "[ -d")):  # preparation, tests digest
            return ExecResult(0, "", False, 0.0)
        return ExecResult(self.exit_code, self.output, self.timed_out, 0.1)

    def read_file(self, path):
        return self.files.get(path)

    def put_dir(self, local, dest):
        self.calls.append((f"put {local} {dest}", {}))


VERIFIER = VerifierSpec(command="/tests/test.sh", user="checker", timeout_sec=30)


def test_reward_files_json_wins_and_every_key_is_kept():
    box = FakeBox(files={"/logs/verifier/reward.txt": b"0\n",
                         "/logs/verifier/reward.json": b'{"reward": 1, "style": 0.5}'})
    res = run_tests(box, VERIFIER, RewardSpec(), 30, env={"A": "1"}, upload=False)
    assert (res.reward, res.passed, res.error, res.rewards) == (1.0, True, None, {"reward": 1.0, "style": 0.5})
    # the command, followed in its shell by the line with the container's clock as it ends
    command, kw = next(c for c in box.calls if c[0].startswith("{ /tests/test.sh\n}\n"))
    assert kw["user"] == "checker" and kw["env"] == {"A": "1"}
    sole = run_tests(FakeBox(files={"/logs/verifier/reward.json": b'{"score": 0.25}'}), VERIFIER, RewardSpec(), 30,
                     upload=False)
    assert sole.reward == 0.25 and reward_key(RewardSpec(), sole.rewards) == "score"


@pytest.mark.parametrize("box, error", [
    (FakeBox(exit_code=127, output="bash: /tests/test.sh: not found"), "tests_not_run"),
    (FakeBox(exit_code=126), "tests_not_run"),
    (FakeBox(exit_code=1), "reward_missing"),
    (FakeBox(files={"/logs/verifier/reward.txt": b"pass"}), "reward_missing"),
    (FakeBox(files={"/logs/verifier/reward.json": b'{"a": 1, "b": 0}'}), "reward_missing"),
    (FakeBox(exit_code=124, timed_out=True), "verifier_timeout"),
])
def test_a_verifier_without_a_verdict_is_a_verifier_error(box, error):
    res = run_tests(box, VERIFIER, RewardSpec(), 30, upload=False)
    assert res.error == error and res.reward is None
    assert classify_ending("submitted", res) == "verifier_error"


def test_legacy_parser_verdicts_and_no_tests_parsed():
    spec = RewardSpec(source="parser", parser_name="pytest")
    ok = "=== short test summary info ===\nPASSED t.py::test_a\nXFAIL t.py::test_b - why\n"
    assert run_tests(FakeBox(output=ok), VERIFIER, spec, 30, upload=False).reward == 1.0
    bad = run_tests(FakeBox(output=ok + "FAILED t.py::test_c - boom\n"), VERIFIER, spec, 30, upload=False)
    assert bad.reward == 0.0 and bad.error is None
    none = run_tests(FakeBox(output="collected 0 items\n"), VERIFIER, spec, 30, upload=False)
    assert none.error == "no_tests_parsed" and none.reward is None


def test_parse_reward_file_rejects_what_is_not_numbers():
    assert parse_reward_file(b"0.5\n", "reward.txt") == {"reward": 0.5}
    for raw, name in ((b"", "reward.txt"), (b"[1]", "reward.json"), (b'{"a": "x"}', "reward.json"),
                      (b'{"a": true}', "reward.json"), (b"nan", "reward.txt")):
        with pytest.raises(RewardFileError):
            parse_reward_file(raw, name)


def _task_with_strategy(strategy: str):
    from tbscale.tasks import Task

    return Task(id="t", format="harbor", instruction="x", multi_step_reward_strategy=strategy)


def test_multi_step_rewards_mean_per_key_and_final():
    from tbscale.runner.steps import combine_steps

    verdicts = [("a", VerifierResult(0.0, False, "", None, {}, {"reward": 0.0, "ready": 1.0})),
                ("b", VerifierResult(1.0, True, "", None, {}, {"reward": 1.0}))]
    mean = combine_steps(_task_with_strategy("mean"), verdicts)
    assert mean.rewards == {"reward": 0.5, "ready": 0.5} and mean.reward == 0.5 and not mean.passed
    final = combine_steps(_task_with_strategy("final"), verdicts)
    assert final.rewards == {"reward": 1.0} and final.passed
    broken = combine_steps(_task_with_strategy("mean"), verdicts + [("c", VerifierResult(None, False, "", "verifier_timeout"))])
    assert broken.error == "verifier_timeout" and broken.details["failed_step"] == "c"


class SlowStart(FakeBox):
    """Fails its healthcheck `fails` times, then passes."""

    def __init__(self, fails: int):
        super().__init__()
        self.fails = fails
        self.runs = 0

    def exec(self, command, timeout_sec, **kw):
        self.runs += 1
        return ExecResult(0 if self.runs > self.fails else 1, "", False, 0.0)


def _runtime():
    from tbscale.logs import AttemptRecorder
    from tbscale.runner.environment import AttemptEnvironments
    from tbscale.tasks import Task

    exp = Experiment.model_validate({"name": "x", "tasks": {"path": "."}, "settings": [{"name": "o", "agent": "oracle"}]})
    task = Task(id="t", format="harbor", instruction="x", image="debian:bookworm-slim")
    return AttemptEnvironments(exp, backend=None, task=task, rec=AttemptRecorder(None, 0), labels={})  # type: ignore[arg-type]


def test_healthcheck_counts_failures_only_after_the_start_period():
    rt = _runtime()
    hc = Healthcheck(command="probe", interval_sec=0.01, start_interval_sec=0.01, start_period_sec=0.3, retries=2)
    box = SlowStart(fails=5)  # fails for the first ~0.05 s: inside the start period, so it passes
    rt.healthcheck(box, hc, "[environment.healthcheck]")
    assert box.runs == 6
    never = SlowStart(fails=10_000)
    with pytest.raises(HealthcheckFailed, match=r"^\[environment\.healthcheck\] `probe` failed 2 times"):
        rt.healthcheck(never, Healthcheck(command="probe", interval_sec=0.01, retries=2), "[environment.healthcheck]")
    assert never.runs == 2


def test_network_refusals_and_the_experiment_override():
    from tbscale.environments.network import refusal

    allow = NetworkPolicy("allowlist", ("allowed-svc", "localhost"))
    assert refusal(allow, ["allowed-svc", "blocked-svc"]) is None
    msg = refusal(NetworkPolicy("allowlist", ("example.com",)), ["db"], key="[agent].allowed_hosts")
    assert msg.startswith("[agent].allowed_hosts entry 'example.com' is not one of the task's compose services")
    assert refusal(NetworkPolicy("no-network"), []) is None
    rt = _runtime()
    assert rt.policy(allow) == allow
    rt.exp.environment.network = "none"
    assert rt.policy(NetworkPolicy("public")).mode == "no-network"
    rt.exp.environment.network = "bridge"
    assert rt.policy(allow).mode == "public"


def test_tasks_check_reasons(tmp_path: Path):
    from tbscale.cli.tasks import check_reasons
    from tbscale.tasks import Task

    traj = tmp_path / "trajectories" / "net.jsonl"
    traj.parent.mkdir(parents=True)
    traj.write_text(json.dumps({"type": "verifier", "output": "curl: (6) Could not resolve host: astral.sh"}) + "\n")

    from tbscale.types.results import TrialResult

    def row(task, setting, passed, **kw):
        return TrialResult.model_validate({
            "schema_version": 2, "run": "check", "setting_key": "k", "trial_key": f"{task}-{setting}", "trial": 0,
            "task_id": task, "setting": setting, "passed": passed, "reward": 1.0 if passed else 0.0,
            "ending": "pass" if passed else "wrong_submission", **kw})

    rows = [row("good", "oracle", True), row("good", "nop", False),
            row("net", "oracle", False, trajectory_path="trajectories/net.jsonl"), row("net", "nop", False),
            row("wrong", "oracle", False), row("wrong", "nop", False),
            row("easy", "oracle", True), row("easy", "nop", True),
            row("gpu", "oracle", False, stop_reason="task_refused", ending="agent_error",
                error={"type": "TaskRefused", "message": "[environment].gpus = 1: no GPUs"}), row("gpu", "nop", False),
            row("vt", "oracle", False, stop_reason="verifier_timeout", ending="verifier_error", infra_error=True,
                error={"type": "VerifierError", "message": "verifier: verifier_timeout"}), row("vt", "nop", False)]
    # Tasks with no reference solution (datasets that ship none) are judged by their nop.
    unsolved = {"stop_reason": "agent_error", "ending": "agent_error",
                "error": {"type": "AgentError", "message": "task X has no reference solution"}}
    rows += [row("bare", "oracle", False, **unsolved), row("bare", "nop", False),
             row("bare-easy", "oracle", False, **unsolved), row("bare-easy", "nop", True),
             row("bare-broken", "oracle", False, **unsolved),
             row("bare-broken", "nop", False, stop_reason="reward_missing", ending="verifier_error",
                 error={"type": "VerifierError", "message": "verifier: reward_missing"})]
    # An installer piped into a shell fails quietly; a later build step fails for want of it.
    from tbscale.environments.network_failures import failed_build_log

    quiet = failed_build_log("Step 5/9 : RUN curl -sSf https://example.org/init.sh | sh\n"
                             "curl: (6) Could not resolve host: example.org\n"
                             + "".join(f"Step {i}/9 : RUN true\n" for i in range(6, 9))
                             + "Step 9/9 : RUN lake update\n/bin/sh: 1: lake: not found\n")
    rows += [row("quiet-net", "oracle", False, stop_reason="image_build_error", ending="agent_error", infra_error=True,
                 error={"type": "ImageBuildError", "message": f"building quiet-net failed: exit 127\n{quiet}"}),
             row("quiet-net", "nop", False)]
    # A base image this engine does not have and cannot pull: the reason names it, and how to stand it in.
    pull = ('building pull failed: Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io: no '
            'such host\nStep 1/9 : FROM ubuntu:22.04\nGet "https://registry-1.docker.io/v2/": dial tcp: lookup '
            'registry-1.docker.io: no such host')
    rows += [row("pull", "oracle", False, stop_reason="image_build_error", ending="agent_error", infra_error=True,
                 error={"type": "ImageBuildError", "message": pull}), row("pull", "nop", False)]
    # A Dockerfile the docker backend's classic builder refuses: the backend's error says what it needs.
    from tbscale.environments.docker import build_failed

    bk = build_failed("building bk failed: The command '/bin/sh -c x' returned: the --chmod option requires BuildKit")
    rows += [row("bk", "oracle", False, stop_reason=bk.stop_reason, ending="agent_error", infra_error=True,
                 error={"type": type(bk).__name__, "message": str(bk)}), row("bk", "nop", False)]
    assert type(build_failed("building x failed: exit 1")).__name__ == "ImageBuildError"
    # A reference solution that plants what the verifier's apt runs: its verifier, obstructed, then
    # fails a download; the tampering is the reason, not the download.
    hook = {"kind": "apt_hook_planted", "source": "environment",
            "detail": "what apt or dpkg runs ... was changed (a setting ...): /etc/apt/apt.conf.d/99zz (APT::X=sh /x)"}
    rows += [row("forged", "oracle", False, trajectory_path="trajectories/net.jsonl", tampering=[hook],
                 stop_reason="verifier_obstructed"), row("forged", "nop", False)]
    # Trials that crashed leave no line (a rerun runs them again), only what the runner recorded of
    # the crash: one whose nop failed as it should, one with no line at all, one the runner never saw.
    rows += [row("half", "nop", False)]
    crashes = {("oracle", "half"): "KeyError: 'boom'", ("nop", "gone, with, commas"): "ValueError: no luck"}
    ids = ("good", "net", "wrong", "easy", "gpu", "vt", "bare", "bare-easy", "bare-broken", "quiet-net", "pull", "bk", "forged", "half",
           "gone, with, commas", "silent")
    tasks = [Task(id=t, format="harbor", instruction="x") for t in ids]
    reasons = check_reasons(rows, tasks, tmp_path, crashes=crashes)
    assert {t: c for t, (c, _) in reasons.items()} == {
        "good": "ok", "net": "needs internet", "wrong": "oracle failed", "easy": "nop passed", "gpu": "refused",
        "vt": "verifier error", "bare": "no solution", "bare-easy": "nop passed", "bare-broken": "verifier error",
        "quiet-net": "needs internet", "pull": "needs internet", "bk": "needs BuildKit", "forged": "oracle tampered", "half": "crashed",
        "gone, with, commas": "crashed",
        "silent": "crashed"}
    assert reasons["half"][1] == "the oracle trial crashed: KeyError: 'boom' (tracebacks in crashes.log)"
    assert reasons["gone, with, commas"][1] == ("the oracle trial left no result; the nop trial crashed: ValueError: "
                                                "no luck (tracebacks in crashes.log)")
    assert reasons["silent"][1] == ("the oracle trial left no result; the nop trial left no result (tracebacks in "
                                    "crashes.log)")
    assert reasons["bk"][1].startswith("its Dockerfile uses BuildKit-only syntax")
    assert reasons["quiet-net"][1] == ("the image build (a download) needs the internet: "
                                       "curl: (6) Could not resolve host: example.org")
    assert reasons["pull"][1] == ("the base image ubuntu:22.04, not on this engine and not to be pulled "
                                  "(scripts/ensure_docker.sh ubuntu:22.04 builds a local stand-in), needs the internet: "
                                  "dial tcp: lookup registry-1.docker.io: no such host")
    assert reasons["gpu"][1] == "[environment].gpus = 1: no GPUs"
    assert reasons["forged"][1] == "apt_hook_planted: /etc/apt/apt.conf.d/99zz (APT::X=sh /x)"
    assert reasons["net"][1] == ("its test or solution needs the internet: curl: (6) Could not resolve host: astral.sh; "
                                 "its tests ran and gave reward 0.0")
    assert reasons["bare"][1] == "task X has no reference solution; its nop failed with a verdict (reward 0.0)"
    assert reasons["bare-easy"][1] == "reward 1.0 (and it has no reference solution)"
    assert reasons["bare-broken"][1] == "reward_missing: verifier: reward_missing (and it has no reference solution)"


def test_a_failed_builds_log_keeps_its_tail_and_the_first_line_that_had_no_internet():
    from tbscale.environments.network_failures import build_error_log, failed_build_log

    steps = [f"Step {i}/30 : RUN step-{i}" for i in range(1, 31)]
    quiet = [*steps[:3], "curl: (6) Could not resolve host: raw.githubusercontent.com", *steps[3:],
             "/bin/sh: 1: lake: not found"]
    got = failed_build_log("\n".join(quiet)).splitlines()
    assert got == [*quiet[-8:], "earlier in the build log: curl: (6) Could not resolve host: raw.githubusercontent.com"]
    # a network failure already among the last lines, or none at all: the last lines alone
    loud = [*quiet, "Could not resolve host: second.example"]
    assert failed_build_log("\n".join(loud)).splitlines() == loud[-8:]
    assert failed_build_log("\n".join(steps) + "\n\n").splitlines() == steps[-8:]
    # the docker SDK's log: stream chunks that split and join lines, and the error at the end
    chunks = [{"stream": "Step 1/2 : RUN curl x | sh\n\x1b[91mcurl: (6) Could not resolve "}, {"stream": "host: x\n"},
              *({"stream": f"line {i}\n"} for i in range(10)), {"error": "The command returned a non-zero code: 127"}]
    assert build_error_log(chunks).splitlines()[-2:] == [
        "The command returned a non-zero code: 127", "earlier in the build log: curl: (6) Could not resolve host: x"]


def test_a_network_failure_in_a_step_the_rebuild_takes_from_the_cache_is_named_again(tmp_path: Path):
    from tbscale.environments.network_failures import StepNotes, build_error_log

    def log(step2: list[str], step3: list[str]) -> list[dict]:
        """The classic builder's chunks, as the docker SDK hands them over."""
        lines = ["Step 1/3 : FROM debian:bookworm-slim", "\n", " ---> 9abc50b02ce9\n",
                 "Step 2/3 : RUN curl -sSf https://sh.example.org | sh || true", "\n", *step2,
                 "Step 3/3 : RUN lake update", "\n", *step3]
        return [{"stream": line} for line in lines] + [{"error": "The command '/bin/sh -c lake update' returned 127"}]

    ran = [" ---> Running in ef5d5a692395\n", "\x1b[91mcurl: (6) Could not resolve host: sh.example.org\n\x1b[0m",
           "Removing intermediate container ef5d5a692395\n", " ---> 27c14ab532d6\n"]
    fails = [" ---> Running in 3af6cb0a7f98\n", "/bin/sh: 1: lake: not found\n",
             "Removing intermediate container 3af6cb0a7f98\n"]
    notes = StepNotes(tmp_path / "notes")
    first = build_error_log(log(ran, fails), notes)
    assert "curl: (6) Could not resolve host: sh.example.org" in first
    assert (tmp_path / "notes" / "27c14ab532d6").read_text() == "curl: (6) Could not resolve host: sh.example.org"
    cached = [" ---> Using cache\n", " ---> 27c14ab532d6\n"]
    assert "Could not resolve" not in build_error_log(log(cached, fails), StepNotes(tmp_path / "elsewhere"))
    again = build_error_log(log(cached, fails), notes).splitlines()
    assert again[-1] == ("earlier, in a step this build took from the cache (it printed this when it ran): "
                         "curl: (6) Could not resolve host: sh.example.org")
    # another step image, cached or run without a failure, recalls nothing and notes nothing
    other = [" ---> Using cache\n", " ---> 5d1e0c4b7a21\n"]
    assert "Could not resolve" not in build_error_log(log(other, fails), notes)
    assert sorted(f.name for f in (tmp_path / "notes").iterdir()) == ["27c14ab532d6"]


def test_storage_limit_keeps_setting_identities_at_its_default():
    from tbscale.runner.identity import setting_identity

    base = {"name": "x", "tasks": {"path": "."}, "settings": [{"name": "o", "agent": "oracle"}]}
    exp = Experiment.model_validate(base)
    assert "storage_limit" not in setting_identity(exp, exp.settings[0])["environment"]
    ignore = Experiment.model_validate({**base, "environment": {"storage_limit": "ignore"}})
    assert setting_identity(ignore, ignore.settings[0])["environment"]["storage_limit"] == "ignore"


def test_the_tests_are_staged_first_and_one_root_exec_prepares_swaps_and_digests(tmp_path):
    """Shared mode: the tests folders go in under a new name, then one root exec (fresh
    /logs/verifier, the swap, chmod, digest) runs before the tests; with nothing to copy in, that
    exec only removes the old tests folder, as before."""
    (tmp_path / "tests").mkdir()
    spec = VerifierSpec(command="/tests/test.sh", tests_dirs=[tmp_path / "tests"])
    box = FakeBox(files={"/logs/verifier/reward.txt": b"1\n"})
    assert run_tests(box, spec, RewardSpec(), 30).reward == 1.0
    (put, _), (prepare, kw), (tests, _) = box.calls[:3]
    assert put.startswith(f"put {tmp_path / 'tests'} /.tbscale-tests-") and kw["user"] == "0"
    staged = put.split()[-1]
    assert f"mv {staged} /tests" in prepare and "chmod +x /tests/test.sh" in prepare
    assert tests.startswith("{ /tests/test.sh\n}\n")
    bare = FakeBox(files={"/logs/verifier/reward.txt": b"1\n"})
    assert run_tests(bare, VerifierSpec(command="/tests/test.sh"), RewardSpec(), 30).reward == 1.0
    (prepare, _), (tests, _) = bare.calls[:2]
    assert "rm -rf /tests || exit 3" in prepare and "tbscale-tests" not in prepare
    assert tests.startswith("{ /tests/test.sh\n}\n")


def test_a_utility_agents_mcp_configuration_leaves_out_a_header_the_host_cannot_fill(monkeypatch):
    """The oracle and the nop agent are not refused for an unset header variable (Harbor hands
    them no MCP server): their configuration has the server without that header; another agent's
    has every header filled."""
    from tbscale.logs import AttemptRecorder
    from tbscale.runner.environment import AttemptEnvironments
    from tbscale.tasks import Task
    from tbscale.tasks.model import EnvironmentSpec
    from tbscale.tasks.schema import McpServer

    class Box:  # what _agent_env asks of an environment: it keeps the file it was given
        def __init__(self):
            self.files = {}

        def put_archive(self, files, parent):
            self.files.update({f"{parent}/{k}": v for k, v in files.items()})

        def exec(self, command, timeout, **kw):
            return ExecResult(0, "", False, 0.0)

    server = McpServer(name="m", transport="streamable-http", url="http://m:8/",
                       headers={"Authorization": "Bearer ${TBSCALE_T_UNSET_MCP}", "X-Mode": "${TBSCALE_T_MODE:-plain}"})
    task = Task(id="t", format="harbor", instruction="x", image="debian:bookworm-slim",
                environment=EnvironmentSpec(image="debian:bookworm-slim", mcp_servers=[server]))
    exp = Experiment.model_validate({"name": "x", "tasks": {"path": "."}, "settings": [{"name": "o", "agent": "oracle"}]})
    monkeypatch.delenv("TBSCALE_T_UNSET_MCP", raising=False)

    def config(agent):
        box = Box()
        envs = AttemptEnvironments(exp, backend=None, task=task, rec=AttemptRecorder(None, 0), labels={},  # type: ignore[arg-type]
                                   agent=agent)
        env = envs._agent_env(box)
        return json.loads(box.files[env["TBSCALE_MCP_CONFIG"]])["mcpServers"]["m"]

    for agent in ("oracle", "nop"):
        assert task.unset_host_var(agent) is None
        assert config(agent)["headers"] == {"X-Mode": "plain"}
    assert "TBSCALE_T_UNSET_MCP" in task.unset_host_var("bash")
    monkeypatch.setenv("TBSCALE_T_UNSET_MCP", "mcp-host-value-9")
    assert config("bash")["headers"] == {"Authorization": "Bearer mcp-host-value-9", "X-Mode": "plain"}
    assert config("oracle")["headers"]["Authorization"] == "Bearer mcp-host-value-9"
