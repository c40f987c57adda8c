"""From an experiment to finished trials on disk.

The Runner plans every trial, skips those already in trials.jsonl (resume), hands the rest to an
executor (local asyncio pool, or a Ray cluster) and writes each finished trial's line. A trial
that crashes is logged and not indexed, so the next run retries it; a trial that ended in an
infrastructure error is indexed (flagged) and retried by the next run unless told otherwise. When
a model is plainly unavailable (models/failures.py), the run stops at once, keeping every finished
trial.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from tbscale.agent.agents import uses_model
from tbscale.config import Experiment
from tbscale.environments import open_backend
from tbscale.errors import ModelUnavailable
from tbscale.models import failures, providers
from tbscale.models.llm import prefetch_litellm
from tbscale.runner import enforcement
from tbscale.runner.executors import executor_for
from tbscale.runner.identity import task_hash
from tbscale.runner.plan import TrialSpec, plan_trials
from tbscale.runner.rundir import RunFolder, now
from tbscale.runner.trial import TrialRunner
from tbscale.secrets import redact
from tbscale.tasks import Task
from tbscale.types.manifest import DatasetRecord, Invocation, NotEnforcedTasks, RunManifest
from tbscale.types.results import TrialResult
from tbscale.types.spend import CallRecord, SpendLine

# `tbscale run` exit codes (docs/configuration.md): 0 all trials finished and none was an
# infrastructure error; 1 some trials crashed (not recorded; rerun to retry them); 3 some trials
# ended in an infrastructure error; 4 a model was unavailable and the run stopped.
EXIT_CRASHED, EXIT_INFRA_ERRORS, EXIT_MODEL_UNAVAILABLE = 1, 3, 4


@dataclass
class Counters:
    total: int = 0
    skipped: int = 0
    done: int = 0
    running: int = 0
    passed: int = 0
    errors: int = 0  # trials that ended in an infrastructure error
    crashed: int = 0
    retries: Counter = field(default_factory=Counter)  # retry causes of model calls
    started_at: float = field(default_factory=time.monotonic)


@dataclass
class PlannedSetting:
    """What `run` would do for one setting (`Runner.dry_run`): trials planned, those an earlier
    run of the folder finished (kept), and those it would run, of which `rerun` have a line
    already (an infrastructure error, run again)."""

    setting: str
    planned: int = 0
    kept: int = 0
    rerun: int = 0

    @property
    def to_run(self) -> int:
        return self.planned - self.kept


class Runner:
    def __init__(self, exp: Experiment, tasks: list[Task], run_dir: Path,
                 on_update: Callable[[Counters, TrialResult | None], None] | None = None,
                 retry_stop_reasons: set[str] | None = None, retry_infra_errors: bool = True,
                 dataset: DatasetRecord | None = None):
        self.exp, self.tasks, self.run_dir = exp, tasks, Path(run_dir)
        for task in tasks:  # this process writes every line, whichever process resolves the task's env
            task.register_host_values()
        self.dataset = dataset  # a registry dataset's name, version and pinned commits (manifest)
        self.folder = RunFolder(self.run_dir)
        self.index = self.folder.index
        # Finished trials that stopped for these reasons are run again (their new line wins).
        self.retry_stop_reasons = retry_stop_reasons or set()
        self.retry_infra_errors = retry_infra_errors
        self.crashes: list[tuple[TrialSpec, str]] = []
        self.infra_errors: list[TrialResult] = []
        self.stopped: ModelUnavailable | None = None
        self.counters = Counters()
        self.on_update = on_update or (lambda c, row: None)
        self.simulated = any(m.is_simulated for m in exp.models.values())
        self.backend = open_backend(exp.environment)
        self.trials = TrialRunner(exp, self.folder, self.backend, asyncio.Semaphore(exp.concurrency),
                                  on_call=self._on_call)
        # Where trials run: in this process, or (ray) on a cluster whose workers stream each
        # trial's lines back here, the only process that writes the run folder.
        self.executor = executor_for(exp)
        self._not_enforced: list[NotEnforcedTasks] | None = None
        self._manifest: RunManifest | None = None  # claim_folder's, for run to extend

    def not_enforced(self) -> list[NotEnforcedTasks]:
        """The tasks' keys this run does not carry out as written, grouped by key and reason (the
        manifest's `not_enforced`); computed once."""
        if self._not_enforced is None:
            self._not_enforced = enforcement.summary(self.tasks, self.exp, enforcement.capabilities(self.backend))
        return self._not_enforced

    def notice(self) -> list[str]:
        """What to say once, before the run starts: every key not enforced here, and why."""
        return enforcement.notice(self.not_enforced())

    def _on_call(self, spec: TrialSpec, record: CallRecord) -> None:
        self.folder.record_spend(SpendLine(ts=round(time.time(), 3), trial_key=spec.key, setting=spec.setting.name,
                                           task_id=spec.task.id, trial=spec.trial, **record))
        for cause in record.get("retry_causes") or []:
            self.counters.retries[cause] += 1

    @property
    def exit_code(self) -> int:
        if self.stopped is not None:
            return EXIT_MODEL_UNAVAILABLE
        if self.crashes:
            return EXIT_CRASHED
        if self.infra_errors:
            return EXIT_INFRA_ERRORS
        return 0

    async def run_trial(self, spec: TrialSpec) -> TrialResult:
        """Run one trial and index its line."""
        row = await self.executor.run_trial(spec, self.trials)
        self.index.append(row)
        return row

    def claim_folder(self) -> None:
        """Take the run folder for this run (RunLock) and check the experiment against its manifest
        (a setting whose identity changed is refused): a one-line TbscaleError otherwise. `run`
        claims it too; the CLI claims it first, so that a refusal comes before the live view starts."""
        if self.folder.lock.held:
            return
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.folder.lock.acquire()
        try:
            self._manifest = self.folder.open_for(self.exp, {t.id: task_hash(t) for t in self.tasks})
        except BaseException:
            self.folder.lock.release()
            raise

    def dry_run(self) -> list[PlannedSetting]:
        """What `run` would do, and nothing of it: the manifest's check (a setting whose identity
        changed is refused, as `run` refuses it), then the plan against the trials already
        indexed. Takes no lock and writes nothing."""
        self.folder.open_for(self.exp, {t.id: task_hash(t) for t in self.tasks})
        indexed = self.index.latest()
        done = self.index.finished_keys(retry_stop_reasons=self.retry_stop_reasons,
                                        retry_infra_errors=self.retry_infra_errors, latest=indexed)
        by_setting: dict[str, PlannedSetting] = {}
        for spec in plan_trials(self.exp, self.tasks):
            row = by_setting.setdefault(spec.setting.name, PlannedSetting(spec.setting.name))
            row.planned += 1
            if spec.key in done:
                row.kept += 1
            else:
                row.rerun += spec.key in indexed
        return list(by_setting.values())

    async def run(self) -> Counters:
        self.claim_folder()
        try:
            return await self._run()
        finally:
            self.folder.lock.release()

    async def _run(self) -> Counters:
        failures.reset_breakers()
        manifest, self._manifest = self._manifest, None  # read and checked by claim_folder
        invocation = Invocation(started_at=now(), argv=[redact(a) for a in sys.argv])
        manifest.invocations.append(invocation)
        manifest.not_enforced = self.not_enforced()
        if self.dataset is not None:
            manifest.dataset = self.dataset
        self.folder.write_manifest(manifest)
        providers.prepare([m.model for m in self.exp.models.values()], self.tasks)
        orphans = await asyncio.to_thread(self.backend.cleanup_orphans)
        if orphans:
            invocation.orphan_containers_removed = orphans

        specs = plan_trials(self.exp, self.tasks)
        done = self.index.finished_keys(retry_stop_reasons=self.retry_stop_reasons,
                                        retry_infra_errors=self.retry_infra_errors)
        todo = [s for s in specs if s.key not in done]
        self.counters.total, self.counters.skipped = len(specs), len(specs) - len(todo)
        self.backend.plan(list({s.task.id: s.task for s in todo}.values()))  # a disk budget keeps their images
        if self.exp.executor.name == "local" and any(uses_model(s.setting.agent) for s in todo):
            prefetch_litellm()  # imported while the first containers start (Ray workers import their own)
        self.on_update(self.counters, None)
        interrupted = False
        try:
            await self.executor.run(todo, self._run_one)
        except (KeyboardInterrupt, asyncio.CancelledError):
            interrupted = True
            raise
        finally:
            invocation.update(finished_at=now(), trials_run=self.counters.done, crashed=self.counters.crashed,
                              infra_errors=len(self.infra_errors), **self.executor.summary())
            # Why the run ended before its plan did, for the report to say.
            if self.stopped is not None:
                invocation.update(stopped=str(self.stopped), stop_kind="model_unavailable")
            elif interrupted:
                invocation.update(stopped="interrupted (Ctrl-C or SIGTERM) before every trial had run",
                                  stop_kind="interrupted")
            self.folder.write_manifest(manifest)
        return self.counters

    async def _run_one(self, spec: TrialSpec) -> None:
        """One trial under the executor: counted, indexed, or logged as a crash. A ModelUnavailable
        propagates: the executor cancels the rest and the run stops."""
        self.counters.running += 1
        self.on_update(self.counters, None)
        try:
            row = await self.run_trial(spec)
        except ModelUnavailable as e:
            self.stopped = self.stopped or e
            raise
        except Exception as e:  # a bug or a broken engine: keep the run going
            # Not indexed, so the next `tbscale run` retries it; the cause is kept.
            self.counters.crashed += 1
            self.crashes.append((spec, f"{type(e).__name__}: {redact(str(e))[:300]}"))
            self.folder.log_crash(spec, e)
            self.on_update(self.counters, None)
            return
        finally:
            self.counters.running -= 1
        self.counters.done += 1
        self.counters.passed += bool(row.passed)
        if row.infra_error:
            self.counters.errors += 1
            self.infra_errors.append(row)
        self.on_update(self.counters, row)


def load_rows(run_dir: Path) -> list[TrialResult]:
    """The readable trial lines of a run folder, in file order."""
    from tbscale.runfiles import read_trials

    path = Path(run_dir) / "trials.jsonl"
    return list(read_trials(path)) if path.exists() else []
