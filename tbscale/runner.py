"""From an experiment to finished trials on disk.

plan_trials turns (settings x tasks x trial indices) into TrialSpecs with stable keys; Runner
skips the keys already in trials.jsonl (resume), runs the rest with bounded concurrency, and
writes each trial's event stream and index line as it goes. One trial = one run of the setting's
trajectory strategy; every attempt inside it gets a fresh container, the agent, and the verifier.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import platform
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

from tbscale import SCHEMA_VERSION, __version__
from tbscale.agent.actions import BASH_TOOL
from tbscale.agent.loop import AttemptOutcome, run_agent
from tbscale.config import Experiment, Setting
from tbscale.env import docker as dk
from tbscale.errors import AttemptStopped, SandboxError, TbscaleError
from tbscale.logs import AttemptRecorder, EventLog, TrialIndex, merge_usage, read_jsonl
from tbscale.models.llm import redact
from tbscale.strategies import entry
from tbscale.strategies.base import AttemptResult, Prefix, TrajectoryOutcome
from tbscale.tasks import Task
from tbscale.verify import VerifierResult, classify_ending
from tbscale.verify import verify as run_verifier


@dataclass
class TrialSpec:
    setting: Setting
    setting_key: str
    task: Task
    trial: int
    seed: int
    key: str

    @property
    def trajectory_relpath(self) -> str:
        return f"trajectories/{self.task.id}/{self.setting.name}__t{self.trial}__{self.key}.jsonl"


def _hash(*parts: Any, length: int = 16) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:length]


def plan_trials(exp: Experiment, tasks: list[Task]) -> list[TrialSpec]:
    """Every (setting, task, trial). A trial's seed depends on the task and trial index only, so
    two settings see the same seeds (a paired design); its key adds the setting's config hash."""
    specs = []
    for setting in exp.settings:
        skey = exp.setting_key(setting)
        for task in tasks:
            for i in range(exp.trials):
                seed = int(_hash(exp.seed, task.id, i, length=8), 16) % (2**31)
                specs.append(TrialSpec(setting, skey, task, i, seed, _hash(task.id, skey, i, seed)))
    return specs


def _versions() -> dict[str, str]:
    out = {"tbscale": __version__, "python": platform.python_version()}
    for pkg in ("litellm", "docker", "swebench", "pydantic"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def _git_commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                              cwd=Path(__file__).parent).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


@dataclass
class Counters:
    total: int = 0
    skipped: int = 0
    done: int = 0
    running: int = 0
    passed: int = 0
    errors: int = 0
    crashed: int = 0
    started_at: float = field(default_factory=time.monotonic)


class Runner:
    def __init__(self, exp: Experiment, tasks: list[Task], run_dir: Path,
                 on_update: Callable[[Counters, dict[str, Any] | None], None] | None = None,
                 retry_stop_reasons: set[str] | None = None):
        self.exp, self.tasks, self.run_dir = exp, tasks, run_dir
        # Finished trials that stopped for these reasons (e.g. sandbox_error) are run again.
        self.retry_stop_reasons = retry_stop_reasons or set()
        self.crashes: list[tuple[TrialSpec, str]] = []
        self.index = TrialIndex(run_dir / "trials.jsonl")
        self.counters = Counters()
        self.on_update = on_update or (lambda c, row: None)
        self._containers = asyncio.Semaphore(exp.concurrency)
        self.simulated = any(m.is_simulated for m in exp.models.values())

    # ---- run-level bookkeeping -------------------------------------------------------------
    def _check_manifest(self) -> dict[str, Any]:
        """A run folder belongs to one config: a setting that kept its name but changed would
        mix two configurations under one label in the report."""
        path = self.run_dir / "manifest.json"
        keys = {s.name: self.exp.setting_key(s) for s in self.exp.settings}
        if path.exists():
            manifest = json.loads(path.read_text())
            old = manifest.get("setting_keys", {})
            changed = sorted(n for n, k in keys.items() if n in old and old[n] != k)
            if changed:
                raise TbscaleError(f"{path}: settings {', '.join(changed)} changed since this run began; "
                                   "give the run a new name (--run-name) or a new setting name")
            manifest["setting_keys"] = {**old, **keys}
            manifest.setdefault("config_history", []).append(self.exp.model_dump(mode="json"))
        else:
            manifest = {"schema_version": SCHEMA_VERSION, "run_name": self.run_dir.name,
                        "experiment": self.exp.model_dump(mode="json"), "setting_keys": keys,
                        "created_at": datetime.now(timezone.utc).isoformat(), "invocations": []}
        manifest.update({"versions": _versions(), "git_commit": _git_commit(), "host": platform.node(),
                         "simulated_models": self.simulated,
                         "simulated_note": ("models named sim/... are tbscale's embedded simulation, not "
                                            "language models") if self.simulated else None})
        return manifest

    def _write_manifest(self, manifest: dict[str, Any]) -> None:
        tmp = self.run_dir / "manifest.json.tmp"
        tmp.write_text(json.dumps(manifest, indent=2))
        tmp.replace(self.run_dir / "manifest.json")

    async def run(self) -> Counters:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        manifest = self._check_manifest()
        invocation = {"started_at": datetime.now(timezone.utc).isoformat(), "argv": sys.argv}
        manifest["invocations"].append(invocation)
        self._write_manifest(manifest)
        self._register_sim_tasks()
        orphans = await asyncio.to_thread(dk.cleanup_orphans)
        if orphans:
            invocation["orphan_containers_removed"] = orphans

        specs = plan_trials(self.exp, self.tasks)
        done = self.index.finished_keys(retry_stop_reasons=self.retry_stop_reasons)
        todo = [s for s in specs if s.key not in done]
        self.counters.total, self.counters.skipped = len(specs), len(specs) - len(todo)
        self.on_update(self.counters, None)
        gate = asyncio.Semaphore(self.exp.concurrency)

        async def guarded(spec: TrialSpec) -> None:
            async with gate:
                self.counters.running += 1
                self.on_update(self.counters, None)
                try:
                    row = await self.run_trial(spec)
                except Exception as e:  # a bug or a broken engine: keep the run going
                    # Not indexed, so the next `tbscale run` retries it; the cause is kept.
                    self.counters.crashed += 1
                    self.crashes.append((spec, f"{type(e).__name__}: {redact(str(e))[:300]}"))
                    self._log_crash(spec, e)
                    self.on_update(self.counters, None)
                    return
                finally:
                    self.counters.running -= 1
                self.counters.done += 1
                self.counters.passed += bool(row["passed"])
                self.counters.errors += row["ending"] == "agent_error"
                self.on_update(self.counters, row)

        try:
            await asyncio.gather(*(guarded(s) for s in todo))
        finally:
            invocation["finished_at"] = datetime.now(timezone.utc).isoformat()
            invocation["trials_run"] = self.counters.done
            self._write_manifest(manifest)
        return self.counters

    def _register_sim_tasks(self) -> None:
        if not self.simulated:
            return
        from tbscale.models import sim

        for t in self.tasks:
            sim.register_task(t.instruction, t.solution_steps())

    def _log_crash(self, spec: TrialSpec, exc: Exception) -> None:
        import traceback

        path = self.run_dir / "crashes.log"
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"--- {datetime.now(timezone.utc).isoformat()} trial {spec.key} "
                    f"({spec.setting.name}, {spec.task.id}, trial {spec.trial})\n")
            f.write(redact("".join(traceback.format_exception(exc))) + "\n")

    # ---- one trial -----------------------------------------------------------------------------
    def _models(self, setting: Setting):
        from tbscale.models.llm import LLM

        def get(key: str | None, role: str) -> LLM:
            return LLM(self.exp.models[key or setting.generator], role)
        return get

    async def run_trial(self, spec: TrialSpec) -> dict[str, Any]:
        t0, started = time.monotonic(), datetime.now(timezone.utc).isoformat()
        log = EventLog(self.run_dir / spec.trajectory_relpath, trial_key=spec.key, task_id=spec.task.id,
                       setting=spec.setting.name, setting_key=spec.setting_key, trial=spec.trial, seed=spec.seed,
                       simulated=self.simulated, instruction=spec.task.instruction)
        trial_rec = AttemptRecorder(log, attempt=-1, label="trial")  # calls made by the strategy itself
        tentry = entry("trajectory", spec.setting.trajectory.name)
        tparams = tentry.params.model_validate(spec.setting.trajectory.params())
        models = self._models(spec.setting) if spec.setting.agent == "bash" else None
        strategy = tentry.factory(tparams, models=models, seed=spec.seed, prompts=self.exp.prompts)
        attempts: list[AttemptResult] = []

        async def start_attempt(stage: str, context: str | None = None, context_indices: list[int] | None = None,
                                *, prefix: Prefix | None = None, max_new_turns: int | None = None,
                                verify: bool = True) -> AttemptResult:
            index = len(attempts)
            attempts.append(None)  # reserve the index before awaiting
            rec = AttemptRecorder(log, attempt=index, label=stage)
            result = await self.run_attempt(spec, rec, index, stage, context, context_indices or [],
                                            prefix=prefix, max_new_turns=max_new_turns, verify=verify)
            attempts[index] = result
            return result

        error = None
        try:
            outcome = await strategy.run(spec.task, start_attempt, trial_rec)
        except AttemptStopped as e:  # the strategy's own model calls failed for good
            error = f"{type(e).__name__}: {e}"
            done = [a for a in attempts if a is not None]
            outcome = TrajectoryOutcome(final=done[-1], attempts=done, record={"error": error}) if done else None
        if outcome is None:
            final = AttemptResult(0, "final", "final", None, False, "agent_error", "agent_error", 0, [], error=error)
            outcome = TrajectoryOutcome(final, [final])
        row = self._row(spec, outcome, trial_rec, started, time.monotonic() - t0, error)
        log.write("end", attempt=None, turn=None, reward=row["reward"], passed=row["passed"], ending=row["ending"],
                  final_attempt=outcome.final.index, record=outcome.record)
        log.close()
        self.index.append(row)
        return row

    def _row(self, spec: TrialSpec, outcome: TrajectoryOutcome, trial_rec: AttemptRecorder, started: str,
             wall: float, error: str | None) -> dict[str, Any]:
        final, s = outcome.final, spec.setting
        gen_cfg = self.exp.models.get(s.generator) if s.generator else None
        pp = s.policy.params()
        sel_key = pp.get("selector") or pp.get("verifier") or (s.generator if s.policy.name != "baseline" else None)
        usage = merge_usage(*(a.usage for a in outcome.attempts), trial_rec.usage_dict())
        err = error or final.error
        return {
            "schema_version": SCHEMA_VERSION, "run": self.run_dir.name, "setting": s.name,
            "setting_key": spec.setting_key, "trial_key": spec.key, "task_id": spec.task.id,
            "task_format": spec.task.format, "trial": spec.trial, "seed": spec.seed, "agent": s.agent,
            "policy": s.policy.name, "policy_params": s.policy.params(), "trajectory": s.trajectory.name,
            "trajectory_params": s.trajectory.params(), "n": int(s.policy.params().get("n", 1)),
            "generator_model": gen_cfg.model if gen_cfg else None,
            "selector_model": self.exp.models[sel_key].model if sel_key in self.exp.models else None,
            "simulated": self.simulated, "reward": final.reward, "passed": bool(final.passed and final.ending == "pass"),
            "ending": final.ending, "stop_reason": final.stop_reason, "turns": final.turns,
            "tokens": usage, "cost_usd": round(sum(u.get("cost_usd", 0) for u in usage.values()), 6),
            "timing": {**final.timing, "trial_wall": round(wall, 3)},
            "n_attempts": len(outcome.attempts), "final_attempt": final.index,
            "attempts": [a.brief() for a in outcome.attempts] if len(outcome.attempts) > 1 else None,
            "strategy_record": outcome.record or None,
            "trajectory_path": spec.trajectory_relpath,
            "error": {"type": err.split(":", 1)[0], "message": err} if err else None,
            "started_at": started, "finished_at": datetime.now(timezone.utc).isoformat(),
        }

    # ---- one attempt ---------------------------------------------------------------------------
    async def run_attempt(self, spec: TrialSpec, rec: AttemptRecorder, index: int, stage: str,
                          context: str | None, context_indices: list[int], *, prefix: Prefix | None = None,
                          max_new_turns: int | None = None, verify: bool = True) -> AttemptResult:
        task, exp = spec.task, self.exp
        timing: dict[str, float] = {}
        outcome = AttemptOutcome("sandbox_error", 0, 0)
        verdict: VerifierResult | None = None
        box = None
        async with self._containers:
            t = time.monotonic()
            try:
                image, built = await asyncio.to_thread(dk.ensure_image, task, exp.environment.build_timeout_sec)
                timing["image"] = time.monotonic() - t
                t = time.monotonic()
                network = ("bridge" if task.allow_internet else "none") if exp.environment.network == "task" \
                    else exp.environment.network
                box = await asyncio.to_thread(
                    dk.Sandbox.create, image, cpus=exp.environment.cpus or task.cpus,
                    memory_mb=exp.environment.memory_mb or task.memory_mb, network=network,
                    labels={"org.tbscale.trial": spec.key, "org.tbscale.task": task.id}, workdir=task.workdir)
                timing["create"] = time.monotonic() - t
                rec.event("attempt_start", stage=stage, image=image, image_built=built, container=box.id,
                          context_attempts=context_indices, prefix_of=prefix.parent if prefix else None,
                          prefix_turns=len(prefix.actions) if prefix else 0)
                if prefix is not None:
                    t = time.monotonic()
                    await self._replay(prefix, box, rec)
                    timing["replay"] = time.monotonic() - t
                t = time.monotonic()
                outcome = await self._act(spec, rec, box, context, prefix, max_new_turns)
                timing["agent"] = time.monotonic() - t
                # Every ending but a dead sandbox or a paused prefix gets verified, so "would the
                # verifier have passed it" stays answerable; the ending still follows Table 5.
                if verify or outcome.stop_reason != "paused":
                    t = time.monotonic()
                    verdict = await asyncio.to_thread(
                        run_verifier, task, box, exp.limits.verifier_timeout_sec or task.verifier_timeout_sec)
                    timing["verify"] = time.monotonic() - t
                    rec.event("verifier", reward=verdict.reward, passed=verdict.passed, error=verdict.error,
                              output=verdict.output[-20_000:], details=verdict.details)
            except SandboxError as e:
                outcome.stop_reason, outcome.error = "sandbox_error", str(e)
            finally:
                if box is not None:
                    t = time.monotonic()
                    await asyncio.to_thread(box.remove)
                    timing["remove"] = time.monotonic() - t
        ending = classify_ending(outcome.stop_reason, verdict)
        actions = (prefix.actions if prefix else []) + outcome.actions
        if verdict is not None and verdict.error and outcome.stop_reason == "submitted":
            outcome.stop_reason = verdict.error
        rec.event("attempt_end", stage=stage, ending=ending, stop_reason=outcome.stop_reason,
                  reward=verdict.reward if verdict else None, turns=outcome.turns, error=outcome.error,
                  timing={k: round(v, 4) for k, v in timing.items()}, usage=rec.usage_dict())
        return AttemptResult(index=index, label=rec.label, stage=stage,
                             reward=verdict.reward if verdict else None,
                             passed=ending == "pass", ending=ending, stop_reason=outcome.stop_reason,
                             turns=outcome.turns, actions=actions, transcript=outcome.messages,
                             usage=rec.usage_dict(), timing={k: round(v, 4) for k, v in timing.items()},
                             error=outcome.error, context_indices=context_indices)

    async def _replay(self, prefix: Prefix, box: dk.Sandbox, rec: AttemptRecorder) -> None:
        """Rebuild a prefix's environment state by running its commands again, in order."""
        for i, command in enumerate(prefix.actions, 1):
            res = await asyncio.to_thread(box.exec, command, self.exp.limits.command_timeout_sec)
            rec.event("replay", turn=i, command=command, exit_code=res.exit_code, timed_out=res.timed_out)

    async def _act(self, spec: TrialSpec, rec: AttemptRecorder, box: dk.Sandbox, context: str | None,
                   prefix: Prefix | None = None, max_new_turns: int | None = None) -> AttemptOutcome:
        task, setting = spec.task, spec.setting
        if setting.agent == "nop":
            return AttemptOutcome("submitted", 0, 0)
        if setting.agent == "oracle":
            if task.solution_dir is None:
                return AttemptOutcome("agent_error", 0, 0, error=f"task {task.id} has no reference solution")
            await asyncio.to_thread(box.put_dir, task.solution_dir, "/solution")
            rec.turn = 1
            rec.event("action", command=task.solution_command, selected_index=0, n_candidates=1)
            res = await asyncio.to_thread(box.exec, task.solution_command, task.agent_timeout_sec)
            rec.event("observation", exit_code=res.exit_code, output=res.output, timed_out=res.timed_out,
                      duration_sec=round(res.duration_sec, 4))
            return AttemptOutcome("time_limit" if res.timed_out else "submitted", 1, 0, actions=[task.solution_command])
        models = self._models(setting)
        generator = models(setting.generator, "generator")
        pentry = entry("policy", setting.policy.name)
        tools = [BASH_TOOL] if setting.action_format == "tool" else None
        policy = pentry.factory(pentry.params.model_validate(setting.policy.params()), generator=generator,
                                models=models, seed=spec.seed, tools=tools)
        return await run_agent(task, box, policy, self.exp.limits, rec, seed=spec.seed + 1000 * rec.attempt,
                               context=context, prompts=self.exp.prompts, action_format=setting.action_format,
                               history=prefix.messages if prefix else None, max_new_turns=max_new_turns,
                               context_window=generator.context_window())


def load_rows(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "trials.jsonl"
    return list(read_jsonl(path)) if path.exists() else []


__all__ = ["Runner", "TrialSpec", "plan_trials", "load_rows"]
