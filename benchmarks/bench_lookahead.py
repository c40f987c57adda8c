"""Wall time of one lookahead turn at N=4 on Docker, as ratios measured in one run.

The generator and the selector are the loopback OpenAI-compatible server (tbscale_testing), reached
through the real path (Lookahead.decide -> LLM.complete -> litellm `openai/...` -> HTTP), each
request taking a fixed latency: G for the generator, S for the selector. The environment is a
bundled task's container on the local Docker engine, forked by the docker backend. The four
candidates are distinct commands that sleep for different times, so every one runs in its own
fork, and the slowest one's exec time E is known from its own run.

A lookahead turn should cost about G + S + E: the snapshot and the forks start while the generator
samples (prefork), the four commands run at once, and what the turn lets go of is removed after
it. Measured: the median over turns of `decide`'s wall time, its ratio to G + S + E (E measured in
each turn: the slowest candidate's `duration_sec`; target at most 1.3), and where the turn's time
went (sampling, waiting for forks, exec, selecting). A Turn-BoN turn over the same server is
measured too (it runs nothing; G + S).

Writes benchmarks/out/lookahead.json. Run: .venv/bin/python benchmarks/bench_lookahead.py
[--generator-latency 3] [--selector-latency 1] [--turns 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never download litellm's price map

from tbscale.config import Experiment  # noqa: E402
from tbscale.environments import open_backend  # noqa: E402
from tbscale.environments.owner import LABEL_RUN  # noqa: E402
from tbscale.logs import AttemptRecorder  # noqa: E402
from tbscale.models.llm import LLM  # noqa: E402
from tbscale.runner.environment import AttemptEnvironments  # noqa: E402
from tbscale.runner.forks import AttemptForks  # noqa: E402
from tbscale.runner.verification import AttemptVerification  # noqa: E402
from tbscale.strategies import entry  # noqa: E402
from tbscale.strategies.base import TurnContext  # noqa: E402
from tbscale.tasks import load_task  # noqa: E402
from tbscale_testing import LoopbackModel  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
OUT = Path(__file__).parent / "out"
TASK = REPO / "tasks" / "extract-emails"
SELECTOR_MARK = "You are the selector"
SLEEPS = (0.3, 0.6, 0.9, 1.2)


class Rec(AttemptRecorder):
    def __init__(self):
        super().__init__(None, attempt=0)
        self.events: list[tuple[str, dict]] = []

    def event(self, type, **fields):
        self.events.append((type, fields))
        super().event(type, **fields)


def responder(body: dict):
    if str(body["messages"][0].get("content", "")).startswith(SELECTOR_MARK):
        return json.dumps({"rationale": "the slowest is the most thorough", "selected_index": 0})
    n = int(body.get("n") or 1)
    return [f"THOUGHT: option {i}.\n\n```bash\nsleep {SLEEPS[i % len(SLEEPS)]}; echo option {i}; ls /app | head -3\n```"
            for i in range(n)]


def build(srv: LoopbackModel, name: str, n: int):
    configs = {"gen": srv.model_config(timeout_sec=120), "sel": srv.model_config("selector", timeout_sec=120)}

    def models(key, role):
        return LLM(configs[key or "gen"], role)

    pentry = entry("policy", name)
    return pentry.factory(pentry.params.model_validate({"n": n, "selector": "sel"}),
                          generator=models("gen", "generator"), models=models, seed=0)


def history(task) -> list[dict]:
    return [{"role": "system", "content": "You are a capable software engineer working in a Linux terminal."},
            {"role": "user", "content": f"Please solve this task:\n\n<task>\n{task.instruction}\n</task>"}]


async def lookahead_turns(srv, turns: int, n: int) -> dict:
    task = load_task(TASK)
    exp = Experiment.model_validate({"name": "bench-lookahead", "tasks": {"path": str(REPO / "tasks")},
                                     "models": {"m": {"model": "sim/policy"}},
                                     "settings": [{"name": "b", "generator": "m"}]})
    backend = open_backend(exp.environment)
    rec = Rec()
    run_dir = tempfile.mkdtemp(prefix="tbscale-bench-lookahead-")
    envs = AttemptEnvironments(exp, backend, task, rec, labels={"org.tbscale.trial": "bench-lookahead",
                                                                "org.tbscale.task": task.id, LABEL_RUN: run_dir})
    checks = AttemptVerification(envs, rec, verifier_timeout_sec=None, sweep=True, artifacts_root=Path(run_dir))
    timing: dict[str, float] = {}
    box, _, _ = await asyncio.to_thread(envs.start, task, envs.env, timing)
    forks = None
    rows = []
    try:
        await asyncio.to_thread(envs.prepare, box, envs.env, envs.env.network)
        forks = AttemptForks(envs, checks, box, task.agent, rec)
        policy = build(srv, "lookahead", n)
        for t in range(turns + 1):  # the first turn warms up (image layers, litellm)
            ctx = TurnContext(turn=3, seed=1000 + t, rec=rec, task=task, branches=forks, command_timeout_sec=60,
                              output_limit=100_000)
            t0 = time.monotonic()
            decision = await policy.decide(history(task), ctx)
            wall = time.monotonic() - t0
            await forks.drain()
            la = [f for k, f in rec.events if k == "lookahead"][-1]
            slowest = max(r["duration_sec"] for r in la["ran"])
            calls = [f for k, f in rec.events if k == "model_call"][-2:]
            if t == 0:
                continue
            assert decision.result is not None and len(la["ran"]) == n
            rows.append({"wall": wall, "slowest_exec": slowest, "sample": la["sample_sec"],
                         "fork_wait": la["fork_wait_sec"], "exec": la["exec_sec"], "select": la["select_sec"],
                         "generator_call": calls[0]["latency_sec"], "selector_call": calls[1]["latency_sec"]})
        forks_sec = [f["sec"] for k, f in rec.events if k == "fork" and f.get("op") == "fork"]
        snap_sec = [f["sec"] for k, f in rec.events if k == "fork" and f.get("op") == "snapshot"]
    finally:
        if forks is not None:
            await forks.drain()
        await asyncio.to_thread(envs.close)
        if forks is not None:
            await asyncio.to_thread(forks.close)
    return {"rows": rows, "fork_sec": forks_sec, "snapshot_sec": snap_sec}


async def turn_bon_turns(srv, turns: int, n: int) -> list[float]:
    task = load_task(TASK)
    policy = build(srv, "turn_bon", n)
    out = []
    for t in range(turns + 1):
        ctx = TurnContext(turn=3, seed=2000 + t, rec=AttemptRecorder(None, attempt=0), task=task)
        t0 = time.monotonic()
        await policy.decide(history(task), ctx)
        if t:
            out.append(time.monotonic() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--generator-latency", type=float, default=3.0)
    ap.add_argument("--selector-latency", type=float, default=1.0)
    ap.add_argument("--turns", type=int, default=5)
    ap.add_argument("--n", type=int, default=4)
    args = ap.parse_args()
    g, s = args.generator_latency, args.selector_latency

    def latency(body: dict) -> float:
        return s if str(body["messages"][0].get("content", "")).startswith(SELECTOR_MARK) else g

    with LoopbackModel(responder, latency=latency, max_lifetime_sec=1800) as srv:
        la = asyncio.run(lookahead_turns(srv, args.turns, args.n))
        tb = asyncio.run(turn_bon_turns(srv, args.turns, args.n))
    rows = la["rows"]
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    ratios = [r["wall"] / (g + s + r["slowest_exec"]) for r in rows]
    fork_sorted = sorted(la["fork_sec"])
    result = {
        "machine": f"{platform.node()} {os.cpu_count()} cpus",
        "n": args.n, "generator_latency_sec": g, "selector_latency_sec": s, "turns": len(rows),
        "lookahead_turn_sec_median": round(med["wall"], 3),
        "slowest_exec_sec_median": round(med["slowest_exec"], 3),
        "bound_sec_median": round(g + s + med["slowest_exec"], 3),
        "ratio_to_bound_median": round(statistics.median(ratios), 3),
        "ratio_to_bound_max": round(max(ratios), 3),
        "target_ratio": 1.3,
        "meets_target": statistics.median(ratios) <= 1.3,
        "parts_median_sec": {k: round(med[k], 3) for k in ("sample", "fork_wait", "exec", "select", "generator_call",
                                                            "selector_call")},
        "fork_start_sec_p50": round(fork_sorted[len(fork_sorted) // 2], 3) if fork_sorted else None,
        "fork_start_sec_p95": round(fork_sorted[min(len(fork_sorted) - 1, int(0.95 * len(fork_sorted)))], 3)
        if fork_sorted else None,
        "snapshot_sec_median": round(statistics.median(la["snapshot_sec"]), 3) if la["snapshot_sec"] else None,
        "turn_bon_turn_sec_median": round(statistics.median(tb), 3),
        "lookahead_vs_turn_bon": round(med["wall"] / statistics.median(tb), 3),
        "per_turn": [{k: round(v, 3) for k, v in r.items()} for r in rows],
    }
    OUT.mkdir(exist_ok=True)
    (OUT / "lookahead.json").write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k != "per_turn"}, indent=2))


if __name__ == "__main__":
    main()
