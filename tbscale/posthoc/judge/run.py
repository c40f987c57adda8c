"""`tbscale judge RUN`: runs the judge over a run's trials and stores every judgement under
<run>/judge/ (rubrics.jsonl, reward_hacking.jsonl, manifest.json). Resumable: judgements already
made by the same judge are kept and not asked again."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from tbscale.config import ModelConfig, read_yaml_mapping, validate_file
from tbscale.errors import TbscaleError
from tbscale.models.llm import LLM
from tbscale.names import writable_folder
from tbscale.posthoc.judge.rubrics import (PROMPTS, RUBRIC_SETS, _clip, parse_reward_hacking_reply,
                                           parse_rubric_reply, render_trajectory, reward_hacking_messages,
                                           rubric_messages)
from tbscale.posthoc.pipeline import JudgementStore, judge, record_history, resolve_judge_model
from tbscale.rundata import load_trials, read_trial
from tbscale.runfiles import manifest_of
from tbscale.seeds import derive_seed, hash_file, stable_hash
from tbscale.types.events import Start
from tbscale.types.posthoc import JudgeInvocation, JudgeManifest, RewardHackingLine, RubricLine, TrialJudgement

# ---------------------------------------------------------------------------------------------
# Task context: instruction, tests and reference solution
# ---------------------------------------------------------------------------------------------


@dataclass
class TaskContext:
    instruction: str
    tests: str = "(not available)"
    solution: str = "(not available)"


def _read_dir(path: Path | None, limit: int = 20_000) -> str:
    if path is None or not Path(path).is_dir():
        return "(not available)"
    parts, used = [], 0
    for f in sorted(p for p in Path(path).rglob("*") if p.is_file()):
        try:
            text = f.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        chunk = f"--- {f.relative_to(path)} ---\n{text}"
        parts.append(chunk[: max(0, limit - used)])
        used += len(chunk)
        if used >= limit:
            parts.append("[... further files left out ...]")
            break
    return "\n".join(parts) or "(empty)"


def task_dirs(run_dir: Path, tasks_path: str | None) -> list[Path]:
    """Where a run's task directories may be: the given path, else the run's manifest path (as
    written, relative to the working directory, or to the folder holding results/)."""
    cands: list[Path] = []
    if tasks_path:
        cands.append(Path(tasks_path))
    manifest = manifest_of(run_dir)
    if manifest is not None:
        tasks = manifest.experiment.get("tasks")
        path = tasks.get("path") if isinstance(tasks, dict) else None
        pulled = manifest.dataset.path if manifest.dataset else None  # a registry dataset, pulled into the cache
        if path:
            cands += [Path(path), run_dir.parent.parent / path, run_dir.parent.parent / "configs" / path]
        if pulled:
            cands.append(Path(pulled))
    return [c for c in cands if c.is_dir()]


def task_context(run_dir: Path, task_id: str, start: Start | None, tasks_path: str | None = None) -> TaskContext:
    if start is not None and start.instruction:
        return TaskContext(start.instruction)
    from tbscale.tasks import load_task

    for root in task_dirs(run_dir, tasks_path):
        d = root / task_id
        if d.is_dir():
            try:
                task = load_task(d)
            except TbscaleError:
                continue
            return TaskContext(task.instruction, _read_dir(task.tests_dir), _read_dir(task.solution_dir))
    return TaskContext("(the task's instruction was not recorded with this run; judge from the trajectory)")


# ---------------------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------------------


class JudgeConfig(BaseModel):
    """A judge YAML (configs/judge_demo.yaml): the judge model and what to judge."""

    model_config = ConfigDict(extra="forbid")
    models: dict[str, ModelConfig] = Field(default_factory=dict)
    model: str = Field(..., description="a key of `models` or of the run's models, or a litellm model string")
    samples: int = Field(2, ge=1, le=10, description="judgements per trajectory, averaged")
    rubrics: bool = True
    reward_hacking: bool = True
    reward_hacking_samples: int = Field(1, ge=1, le=10)
    settings: list[str] | None = None
    tasks: list[str] | None = None
    per_task: int | None = Field(None, ge=1, description="at most this many trials per setting and task")
    only_failed: bool = False
    concurrency: int = Field(8, ge=1)
    tries: int = Field(2, ge=1, description="calls per judgement when a reply is not valid JSON")
    max_observation_chars: int = Field(3000, gt=100)
    max_trajectory_chars: int = Field(150_000, gt=1000)
    tasks_path: str | None = Field(None, description="task directories (default: the run's manifest)")
    seed: int = 0


def load_judge_config(path: Path | None, model: str | None = None, **overrides: Any) -> JudgeConfig:
    raw: dict[str, Any] = {}
    if path is not None:
        raw = read_yaml_mapping(path)
        raw = raw.get("judge", raw) if set(raw) == {"judge"} else raw
    if model:
        raw["model"] = model
    raw.update({k: v for k, v in overrides.items() if v is not None})
    if not raw.get("model"):
        raise TbscaleError("tbscale judge: give --model (a model key or litellm model string) or --config judge.yaml")
    return validate_file(JudgeConfig, raw, path or "judge config")


def judge_key(cfg: JudgeConfig, model: ModelConfig) -> str:
    """Identifies the judge: its model, what it is shown, and its prompts' contents."""
    payload = {"model": model.model_dump(mode="json", exclude={"timeout_sec", "max_retries", "retry_backoff_sec",
                                                                "circuit_breaker_tries", "api_key_env"}),
               "limits": [cfg.max_observation_chars, cfg.max_trajectory_chars],
               "prompts": {p.name: hash_file(p) for p in sorted(PROMPTS.glob("*.txt"))}}
    return stable_hash(json.dumps(payload, sort_keys=True), length=12)


def select_trials(df: pd.DataFrame, cfg: JudgeConfig) -> pd.DataFrame:
    sub = df[~df["infra_error"]]  # a trial the harness failed shows nothing about the agent
    if cfg.settings:
        unknown = sorted(set(cfg.settings) - set(df["setting"]))
        if unknown:
            raise TbscaleError(f"judge: no setting named {', '.join(unknown)} (have: {', '.join(sorted(set(df['setting'])))})")
        sub = sub[sub["setting"].isin(cfg.settings)]
    if cfg.tasks:
        sub = sub[sub["task_id"].isin(cfg.tasks)]
    if cfg.only_failed:
        sub = sub[~sub["passed"]]
    if cfg.per_task:
        sub = sub.sort_values("trial").groupby(["setting", "task_id"], sort=False).head(cfg.per_task)
    return sub


@dataclass
class JudgeStats:
    rubric_calls: int = 0
    rh_calls: int = 0
    skipped: int = 0
    errors: int = 0
    simulated: bool = False


def _store_key(line: TrialJudgement) -> tuple:
    return line.trial_key, line.set, line.sample


async def run_judge(run_dir: Path, cfg: JudgeConfig, progress=None) -> JudgeStats:
    """Judge the trials of one run folder; results are appended to <run>/judge/*.jsonl (resumable:
    judgements already made with the same judge are kept)."""
    run_dir = Path(run_dir)
    model = resolve_judge_model(cfg.model, cfg.models, run_dir)
    key = judge_key(cfg, model)
    todo = select_trials(load_trials([run_dir]), cfg)
    jdir = writable_folder(run_dir / "judge", "judge folder")  # before any judge call is paid for
    rub_out = JudgementStore(jdir / "rubrics.jsonl", key, RubricLine, _store_key)
    rh_out = JudgementStore(jdir / "reward_hacking.jsonl", key, RewardHackingLine, _store_key)
    llm = LLM(model, "judge")
    stats = JudgeStats(simulated=model.is_simulated)
    gate = asyncio.Semaphore(cfg.concurrency)
    contexts: dict[str, TaskContext] = {}

    async def one(row) -> None:
        trace = read_trial(Path(row.run_dir) / str(row.trajectory_path))
        attempt = trace.final_attempt()
        rendered = render_trajectory(attempt, cfg.max_observation_chars, cfg.max_trajectory_chars)
        if row.task_id not in contexts:
            contexts[row.task_id] = task_context(run_dir, row.task_id, trace.start, cfg.tasks_path)
        ctx = contexts[row.task_id]
        base = {"trial_key": row.trial_key, "run": row.run, "setting": row.setting,
                "task_id": row.task_id, "trial": int(row.trial), "attempt": attempt.attempt if attempt else None,
                "passed": bool(row.passed), "model": model.model, "simulated": model.is_simulated,
                "n_turns": rendered.n_turns, "shown_turns": len(rendered.shown_turns)}
        jobs = []
        if cfg.rubrics:
            for set_name, rubrics in RUBRIC_SETS.items():
                msgs = rubric_messages(ctx.instruction, rendered, rubrics)
                for s in range(cfg.samples):
                    jobs.append((rub_out, set_name, s, msgs,
                                 lambda reply, rubrics=rubrics: parse_rubric_reply(reply, rubrics, rendered)))
        if cfg.reward_hacking and bool(row.passed):
            verifier_out = ((attempt.verifier.output if attempt.verifier else "") or "(not recorded)") if attempt else ""
            msgs = reward_hacking_messages(ctx.instruction, rendered, ctx.tests, ctx.solution,
                                           _clip(verifier_out, cfg.max_observation_chars))
            for s in range(cfg.reward_hacking_samples):
                jobs.append((rh_out, "reward_hacking", s, msgs, lambda reply: parse_reward_hacking_reply(reply, rendered)))

        async def call(store, set_name, s, msgs, parse):
            if store.has((row.trial_key, set_name, s)):
                stats.skipped += 1
                return
            async with gate:
                j = await judge(llm, msgs, parse, seed=derive_seed(cfg.seed, row.trial_key, set_name, s),
                                tries=cfg.tries)
            store.add(**base, set=set_name, sample=s, usage=j.usage, latency_sec=j.latency_sec, error=j.error,
                      raw_reply=j.reply[:4000] if j.error else None, **(j.parsed or {}))
            if store is rub_out:
                stats.rubric_calls += 1
            else:
                stats.rh_calls += 1
            stats.errors += j.error is not None
            if progress:
                progress(stats)

        await asyncio.gather(*(call(*j) for j in jobs))

    await asyncio.gather(*(one(r) for r in todo.itertuples(index=False)))
    record_history(jdir / "manifest.json", JudgeManifest,
                   JudgeInvocation(judge_key=key, model=model.model, simulated=model.is_simulated,
                                   config=cfg.model_dump(mode="json", exclude={"models"}), trials=len(todo),
                                   rubric_judgements=stats.rubric_calls, reward_hacking_judgements=stats.rh_calls,
                                   errors=stats.errors, skipped_existing=stats.skipped),
                   judge_key=key, model=model.model, simulated=model.is_simulated,
                   simulated_note=("sim/rubric_judge is tbscale's rule-based simulated judge, not a language "
                                   "model") if model.is_simulated else None)
    return stats


def resolve_model(cfg: JudgeConfig, run_dir: Path) -> ModelConfig:
    """The judge's model: a key of the judge config's models or of the run's, or a model string."""
    return resolve_judge_model(cfg.model, cfg.models, run_dir)
