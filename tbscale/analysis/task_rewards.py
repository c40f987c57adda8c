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


def reward_keys_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (setting, task) whose verifier wrote several reward keys: the key used as the
    reward and the mean of each key over the trials."""
    if "rewards" not in df.columns:
        return pd.DataFrame()
    acc: dict[tuple, dict] = {}
    has = df["rewards"].map(lambda v: isinstance(v, dict) and len(v) >= 2).astype(bool)
    for label, task, rewards, key in df.loc[has, ["label", "task_id", "rewards", "reward_key"]].itertuples(index=False):
        if not isinstance(rewards, dict) or len(rewards) < 2:
            continue
        row = acc.setdefault((label, task), {"keys": set(), "values": defaultdict(list), "trials": 0})
        row["trials"] += 1
        if isinstance(key, str):
            row["keys"].add(key)
        for k, v in rewards.items():
            row["values"][k].append(float(v))
    rows = [{"setting": label, "task": task, "trials": row["trials"],
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
    keys = reward_keys_table(ctx.df)
    if not keys.empty:
        ctx.sections.append(Section(
            "reward_keys", "Tasks whose verifier wrote several reward keys", keys,
            "reward_key: the key taken as the trial's reward (pass@1 reads it); key_means: the mean of every key "
            "the verifier wrote, over the trials."))
