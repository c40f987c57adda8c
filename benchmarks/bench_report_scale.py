"""`tbscale report` on generated runs of 1k, 10k and 100k trial lines: wall time and peak memory.

Each size is a fresh process (so its peak RSS is its own) that builds the report without plots on
a synthetic run shaped like a nightly grid: eight settings, seven single-attempt ones (baseline,
Turn-BoN at N=2/4/8, ...) and one staged setting whose trials alternate best-of-4 with RTV and PDR
(4 + 4 attempts) with their attempts and tournament records; lines average about 1.3 KB.
`--staged-heavy` makes one setting in four staged (1.65 KB lines). No trajectory files exist, so
the time is the report's own: reading, tables, sections.

Run: python benchmarks/bench_report_scale.py [SIZES...] [--staged-heavy]   (default 1000 10000 100000)
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent
OUT = HERE / "out"
STAGED_HEAVY = False

CHILD = r"""
import io, json, resource, sys, time
t0 = time.perf_counter()
from rich.console import Console
from tbscale.analysis.report import build_report
t_import = time.perf_counter() - t0
t1, c1 = time.perf_counter(), time.process_time()
ctx = build_report([sys.argv[1]], Console(file=io.StringIO(), width=200), plots=False)
t_report, c_report = time.perf_counter() - t1, time.process_time() - c1
print(json.dumps({"import_sec": t_import, "report_sec": t_report, "report_cpu_sec": c_report, "trials": len(ctx.df),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def usage(role_in: int, role_out: int, calls: int) -> dict:
    return {"input": role_in, "output": role_out, "reasoning": 0, "cached": 0, "cost_usd": 0.0, "calls": calls}


def trial_line(i: int, setting: str, task: str, trial: int, rng: random.Random) -> dict:
    passed = rng.random() < 0.55
    row = {"schema_version": 2, "run": "scale", "setting": setting, "setting_key": f"key-{setting}",
           "trial_key": f"{i:016x}", "task_id": task, "task_format": "harbor", "task_hash": "h", "trial": trial,
           "seed": rng.randrange(2**31), "agent": "bash", "policy": "baseline", "policy_params": {},
           "trajectory": "single", "trajectory_params": {}, "n": 1, "generator_model": "openai/gpt-4.1",
           "selector_model": None, "reward": float(passed), "passed": passed,
           "ending": "pass" if passed else "wrong_submission", "stop_reason": "submitted",
           "turns": rng.randint(3, 30), "tokens": {"generator": usage(12000, 900, 9)}, "cost_usd": 0.012,
           "timing": {"image": 0.003, "create": 0.25, "agent": 31.2, "verify": 0.4, "remove": 0.07,
                      "trial_wall": 32.1},
           "trajectory_path": f"trajectories/{task}/{setting}__t{trial}__{i:016x}.jsonl",
           "started_at": "2026-11-30T20:00:00+00:00", "finished_at": "2026-11-30T20:00:32+00:00"}
    if setting.startswith(("turn_bon", "verify")):
        row.update(policy="turn_bon", policy_params={"n": 4, "selector": "sel"}, n=4, selector_model="openai/gpt-4.1",
                   tokens={"generator": usage(12000, 3600, 9), "selector": usage(9000, 200, 8)},
                   selection_turns=8)
    if setting == "staged":
        row.update(staged("bon4_rtv" if i % 2 else "pdr", rng))
    return row


def tournament(entrants: list[int], rng: random.Random, tag: str) -> tuple[dict, int]:
    """An RTV record as strategies/rtv.py writes it: groups of two, three votes each."""
    rounds, alive, r = [], list(entrants), 0
    while len(alive) > 1:
        groups, survivors = [], []
        for k in range(0, len(alive), 2):
            members = alive[k:k + 2]
            winner = rng.choice(members)
            groups.append({"members": members, "bye": len(members) == 1, "votes": [winner] * 3, "winner": winner})
            survivors.append(winner)
        rounds.append({"round": r, "entrants": alive, "groups": groups, "survivors": survivors})
        alive, r = survivors, r + 1
    return {"method": "rtv", "target": 1, "entrants": list(entrants), "rounds": rounds, "survivors": alive}, alive[0]


def staged(setting: str, rng: random.Random) -> dict:
    """The attempts and strategy record of a best-of-4 (RTV) or a PDR (4 + 4 attempts) trial."""
    n_iters = 1 if setting == "bon4_rtv" else 2
    attempts, stages, final = [], [], 0
    for it in range(n_iters):
        idx = list(range(4 * it, 4 * it + 4))
        for a in idx:
            ok = rng.random() < 0.5
            attempts.append({"index": a, "label": f"iter{it}", "stage": f"iter{it}", "reward": float(ok),
                             "passed": ok, "ending": "pass" if ok else "wrong_submission",
                             "stop_reason": "submitted", "turns": rng.randint(3, 20),
                             "context": [0, 1] if it else [], "usage": {"generator": usage(9000, 600, 7)}})
        stages.append({"stage": f"iter{it}", "kind": "iteration", "attempts": idx, "summarized": True})
        last = it == n_iters - 1
        t, final = tournament(idx, rng, f"iter{it}")
        stages.append({"stage": "final" if last else "select_k", "kind": "select", "method": "rtv",
                       "target": 1, "from": idx, "selected": [final] if last else idx[:2], "tournament": t})
    row = {"trajectory": "best_of_n" if setting == "bon4_rtv" else "pdr", "n_attempts": len(attempts),
           "attempts": attempts, "final_attempt": final,
           "strategy_record": {"kind": "best_of_n" if setting == "bon4_rtv" else "pdr", "stages": stages,
                               "final": final, "summaries": {}, "stage_usage": {}}}
    return row


def make_run(root: Path, size: int) -> Path:
    run = root / "scale"
    run.mkdir(parents=True)
    rng = random.Random(size)
    # A nightly grid: seven single-attempt settings and one staged setting whose trials alternate
    # best-of-4 (RTV) and PDR; --staged-heavy makes it one staged setting in four.
    settings = (["baseline", "turn_bon_n4", "turn_bon_n4_random", "staged"] if STAGED_HEAVY else
                ["baseline", "turn_bon_n2", "turn_bon_n4", "turn_bon_n8", "turn_bon_n4_random", "verify_n4",
                 "turn_bon_n4_tool", "staged"])
    tasks = [f"task-{t:03d}" for t in range(max(10, size // 40))]
    per = size // len(settings)
    with open(run / "trials.jsonl", "w") as f:
        i = 0
        for setting in settings:
            for k in range(per):
                task, trial = tasks[k % len(tasks)], k // len(tasks)
                f.write(json.dumps(trial_line(i, setting, task, trial, rng)) + "\n")
                i += 1
    (run / "manifest.json").write_text(json.dumps({"run_name": "scale", "experiment": {"models": {}}}))
    return run


def main() -> int:
    global STAGED_HEAVY
    STAGED_HEAVY = "--staged-heavy" in sys.argv
    sizes = [int(a) for a in sys.argv[1:] if not a.startswith("--")] or [1000, 10_000, 100_000]
    results = []
    with tempfile.TemporaryDirectory(prefix="tbscale-report-scale-") as tmp:
        for size in sizes:
            run = make_run(Path(tmp) / str(size), size)
            line_kb = (run / "trials.jsonl").stat().st_size / size / 1024
            t = time.perf_counter()
            res = subprocess.run([sys.executable, "-c", CHILD, str(run)], capture_output=True, text=True)
            if res.returncode != 0:
                print(res.stderr[-2000:])
                return 1
            got = json.loads(res.stdout.strip().splitlines()[-1])
            got.update(lines=size, line_kb=round(line_kb, 2), process_sec=round(time.perf_counter() - t, 2))
            results.append(got)
            print(f"{size:>7} lines ({line_kb:.2f} KB each): report {got['report_sec']:6.2f} s "
                  f"({got['report_cpu_sec']:.2f} s CPU), "
                  f"peak RSS {got['peak_rss_mb']:6.0f} MB, {got['trials']} trials "
                  f"(imports {got['import_sec']:.2f} s)", flush=True)
    if len(results) > 1:
        a, b = results[0], results[-1]
        print(f"growth: {b['lines'] / a['lines']:.0f}x lines -> {b['report_sec'] / a['report_sec']:.1f}x time")
    OUT.mkdir(exist_ok=True)
    (OUT / "report_scale.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
