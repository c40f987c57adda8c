"""Wall time of one Turn-BoN turn, as ratios measured in one run (shared machines are noisy).

A turn at N=8 runs against the loopback OpenAI-compatible server (tbscale.testing.LoopbackModel),
through the real path: TurnBoN.decide -> LLM.complete -> litellm `openai/...` -> HTTP. Every
request, generator or selector, takes a fixed latency L (default 0.2 s) in the server. A turn
ought to cost about one generator call plus one selector call (2 L), whatever N is; a harness that
sampled the N candidates one after another would pay (N + 1) L.

Measured, for the sampling modes "n" (one request with n=8) and "parallel" (8 concurrent
requests): the median wall time of `policy.decide(...)` over several turns, its ratio to 2 L, to
the measured wall time of one single-sample call, and to (N + 1) L. A turn driven sequentially
(N single calls one after another, then the selector) is measured too, as the reference.

Writes benchmarks/out/turn_bon.json. Run: .venv/bin/python benchmarks/bench_turn_bon.py [--n 8]
[--latency 0.2] [--turns 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never download litellm's price map

from tbscale.types.actions import parse_action  # noqa: E402
from tbscale.logs import AttemptRecorder  # noqa: E402
from tbscale.models.llm import LLM
from tbscale.types import Completion  # noqa: E402
from tbscale.strategies import entry  # noqa: E402
from tbscale.strategies.base import TurnContext  # noqa: E402
from tbscale.strategies.turn_bon import selector_messages  # noqa: E402
from tbscale.tasks import Task  # noqa: E402
from tbscale_testing import LoopbackModel  # noqa: E402

OUT = Path(__file__).parent / "out"
TASK = Task(id="bench", format="harbor", instruction="Count the lines of every .log file under /var/log.")
SELECTOR_MARK = "You are the selector"


def history(turns: int = 3) -> list[dict]:
    """A short agent history: system prompt, task, and a few executed turns."""
    msgs = [{"role": "system", "content": "You are a capable software engineer working in a Linux terminal."},
            {"role": "user", "content": f"Please solve this task:\n\n<task>\n{TASK.instruction}\n</task>"}]
    for t in range(turns):
        msgs.append({"role": "assistant", "content": f"THOUGHT: look.\n\n```bash\nls -la /var/log | head -{t + 5}\n```"})
        msgs.append({"role": "user", "content": f"<returncode>0</returncode>\n<output>\n{'x.log ' * 40}\n</output>"})
    return msgs


def responder(body: dict):
    if str(body["messages"][0].get("content", "")).startswith(SELECTOR_MARK):
        return json.dumps({"rationale": "the first counts the lines", "selected_index": 0})
    n = int(body.get("n") or 1)
    return [f"THOUGHT: option {i}.\n\n```bash\nfind /var/log -name '*.log' | xargs wc -l | tail -{i + 1}\n```"
            for i in range(n)]


def build_policy(srv: LoopbackModel, n: int, sampling: str):
    """TurnBoN as Runner._act builds it."""
    configs = {"gen": srv.model_config(sampling=sampling, timeout_sec=60),
               "sel": srv.model_config("selector", timeout_sec=60)}

    def models(key, role):
        return LLM(configs[key or "gen"], role)

    pentry = entry("policy", "turn_bon")
    return pentry.factory(pentry.params.model_validate({"n": n, "selector": "sel"}),
                          generator=models("gen", "generator"), models=models, seed=0)


async def timed_turns(policy, turns: int, seed0: int) -> list[float]:
    out = []
    for t in range(turns):
        ctx = TurnContext(turn=4, seed=seed0 + t, rec=AttemptRecorder(None, attempt=0), task=TASK)
        t0 = time.perf_counter()
        decision = await policy.decide(history(), ctx)
        out.append(time.perf_counter() - t0)
        assert decision.n_candidates == policy.p.n and not decision.selector_failed
    return out


async def sequential_turns(srv: LoopbackModel, n: int, turns: int) -> list[float]:
    """What a harness without batching pays: N single-sample calls in a row, then the selector."""
    gen, sel = LLM(srv.model_config(timeout_sec=60), "generator"), LLM(srv.model_config("selector"), "selector")
    prompt = selector_messages(history(), [parse_action_text(f"```bash\nls {i}\n```") for i in range(n)], SELECTOR_MARK)
    out = []
    for t in range(turns):
        t0 = time.perf_counter()
        for i in range(n):
            await gen.complete(history(), n=1, seed=t * 100 + i)
        await sel.complete(prompt, n=1)
        out.append(time.perf_counter() - t0)
    return out


def parse_action_text(text: str):
    return parse_action(Completion(text=text))


async def single_calls(srv: LoopbackModel, reps: int) -> list[float]:
    llm = LLM(srv.model_config(timeout_sec=60), "generator")
    out = []
    for i in range(reps):
        t0 = time.perf_counter()
        await llm.complete(history(), n=1, seed=i)
        out.append(time.perf_counter() - t0)
    return out


async def main_async(args) -> dict:
    n, L = args.n, args.latency
    with LoopbackModel(responder, latency=L) as srv:
        # Warm-up (not timed): litellm's first call builds its HTTP client and caches.
        await timed_turns(build_policy(srv, n, "n"), 1, 10_000)
        await single_calls(srv, 1)
        single = await single_calls(srv, args.turns)
        modes = {}
        for sampling in ("n", "parallel"):
            policy = build_policy(srv, n, sampling)
            srv.reset()
            walls = await timed_turns(policy, args.turns, 0)
            reqs = srv.requests
            gen = [r for r in reqs if not str(r.messages[0].get("content", "")).startswith(SELECTOR_MARK)]
            modes[sampling] = {"walls": walls, "requests_per_turn": len(reqs) / args.turns,
                               "generator_requests_per_turn": len(gen) / args.turns,
                               "max_overlap": srv.max_overlap(gen)}
        srv.reset()
        seq = await sequential_turns(srv, n, args.seq_turns)

    single_med = statistics.median(single)
    rows = []
    for name, m in [("turn_bon n=N (one request)", modes["n"]), ("turn_bon parallel (N requests)", modes["parallel"]),
                    ("sequential harness (measured)", {"walls": seq, "requests_per_turn": n + 1,
                                                       "generator_requests_per_turn": n, "max_overlap": 1})]:
        med = statistics.median(m["walls"])
        rows.append({"mode": name, "median_wall_sec": round(med, 4), "min_wall_sec": round(min(m["walls"]), 4),
                     "max_wall_sec": round(max(m["walls"]), 4), "turns": len(m["walls"]),
                     "ratio_to_gen_plus_sel_latency": round(med / (2 * L), 3),
                     "ratio_to_single_call": round(med / single_med, 3),
                     "ratio_to_sequential_(N+1)L": round(med / ((n + 1) * L), 3),
                     "requests_per_turn": m["requests_per_turn"],
                     "generator_requests_per_turn": m["generator_requests_per_turn"],
                     "max_concurrent_generator_requests": m["max_overlap"]})
    return {"benchmark": "turn_bon_turn_wall_time", "n": n, "latency_sec": L,
            "gen_plus_sel_latency_sec": 2 * L, "sequential_harness_sec": round((n + 1) * L, 4),
            "single_call_median_sec": round(single_med, 4), "single_call_samples": [round(x, 4) for x in single],
            "rows": rows, "python": platform.python_version(), "host": platform.node(),
            "cpus": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--latency", type=float, default=0.2, help="seconds per request, in the server")
    ap.add_argument("--turns", type=int, default=5, help="timed turns per sampling mode")
    ap.add_argument("--seq-turns", type=int, default=2, help="timed turns of the sequential reference")
    args = ap.parse_args()
    result = asyncio.run(main_async(args))
    n, L = result["n"], result["latency_sec"]
    print(f"Turn-BoN turn at N={n}, latency L={L} s per request (generator and selector); "
          f"single call median {result['single_call_median_sec']:.3f} s; load avg {result['load_avg_1m']}")
    head = f"{'mode':32} {'median s':>9} {'/ 2L':>7} {'/ 1 call':>9} {f'/ {n + 1}L':>7} {'req/turn':>9} {'overlap':>8}"
    print(head)
    print("-" * len(head))
    for r in result["rows"]:
        print(f"{r['mode']:32} {r['median_wall_sec']:9.3f} {r['ratio_to_gen_plus_sel_latency']:7.2f} "
              f"{r['ratio_to_single_call']:9.2f} {r['ratio_to_sequential_(N+1)L']:7.2f} "
              f"{r['requests_per_turn']:9.1f} {r['max_concurrent_generator_requests']:8d}")
    print(f"reference: 2L = {2 * L:.3f} s (one generator + one selector call); "
          f"sequential harness (N+1)L = {(n + 1) * L:.3f} s")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "turn_bon.json").write_text(json.dumps(result, indent=2))
    print(f"wrote {OUT / 'turn_bon.json'}")


if __name__ == "__main__":
    main()
