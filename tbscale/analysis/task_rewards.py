"""What a task's verifier said beyond one reward: the steps of multi-step tasks (each step's
reward, how many attempts reached it and passed its gate) and reward.json files with several keys
(which key is the reward, and the mean of every key). Both sections appear only when a run has
such tasks; they read the scored trials, as pass@1 does."""

from __future__ import annotations

import math
from collections import defaultdict

import pandas as pd

from tbscale.analysis.context import ReportContext, Section


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def steps_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (setting, task, step), steps in task order."""
    if "steps" not in df.columns:
        return pd.DataFrame()
    acc: dict[tuple, dict] = {}
    has = df["steps"].map(lambda v: isinstance(v, list)).astype(bool)  # most runs: none; skip the rest unread
    for label, task, steps in df.loc[has, ["label", "task_id", "steps"]].itertuples(index=False):
        if not isinstance(steps, list):
            continue
        for index, step in enumerate(steps, 1):
            row = acc.setdefault((label, task, index), {"name": step.get("name"), "rewards": [], "attempts": 0,
                                                        "reached": 0, "passed": 0})
            row["attempts"] += 1
            if not step.get("skipped"):
                row["reached"] += 1
                row["passed"] += bool(step.get("passed"))
                if step.get("reward") is not None:
                    row["rewards"].append(float(step["reward"]))
    rows = [{"setting": label, "task": task, "step": f"{index}. {row['name']}", "trials": row["attempts"],
             "reached": row["reached"] / row["attempts"], "passed": row["passed"] / row["attempts"],
             "mean_reward": _mean(row["rewards"])}
            for (label, task, index), row in sorted(acc.items(), key=lambda kv: (kv[0][1], kv[0][0], kv[0][2]))]
    return pd.DataFrame(rows)


def reward_keys_table(df: pd.DataFrame, every: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (setting, task) whose verifier wrote several reward keys: the key used as the
    reward and the mean of each key over the trials. Besides the scored trials (`df`), the trials
    of `every` that got no verdict only because their reward.json names no reward key
    (`reward_missing` with several keys, no tampering recorded) are averaged too, and counted as
    `no_verdict`: Harbor's mean metric reports every key of such files, and pass@1 cannot."""
    if "rewards" not in df.columns:
        return pd.DataFrame()
    frames = [df.assign(_no_verdict=False)]
    if every is not None and {"rewards", "stop_reason", "infra_error"} <= set(every.columns):
        untouched = ~every["tampered"] if "tampered" in every.columns else True
        # infra errors only: a trial scored despite its reward_missing (the agent's doing) is in `df`
        unkeyed = every[every["infra_error"] & (every["stop_reason"] == "reward_missing") & untouched]
        frames.append(unkeyed.assign(_no_verdict=True))
    trials = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    acc: dict[tuple, dict] = {}
    has = trials["rewards"].map(lambda v: isinstance(v, dict) and len(v) >= 2).astype(bool)
    for label, task, rewards, key, no_verdict in trials.loc[has, ["label", "task_id", "rewards", "reward_key",
                                                                  "_no_verdict"]].itertuples(index=False):
        if not isinstance(rewards, dict) or len(rewards) < 2:
            continue
        row = acc.setdefault((label, task), {"keys": set(), "values": defaultdict(list), "trials": 0, "no_verdict": 0})
        row["trials"] += 1
        row["no_verdict"] += bool(no_verdict)
        if isinstance(key, str) and not no_verdict:
            row["keys"].add(key)
        for k, v in rewards.items():
            row["values"][k].append(float(v))
    rows = [{"setting": label, "task": task, "trials": row["trials"], "no_verdict": row["no_verdict"],
             "reward_key": ", ".join(sorted(row["keys"])) or "-",
             "key_means": ", ".join(f"{k}={_mean(v):.3g}" for k, v in sorted(row["values"].items()))}
            for (label, task), row in sorted(acc.items(), key=lambda kv: (kv[0][1], kv[0][0]))]
    return pd.DataFrame(rows)


def task_reward_sections(ctx: ReportContext) -> None:
    steps = steps_table(ctx.df)
    if not steps.empty:
        ctx.sections.append(Section(
            "steps", "Multi-step tasks: each step", steps,
            "One row per setting, task and step (in the task's order). reached: share of trials that started the "
            "step (a step whose earlier step failed its min_reward gate, or gave no verdict, is skipped); passed: "
            "share of trials whose step verifier passed; mean_reward: over the trials that reached the step and "
            "got a reward. The trial's own reward is the task's multi_step_reward_strategy (mean or final).",
            ("reached", "passed")))
    keys = reward_keys_table(ctx.df, ctx.all_trials)
    if not keys.empty:
        ctx.sections.append(Section(
            "reward_keys", "Tasks whose verifier wrote several reward keys", keys,
            "reward_key: the key taken as the trial's reward (pass@1 reads it); key_means: the mean of every key "
            "the verifier wrote, over the trials. no_verdict: trials whose reward.json has several keys and none "
            "is the reward key (`reward`, or the config's tasks.reward_key): they are verifier errors "
            "(reward_missing), left out of pass@1, and their keys are still averaged here, as Harbor's mean "
            "metric averages every key."))
