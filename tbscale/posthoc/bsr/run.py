"""Running BSR over finished trials: group and bucket the trajectories, have the judge compare
them on the schedule, fit scores, map them to refined rewards, and write the outputs."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from typing_extensions import NotRequired, TypedDict

from tbscale.errors import TbscaleError
from tbscale.types import CallResult, Completion, Usage
from tbscale.logs import dumps
from tbscale.posthoc.bsr.params import BUCKET_NAMES, FAIL, PASS, BsrParams
from tbscale.posthoc.bsr.scoring import (aux_from_scores, check_ordering, effective_amplitudes, exhaustive_pairs,
                                         fit_bradley_terry, random_aux, swiss_round_pairs, swiss_rounds)
from tbscale.posthoc.bsr.trajectories import (BehaviourStats, Step, behaviour_stats, judge_messages, load_steps,
                                              parse_judgment, summarize)
from tbscale.posthoc.pipeline import JudgementStore, record_history
from tbscale.posthoc.pipeline import judge as judge_call
from tbscale.secrets import redact
from tbscale.seeds import derive_rng, derive_seed, stable_hash
from tbscale.types.completion import UsageJSON
from tbscale.types.messages import ChatMessage
from tbscale.types.posthoc import BsrBucket, BsrInvocation, BsrManifest, Judgment, PairJudgement


class TrialRow(TypedDict, total=False):
    """A trial as BSR reads it: a row of the report's trial table (its trials.jsonl line's columns
    and the run folder it came from)."""

    trial_key: str
    run: str
    run_dir: str
    task_id: str
    setting: str
    trial: int
    passed: bool
    reward: float | None
    final_attempt: int
    trajectory_path: str | None


class Comparison(TypedDict):
    """One judged pair (comparisons.jsonl): its group, bucket and Swiss round, the trajectories
    shown as A and B, the prompt and reply, the parsed verdict and the winner's trial key."""

    group: str
    bucket: str
    round: int
    A: str
    B: str
    prompt: list[ChatMessage]
    response: str | None
    parsed: Judgment | None
    usage: UsageJSON | None
    error: str | None
    winner: NotRequired[str]


class RewardRow(TypedDict):
    """One line of bsr.jsonl: a trajectory's verifier reward and the refined one."""

    trial_key: str
    run: str | None
    task_id: str
    setting: str
    trial: int | None
    passed: bool
    reward: float
    bt_score: float
    aux_reward: float
    refined_reward: float
    bucket: str
    comparisons: int


def verifier_reward(row: TrialRow) -> float:
    """The trial's verifier reward; a missing one counts as 1.0 for a pass and 0.0 for a failure."""
    r = row.get("reward")
    try:
        r = float(r)
    except (TypeError, ValueError):
        r = math.nan
    return float(bool(row["passed"])) if math.isnan(r) else r


JudgeFn = Callable[[list[dict[str, str]], int], Any]  # async (messages, seed) -> (reply text, usage dict)


class _FunctionModel:
    """A JudgeFn seen as a model, so that a plain function (a test's scripted judge) goes through
    the same judgement call as a real model."""

    name = "function"

    def __init__(self, fn: JudgeFn):
        self.fn = fn

    async def complete(self, messages, *, n=1, seed=None, tools=None, sink=None) -> CallResult:
        reply, usage = await self.fn(messages, seed)
        used = Usage(**{k: usage.get(k, 0) for k in ("input", "output", "calls")})
        if sink is not None:
            sink.record_call("judge", self.name, used, 0.0, n=1, retries=0)
        return CallResult([Completion(text=reply)], used, 0.0)


def llm_judge(model_cfg):
    """The judge as a model (an LLM over litellm)."""
    from tbscale.models.llm import LLM

    return LLM(model_cfg, "judge")


@dataclass
class Trajectory:
    index: int
    row: TrialRow
    steps: list[Step]
    instruction: str
    stats: BehaviourStats
    summary: str
    bucket: int
    bt_score: float = 0.0
    aux: float = 0.0
    comparisons: int = 0


@dataclass
class BsrResult:
    trajectories: list[Trajectory]
    comparisons: list[Comparison]
    buckets: list[BsrBucket]  # the manifest's `buckets`
    a0: float
    a1: float
    scale: float
    errors: int = 0
    ordering_ok: bool = True


def bsr_judge_key(model, p: BsrParams) -> str:
    """Identifies the judge of a BSR run: its model, the prompts, and what the summaries show."""
    from tbscale.posthoc.bsr.trajectories import ANSWER, SYSTEM_FAIL, SYSTEM_PASS

    shown = {k: getattr(p, k) for k in ("short_obs_chars", "error_obs_chars", "head_tail_chars", "max_summary_chars",
                                        "conversion_window", "judge_tries")}
    described = model.model_dump(mode="json", exclude={"timeout_sec", "max_retries", "retry_backoff_sec",
                                                        "circuit_breaker_tries", "api_key_env"}) \
        if hasattr(model, "model_dump") else getattr(model, "name", "function")
    return stable_hash(json.dumps([described, SYSTEM_FAIL, SYSTEM_PASS, ANSWER, shown], sort_keys=True), length=12)


def judgement_store(out_dir: Path, judge_key: str) -> JudgementStore[PairJudgement]:
    """BSR's judgements, kept across runs: a rerun with the same judge and seed asks only new pairs."""
    return JudgementStore(out_dir / "judgements.jsonl", judge_key, PairJudgement,
                          lambda line: (line.seed, line.A, line.B))


async def _judge_bucket(group: str, bucket: int, members: list[Trajectory], judge: JudgeFn, p: BsrParams,
                        gate: asyncio.Semaphore, records: list[Comparison],
                        store: JudgementStore[PairJudgement] | None = None) -> tuple[list[tuple[int, int, float]], int]:
    """Run the schedule for one bucket; returns ((winner, loser, strength) over local indices, errors).
    Judgements found in `store` are reused; new ones are added to it."""
    n = len(members)
    model = judge if hasattr(judge, "complete") else _FunctionModel(judge)
    rng = derive_rng(p.seed, group, bucket, "schedule")
    results: list[tuple[int, int, float]] = []
    errors = 0

    async def compare(i: int, j: int, rnd: int) -> None:
        nonlocal errors
        # randomized presentation order, drawn per pair so it does not depend on call completion order
        flip = derive_rng(p.seed, group, bucket, members[i].row["trial_key"], members[j].row["trial_key"])
        a, b = (i, j) if flip.random() < 0.5 else (j, i)
        ta, tb = members[a], members[b]
        messages = judge_messages(ta.instruction or tb.instruction, bucket, ta.summary, tb.summary)
        key = (p.seed, ta.row["trial_key"], tb.row["trial_key"])
        if store is not None and store.has(key):
            done = store.done[key]
            parsed, reply, error, usage = done.parsed, done.response, None, done.usage.as_dict()
        else:
            async with gate:
                j_ = await judge_call(model, messages, parse_judgment, tries=p.judge_tries,
                                      seed=derive_seed(p.seed, ta.row["trial_key"], tb.row["trial_key"]))
            parsed, reply, error, usage = j_.parsed, j_.reply, j_.error, j_.usage
            if store is not None:
                store.add(seed=p.seed, A=ta.row["trial_key"], B=tb.row["trial_key"], parsed=parsed, response=reply,
                          usage=usage, error=error)
        rec: Comparison = {"group": group, "bucket": BUCKET_NAMES[bucket], "round": rnd, "A": ta.row["trial_key"],
               "B": tb.row["trial_key"], "prompt": messages, "response": reply, "parsed": parsed, "usage": usage,
               "error": error}
        if parsed is None:
            errors += 1
        else:
            winner, loser = (a, b) if parsed["winner"] == "A" else (b, a)
            results.append((winner, loser, float(parsed["strength"])))
            members[a].comparisons += 1
            members[b].comparisons += 1
            rec["winner"] = members[winner].row["trial_key"]
        records.append(rec)

    if n < 2:
        return results, 0
    if n < 5:
        await asyncio.gather(*[compare(i, j, 0) for i, j in exhaustive_pairs(n)])
        return sorted(results), errors
    played: set[frozenset[int]] = set()
    for rnd in range(swiss_rounds(n)):
        net = [0.0] * n
        for winner, loser, strength in results:
            net[winner] += strength
            net[loser] -= strength
        pairs = swiss_round_pairs(net, played, rng)
        if not pairs:
            break
        played.update(frozenset(pr) for pr in pairs)
        await asyncio.gather(*[compare(i, j, rnd) for i, j in pairs])
        results.sort()  # completion order must not matter
    return results, errors


def load_trajectories(df, p: BsrParams) -> dict[str, list[Trajectory]]:
    """Groups of trajectories (final attempts) keyed by 'setting::task' or 'task'."""
    groups: dict[str, list[Trajectory]] = {}
    for row in df.sort_values(["task_id", "setting", "trial"]).to_dict("records"):
        if not row.get("trajectory_path"):
            raise TbscaleError(f"trial {row.get('trial_key')}: no trajectory_path in trials.jsonl")
        path = Path(row["run_dir"]) / row["trajectory_path"]
        if not path.is_file():
            raise TbscaleError(f"{path}: trajectory file missing")
        steps, instruction = load_steps(path, int(row.get("final_attempt") or 0))
        stats = behaviour_stats(steps, p.conversion_window)
        key = row["task_id"] if p.group_by == "task" else f"{row['setting']}::{row['task_id']}"
        members = groups.setdefault(key, [])
        members.append(Trajectory(len(members), row, steps, instruction, stats, summarize(steps, stats, p),
                                  PASS if bool(row["passed"]) else FAIL))
    return groups


async def refine(df, p: BsrParams, judge: JudgeFn | None,
                 store: JudgementStore[PairJudgement] | None = None) -> BsrResult:
    """Judge (or draw random control rewards for) every group's buckets and map scores to rewards."""
    if p.group_by not in ("setting", "task"):
        raise TbscaleError(f"group_by must be 'setting' or 'task', not {p.group_by!r}")
    unknown = set(p.buckets) - {"fail", "pass"}
    if unknown:
        raise TbscaleError(f"unknown bucket(s) {', '.join(sorted(unknown))} (use fail, pass)")
    groups = load_trajectories(df, p)
    all_trajs = [t for g in groups.values() for t in g]
    a0, a1, scale = effective_amplitudes([verifier_reward(t.row) for t in all_trajs],
                                         [t.bucket == PASS for t in all_trajs], p.a0, p.a1, p.margin)
    amp = {FAIL: a0, PASS: a1}
    gate = asyncio.Semaphore(max(1, p.concurrency))
    records: list[Comparison] = []
    bucket_rows: list[BsrBucket] = []
    errors = 0
    jobs = []
    for gkey, members in groups.items():
        for bucket in (FAIL, PASS):
            mem = [t for t in members if t.bucket == bucket]
            if mem and BUCKET_NAMES[bucket] in p.buckets:
                jobs.append((gkey, bucket, mem))

    async def run(gkey: str, bucket: int, mem: list[Trajectory]) -> None:
        nonlocal errors
        if p.random_control:
            rng = np.random.default_rng(derive_seed(p.seed, gkey, bucket, "random"))
            aux = random_aux(len(mem), amp[bucket], rng)
            scores = np.zeros(len(mem))
            n_cmp = 0
        else:
            if judge is None:
                raise TbscaleError("a judge is needed unless random_control is set")
            for k, t in enumerate(mem):
                t.index = k
            results, errs = await _judge_bucket(gkey, bucket, mem, judge, p, gate, records, store)
            errors += errs
            scores = fit_bradley_terry(len(mem), results, p.bt_l2)
            aux = aux_from_scores(scores, amp[bucket], p.delta, p.tau)
            n_cmp = len(results)
        for t, s, a in zip(mem, scores, aux):
            t.bt_score, t.aux = float(s), float(a)
        bucket_rows.append(BsrBucket(group=gkey, bucket=BUCKET_NAMES[bucket], n=len(mem), comparisons=n_cmp,
                                     schedule="none" if len(mem) < 2 else ("exhaustive" if len(mem) < 5 else
                                                                           f"swiss x{swiss_rounds(len(mem))}"),
                                     score_spread=float(np.ptp(scores)) if len(mem) else 0.0,
                                     aux_min=float(aux.min()) if len(mem) else 0.0,
                                     aux_max=float(aux.max()) if len(mem) else 0.0))

    await asyncio.gather(*[run(*j) for j in jobs])
    records.sort(key=lambda r: (r["group"], r["bucket"], r["round"], r["A"], r["B"]))
    refined = [verifier_reward(t.row) + t.aux for t in all_trajs]
    ok = check_ordering(refined, [t.bucket == PASS for t in all_trajs])
    if not ok:  # an explicit check, not `assert`: it must hold under python -O too
        raise AssertionError("BSR invariant broken: a failing trajectory's refined reward reached a passing one's")
    bucket_rows.sort(key=lambda r: (r.group, r.bucket))
    return BsrResult(all_trajs, records, bucket_rows, a0, a1, scale, errors, ok)


# ---------------------------------------------------------------------------------------------
# Writing results
# ---------------------------------------------------------------------------------------------


def reward_rows(result: BsrResult) -> list[RewardRow]:
    return [{"trial_key": t.row["trial_key"], "run": t.row.get("run"), "task_id": t.row["task_id"],
             "setting": t.row["setting"], "trial": t.row.get("trial"), "passed": t.bucket == PASS,
             "reward": verifier_reward(t.row), "bt_score": round(t.bt_score, 6), "aux_reward": round(t.aux, 6),
             "refined_reward": round(verifier_reward(t.row) + t.aux, 6), "bucket": BUCKET_NAMES[t.bucket],
             "comparisons": t.comparisons} for t in result.trajectories]


def write_outputs(out_dir: Path, result: BsrResult, p: BsrParams, judge_model: str | None, simulated: bool,
                  runs: Sequence[Path]) -> dict[str, Path]:
    import pandas as pd

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"rewards": out_dir / "bsr.jsonl", "comparisons": out_dir / "comparisons.jsonl",
             "stats": out_dir / "stats.csv", "manifest": out_dir / "manifest.json"}
    paths["rewards"].write_text("".join(dumps(r) + "\n" for r in reward_rows(result)))
    paths["comparisons"].write_text("".join(redact(dumps(r)) + "\n" for r in result.comparisons))
    stats = pd.DataFrame([{"trial_key": t.row["trial_key"], "task_id": t.row["task_id"], "setting": t.row["setting"],
                           "passed": t.bucket == PASS, "aux_reward": round(t.aux, 6), **t.stats}
                          for t in result.trajectories])
    stats.to_csv(paths["stats"], index=False)
    judge = None if p.random_control else judge_model
    simulated_judge = simulated and not p.random_control
    note = {"simulated_note": "sim/bsr_judge is tbscale's rule-based stand-in, not a language model: its "
                              "preferences exercise the pipeline and measure nothing"} if simulated_judge else {}
    record_history(paths["manifest"], BsrManifest,
                   BsrInvocation(judge_model=judge, seed=p.seed, comparisons=len(result.comparisons),
                                 judge_errors=result.errors),
                   method="bsr", runs=[str(r) for r in runs], judge_model=judge, simulated_judge=simulated_judge,
                   params=asdict(p), seed=p.seed, effective_a0=result.a0, effective_a1=result.a1,
                   amplitude_scale=result.scale, trajectories=len(result.trajectories),
                   comparisons=len(result.comparisons), judge_errors=result.errors,
                   ordering_guarantee=result.ordering_ok, buckets=result.buckets, **note)
    return paths


