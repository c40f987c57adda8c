"""Containers: the agent cannot see tests or solution before verification; timeouts kill
commands; no container survives an error, a timeout or a SIGINT; a SIGKILLed run resumes and
finishes every trial exactly once."""

import asyncio
import json
import textwrap
from collections import Counter
from pathlib import Path

import pytest

pytestmark = [pytest.mark.docker]

from tbscale.types.actions import parse_action  # noqa: E402
from tbscale.config import Experiment  # noqa: E402
from tbscale.types import Completion  # noqa: E402
from tbscale.runner import Runner, plan_trials  # noqa: E402
from tbscale.strategies.base import Decision  # noqa: E402
from tbscale.tasks import load_task  # noqa: E402
from tbscale_testing.tasks import write_harbor_task  # noqa: E402
from tbscale_testing.cli import Started, tbscale  # noqa: E402
from tbscale_testing.engine import containers  # noqa: E402
from tbscale_testing.waiting import wait_for  # noqa: E402


def make_task(root: Path, name: str, solve: str = "echo done > /app/out.txt", agent_timeout: int = 60) -> Path:
    return write_harbor_task(root, name, instruction=f"Write 'done' into /app/out.txt. ({name})\n",
                             task_toml=f"[agent]\ntimeout_sec = {agent_timeout}\n[verifier]\ntimeout_sec = 30\n",
                             solve=f"#!/bin/bash\n{solve}\n")


def experiment(tmp_path: Path, agent: str = "oracle", trials: int = 1, **extra) -> Experiment:
    return Experiment.model_validate({"name": "lifecycle", "tasks": {"path": str(tmp_path / "tasks")},
                                      "trials": trials, "concurrency": 2,
                                      "settings": [{"name": agent, "agent": agent}], **extra})


class ScriptedPolicy:
    """Answers with a fixed list of commands, one per turn."""

    def __init__(self, commands):
        self.commands = list(commands)

    async def decide(self, messages, ctx):
        text = f"THOUGHT: step\n\n```bash\n{self.commands.pop(0)}\n```"
        c = Completion(text=text, finish_reason="stop")
        return Decision(c, parse_action(c))


def run_scripted(tmp_path, commands, limits=None, agent_timeout=60):
    task = load_task(make_task(tmp_path / "tasks", "scripted", agent_timeout=agent_timeout))
    exp = Experiment.model_validate({"name": "s", "tasks": {"path": str(tmp_path / "tasks")},
                                     "models": {"m": {"model": "sim/policy"}},
                                     "settings": [{"name": "b", "generator": "m"}], "limits": limits or {}})
    runner = Runner(exp, [task], tmp_path / "run")
    spec = plan_trials(exp, [task])[0]

    async def act(spec_, rec, box, context, *_, **__):
        from tbscale.agent.loop import run_agent
        return await run_agent(task, box, ScriptedPolicy(commands), exp.limits, rec, seed=0)

    runner.trials.act = act
    (tmp_path / "run").mkdir()
    return asyncio.run(runner.run_trial(spec)).model_dump(), runner, spec


def events(run_dir: Path, row) -> list[dict]:
    return [json.loads(x) for x in (run_dir / row["trajectory_path"]).read_text().splitlines()]


def test_agent_cannot_read_tests_or_solution(tmp_path):
    row, runner, spec = run_scripted(tmp_path, [
        "ls -la /tests /solution; cat /tests/test.sh; echo rc=$?",
        "echo done > /app/out.txt",
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT",
    ])
    obs = [e for e in events(tmp_path / "run", row) if e["type"] == "observation"]
    assert "No such file or directory" in obs[0]["output"] and "rc=1" in obs[0]["output"]
    assert "reward.txt" not in obs[0]["output"]
    # The verifier passed it, but looking for the solution is recorded and never a plain pass.
    assert row["reward"] == 1.0 and row["ending"] == "tampered" and not row["passed"] and row["turns"] == 3
    assert [(e["kind"], e["turn"]) for e in row["tampering"]] == [("reads_solution", 1)]
    assert containers(f"org.tbscale.trial={spec.key}", under=tmp_path) == []


def test_command_timeout_kills_and_continues(tmp_path):
    row, _, spec = run_scripted(tmp_path, [
        "sleep 600; echo never", "echo done > /app/out.txt", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT",
    ], limits={"command_timeout_sec": 2}, agent_timeout=300)
    obs = [e for e in events(tmp_path / "run", row) if e["type"] == "observation"]
    assert obs[0]["timed_out"] and obs[0]["exit_code"] == 124 and "never" not in obs[0]["output"]
    # killed by its own 2 s limit: neither the agent's 300 s nor the command's 600 s ran out
    assert obs[0]["duration_sec"] < 200
    assert row["passed"]


def test_agent_time_limit_ending_and_no_container_left(tmp_path):
    row, _, spec = run_scripted(tmp_path, ["sleep 20", "echo done > /app/out.txt"], agent_timeout=3)
    assert row["ending"] == "time_limit" and not row["passed"]
    assert containers(f"org.tbscale.trial={spec.key}", under=tmp_path) == []


def test_step_limit_and_wrong_submission_endings(tmp_path):
    row, _, _ = run_scripted(tmp_path, ["ls", "ls", "ls"], limits={"max_turns": 2})
    assert row["ending"] == "time_limit" and row["stop_reason"] == "step_limit" and row["turns"] == 2
    row, _, _ = run_scripted(tmp_path / "b", ["echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"])
    assert row["ending"] == "wrong_submission" and row["reward"] == 0.0


def test_container_removed_when_agent_raises(tmp_path):
    task = load_task(make_task(tmp_path / "tasks", "boom"))
    exp = experiment(tmp_path)
    runner = Runner(exp, [task], tmp_path / "run")
    spec = plan_trials(exp, [task])[0]
    seen = {}

    async def act(spec_, rec, box, context, *_, **__):
        seen["id"] = box.id
        raise RuntimeError("agent exploded")

    runner.trials.act = act
    (tmp_path / "run").mkdir()
    with pytest.raises(RuntimeError, match="agent exploded"):
        asyncio.run(runner.run_trial(spec))
    assert seen["id"] and containers(f"org.tbscale.trial={spec.key}", under=tmp_path) == []


def _write_config(tmp_path: Path, agent: str, trials: int, concurrency: int) -> Path:
    cfg = tmp_path / "exp.yaml"
    cfg.write_text(textwrap.dedent(f"""
        name: killtest
        tasks: {{path: {tmp_path / 'tasks'}}}
        trials: {trials}
        concurrency: {concurrency}
        output_dir: {tmp_path / 'results'}
        settings:
          - name: {agent}
            agent: {agent}
    """))
    return cfg


def _wait_for(predicate, timeout=120.0) -> bool:
    return wait_for(predicate, timeout, 0.2)


def test_sigint_removes_containers_and_keeps_finished(tmp_path):
    make_task(tmp_path / "tasks", "slow", solve="sleep 120; echo done > /app/out.txt", agent_timeout=300)
    cfg = _write_config(tmp_path, "oracle", trials=2, concurrency=2)
    with Started("run", cfg, "--no-report") as run:
        run.wait_until(lambda: len(containers("org.tbscale.task=slow", under=tmp_path)) == 2, "containers never started",
                       timeout=120)
        err = run.interrupt()
    assert run.returncode == 130, err
    assert "resume" in err
    assert containers("org.tbscale.task=slow", under=tmp_path) == []
    manifest = json.loads((tmp_path / "results" / "killtest" / "manifest.json").read_text())
    assert manifest["invocations"][-1]["finished_at"]


def test_sigkill_then_rerun_finishes_each_trial_once(tmp_path):
    for i in range(3):
        make_task(tmp_path / "tasks", f"t{i}", solve="sleep 2; echo done > /app/out.txt")
    cfg = _write_config(tmp_path, "oracle", trials=3, concurrency=2)
    index = tmp_path / "results" / "killtest" / "trials.jsonl"

    def finished() -> int:
        return len(index.read_text().splitlines()) if index.exists() else 0

    with Started("run", cfg, "--no-report", capture=False) as run:
        run.wait_until(lambda: finished() >= 2, "no trial finished", timeout=120)
        run.kill_9(timeout=30)
    first = finished()
    assert 2 <= first < 9
    res = tbscale("run", cfg, "--no-report", timeout=300)
    assert res.returncode == 0, res.stderr
    rows = [json.loads(x) for x in index.read_text().splitlines()]
    keys = Counter(r["trial_key"] for r in rows)
    assert len(keys) == 9 and set(keys.values()) == {1}
    assert all(r["passed"] for r in rows)
    manifest = json.loads((tmp_path / "results" / "killtest" / "manifest.json").read_text())
    assert manifest["invocations"][-1]["trials_run"] == 9 - first
    # The killed process's containers were orphans; the rerun removed them.
    assert _wait_for(lambda: containers("org.tbscale.task=t0", under=tmp_path) + containers("org.tbscale.task=t1", under=tmp_path)
                     + containers("org.tbscale.task=t2", under=tmp_path) == [], timeout=300)


def test_a_crashing_trial_does_not_stop_the_run_and_is_retried(tmp_path):
    for name in ("ok-task", "crash-task"):
        make_task(tmp_path / "tasks", name)
    exp = experiment(tmp_path, agent="oracle", trials=2)
    from tbscale.tasks import load_tasks

    tasks, _ = load_tasks(tmp_path / "tasks")
    runner = Runner(exp, tasks, tmp_path / "run")
    real_act = runner.trials.act

    async def flaky(spec, rec, box, context, *rest, **kw):
        if spec.task.id == "crash-task":
            raise RuntimeError("unexpected bug")
        return await real_act(spec, rec, box, context, *rest, **kw)

    runner.trials.act = flaky
    counters = asyncio.run(runner.run())
    assert counters.done == 2 and counters.crashed == 2
    assert "unexpected bug" in (tmp_path / "run" / "crashes.log").read_text()
    rows = [json.loads(x) for x in (tmp_path / "run" / "trials.jsonl").read_text().splitlines()]
    assert {r["task_id"] for r in rows} == {"ok-task"}
    again = Runner(exp, tasks, tmp_path / "run")
    counters = asyncio.run(again.run())
    assert counters.skipped == 2 and counters.done == 2 and counters.crashed == 0
    assert containers("org.tbscale.task=crash-task", under=tmp_path) == []


def test_retry_stop_reasons_reruns_infrastructure_failures(tmp_path):
    from tbscale.logs import TrialIndex
    from tbscale.types.results import TrialResult

    def line(key: str, stop_reason: str) -> TrialResult:
        return TrialResult(schema_version=2, run="r", setting="s", setting_key="k", trial_key=key, task_id="t",
                           trial=0, ending="wrong_submission", stop_reason=stop_reason)

    index = TrialIndex(tmp_path / "trials.jsonl")
    index.append(line("a", "submitted"))
    index.append(line("b", "sandbox_error"))
    assert index.finished_keys() == {"a", "b"}
    assert index.finished_keys(retry_stop_reasons={"sandbox_error"}) == {"a"}
    index.append(line("b", "submitted"))  # the retry's line supersedes
    assert index.finished_keys(retry_stop_reasons={"sandbox_error"}) == {"a", "b"}


def test_prefix_continuation_replays_state_and_pauses(tmp_path):
    """A trajectory strategy can stop an attempt after some turns and continue it in a fresh
    container: the prefix's commands are replayed, then the agent goes on from its history."""
    from tbscale.strategies import register_trajectory
    from tbscale.strategies.base import Params, Prefix, TrajectoryOutcome

    seen = {}

    class ContinueParams(Params):
        pass

    @register_trajectory("test_continue", ContinueParams)
    class Continue:
        def __init__(self, params, **_):
            pass

        async def run(self, task, start_attempt, rec):
            a = await start_attempt("seg1", max_new_turns=1, verify=False)
            b = await start_attempt("seg2", prefix=Prefix.of(a), max_new_turns=1, verify=False)
            c = await start_attempt("final", prefix=Prefix.of(b))
            seen.update(a=a, b=b, c=c)
            return TrajectoryOutcome(c, [a, b, c])

    make_task(tmp_path / "tasks", "three-steps",
              solve="mkdir -p /app/d\n\necho done > /app/d/x\n\ncp /app/d/x /app/out.txt")
    exp = Experiment.model_validate({
        "name": "cont", "tasks": {"path": str(tmp_path / "tasks")},
        "models": {"m": {"model": "sim/policy", "sim": {"skill": 1.0}}},
        "settings": [{"name": "s", "generator": "m", "trajectory": {"name": "test_continue"}}]})
    tasks = [load_task(tmp_path / "tasks" / "three-steps")]
    runner = Runner(exp, tasks, tmp_path / "run")
    asyncio.run(runner.run())
    a, b, c = seen["a"], seen["b"], seen["c"]
    assert (a.ending, a.stop_reason, a.turns, a.reward) == ("unfinished", "paused", 1, None)
    assert a.actions == ["mkdir -p /app/d"]
    assert b.ending == "unfinished" and b.turns == 2 and b.actions == ["mkdir -p /app/d", "echo done > /app/d/x"]
    # The final continuation only ran the last step and the submission: it passes because the
    # replay rebuilt /app/d/x in its fresh container.
    assert c.passed and c.turns == 4 and c.actions[2:] == ["cp /app/d/x /app/out.txt",
                                                           "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"]
    row = json.loads((tmp_path / "run" / "trials.jsonl").read_text())
    assert row["passed"] and row["n_attempts"] == 3
    replays = [e for e in events(tmp_path / "run", row) if e["type"] == "replay"]
    assert [(e["attempt"], e["command"]) for e in replays] == [
        (1, "mkdir -p /app/d"), (2, "mkdir -p /app/d"), (2, "echo done > /app/d/x")]
