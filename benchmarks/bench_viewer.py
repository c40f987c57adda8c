"""The trajectory viewer at scale: `tbscale view` on a synthetic run of 10,000 trials, and the
time headless Chromium takes to render its pages from file://.

The run is written by this script (docs/formats.md): --tasks tasks x 5 settings (a baseline,
Turn-BoN at N=4 with a listwise selector, a pairwise verifier at N=4, best-of-4 with RTV, PDR)
x --trials trials, each trajectory a few short turns. Measured:

- build: wall time of `tbscale view RUN` as a subprocess (interpreter start-up included), from
  scratch, and again with nothing changed (the incremental path: every trial checked, none
  rewritten), and the ratio of the first to the time it takes to read every trajectory file's
  bytes (the floor any builder pays);
- data: bytes of index.js (the whole index, columnar) and of the trial files;
- browser: Chromium loads index.html from file:// and the viewer records `performance.now()`
  (milliseconds since navigation start) in the DOM once the route is rendered, read back with
  --dump-dom; for the index (first page of 100 rows of 10,000), the index filtered and sorted
  by tokens, one Turn-BoN trial page and one PDR trial page (also: when the page's scripts,
  index.js included, had loaded and began to run); and, as the reference, a page that writes
  `performance.now()` at once. Medians of --runs loads. The ratio to the reference is the cost
  of the viewer itself.

Writes benchmarks/out/viewer.json. Run: .venv/bin/python benchmarks/bench_viewer.py
[--tasks 250 --trials 8 --runs 3 --keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OUT = Path(__file__).parent / "out"
SETTINGS = [("baseline", "baseline", 1, "single"), ("turn_bon_n4", "turn_bon", 4, "single"),
            ("pairwise_n4", "verify_pairwise", 4, "single"), ("bon4_rtv", "baseline", 1, "best_of_n"),
            ("pdr_rtv", "baseline", 1, "pdr")]
ENDINGS = ["pass", "wrong_submission", "time_limit", "out_of_context", "agent_error"]


def tbscale_executable() -> str:
    beside = Path(sys.executable).parent / "tbscale"
    if beside.exists():
        return str(beside)
    found = shutil.which("tbscale")
    if not found:
        sys.exit("tbscale is not installed in this environment (pip install -e .)")
    return found


def browser() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


# ---- the synthetic run ------------------------------------------------------------------------------
def _ev(lines: list[str], typ: str, attempt, turn, **fields) -> None:
    lines.append(json.dumps({"type": typ, "ts": 1.7e9, "attempt": attempt, "turn": turn, **fields}))


def _usage(i: int, o: int) -> dict:
    return {"input": i, "output": o, "reasoning": 0, "cached": 0, "cost_usd": 0.0, "calls": 1}


def _attempt(lines: list[str], a: int, stage: str, n: int, policy: str, turns: int, passed: bool, rnd) -> None:
    _ev(lines, "attempt_start", a, None, stage=stage, image="img", image_built=False, container="c", context_attempts=[])
    for t in range(1, turns + 1):
        _ev(lines, "model_call", a, t, role="generator", model="sim/policy", n=n, usage=_usage(600 + 80 * t, 30 * n),
            latency_sec=0.05, retries=0, error=None)
        cands = [{"text": f"THOUGHT: step {t}, option {i}.\n\n```bash\nls -la /app/dir{t}_{i}\n```", "reasoning": None,
                  "tool_calls": [], "finish_reason": "stop", "output_tokens": 25, "reasoning_tokens": 0,
                  "command": f"ls -la /app/dir{t}_{i}", "runnable": True, "submission": False, "parse_error": None}
                 for i in range(n)]
        _ev(lines, "candidates", a, t, candidates=cands)
        pick = rnd.randrange(n)
        if policy == "turn_bon":
            _ev(lines, "model_call", a, t, role="selector", model="sim/selector", n=1, usage=_usage(900, 22),
                latency_sec=0.03, retries=0, error=None)
            _ev(lines, "selection", a, t, index=pick, rationale=f"Candidate {pick}: it makes progress.",
                selector_failed=False, tries=1, method="listwise", model="sim/selector")
        elif policy == "verify_pairwise":
            comps = []
            for x in range(n):
                for y in range(x + 1, n):
                    m = round(rnd.uniform(-1, 1), 4)
                    comps.append([x, y, m])
                    _ev(lines, "verifier_call", a, t, role="verifier", method="pairwise", model="sim/verifier",
                        parsed={"score_a": 6, "score_b": 4, "preference": "A", "rationale": "A looks further."},
                        pair=[x, y], margin=m, error=None, calls=1,
                        messages=[{"role": "user", "content": "compare A and B " * 40}], response='{"preference": "A"}')
            _ev(lines, "selection", a, t, index=pick, rationale="highest margin-weighted win rate",
                selector_failed=False, method="pairwise", model="sim/verifier", scores=[0.5] * n, tied=[pick],
                judged=list(range(n)), same_as={}, comparisons=comps, pairs_asked=len(comps))
        _ev(lines, "action", a, t, command=cands[pick]["command"], selected_index=pick, n_candidates=n)
        _ev(lines, "observation", a, t, exit_code=0, output="\n".join(f"-rw-r--r-- file{k}" for k in range(8)),
            timed_out=False, duration_sec=0.1)
    _ev(lines, "verifier", a, turns, reward=1.0 if passed else 0.0, passed=passed, error=None,
        output="PASS\n" if passed else "FAIL\n", details={})
    _ev(lines, "attempt_end", a, turns, stage=stage, ending="pass" if passed else "wrong_submission",
        stop_reason="submitted", reward=1.0 if passed else 0.0, turns=turns, error=None, timing={}, usage={})


def _bracket(stage: str, entrants: list[int], target: int, rnd) -> dict:
    rounds, cur, r = [], list(entrants), 0
    while len(cur) > target:
        r += 1
        groups = []
        for g in range(0, len(cur), 2):
            members = cur[g:g + 2]
            if len(members) == 1:
                groups.append({"members": members, "bye": True, "winner": members[0]})
                continue
            votes = [{"choice": rnd.choice(members), "order": members} for _ in range(3)]
            counts = {str(m): sum(v["choice"] == m for v in votes) for m in members}
            winner = max(members, key=lambda m: counts[str(m)])
            groups.append({"members": members, "bye": False, "votes": votes, "counts": counts, "winner": winner,
                           "tie_broken": False, "invalid_votes": 0})
        survivors = [g["winner"] for g in groups]
        rounds.append({"round": r, "entrants": cur, "groups": groups, "survivors": survivors})
        cur = survivors
    return {"stage": stage, "kind": "select", "method": "rtv", "target": target, "from": entrants, "selected": cur,
            "tournament": {"method": "rtv", "target": target, "group_size": 2, "entrants": entrants, "rounds": rounds,
                           "survivors": cur}}


def write_run(run: Path, n_tasks: int, n_trials: int) -> int:
    import random

    rnd = random.Random(0)
    run.mkdir(parents=True, exist_ok=True)
    (run / "manifest.json").write_text(json.dumps({"run_name": run.name, "simulated_models": True}))
    count = 0
    with open(run / "trials.jsonl", "w") as index:
        for ti in range(n_tasks):
            task = f"task-{ti:04d}"
            (run / "trajectories" / task).mkdir(parents=True, exist_ok=True)
            for setting, policy, n, trajectory in SETTINGS:
                for trial in range(n_trials):
                    key = f"{count:016x}"
                    count += 1
                    lines: list[str] = []
                    _ev(lines, "start", None, None, schema_version=1, trial_key=key, task_id=task, setting=setting,
                        trial=trial, seed=trial, simulated=True, instruction=f"Do {task}.")
                    n_att = {"single": 1, "best_of_n": 4, "pdr": 8}[trajectory]
                    results = [rnd.random() < 0.6 for _ in range(n_att)]
                    for a in range(n_att):
                        stage = "final" if trajectory == "single" else ("iter0" if a < 4 else "iter1")
                        _attempt(lines, a, stage, n, policy, rnd.randint(2, 4), results[a], rnd)
                    record, final = None, 0
                    if trajectory == "best_of_n":
                        sel = _bracket("final", [0, 1, 2, 3], 1, rnd)
                        record = {"kind": "best_of_n", "stages": [{"stage": "iter0", "kind": "iteration",
                                                                   "attempts": [0, 1, 2, 3]}, sel]}
                        final = sel["selected"][0]
                    elif trajectory == "pdr":
                        k = _bracket("select_k", [0, 1, 2, 3], 2, rnd)
                        sel = _bracket("final", [4, 5, 6, 7], 1, rnd)
                        record = {"kind": "pdr", "stages": [{"stage": "iter0", "kind": "iteration", "attempts": [0, 1, 2, 3]},
                                                            k, {"stage": "iter1", "kind": "iteration", "attempts": [4, 5, 6, 7]},
                                                            sel]}
                        final = sel["selected"][0]
                    passed = results[final]
                    ending = "pass" if passed else rnd.choice(ENDINGS[1:])
                    _ev(lines, "end", None, None, reward=float(passed), passed=passed, ending=ending,
                        final_attempt=final, record=record)
                    rel = f"trajectories/{task}/{setting}__t{trial}__{key}.jsonl"
                    (run / rel).write_text("\n".join(lines) + "\n")
                    out_tok = rnd.randint(200, 4000)
                    row = {"schema_version": 1, "run": run.name, "setting": setting, "setting_key": setting[:12],
                           "trial_key": key, "task_id": task, "task_format": "harbor", "trial": trial, "seed": trial,
                           "agent": "bash", "policy": policy, "policy_params": {"n": n} if n > 1 else {}, "n": n,
                           "trajectory": trajectory, "trajectory_params": {}, "generator_model": "sim/policy",
                           "selector_model": None, "simulated": True, "reward": float(passed), "passed": passed,
                           "ending": ending, "stop_reason": "submitted", "turns": rnd.randint(2, 4),
                           "tokens": {"generator": {"input": 20 * out_tok, "output": out_tok, "reasoning": 0,
                                                    "cached": 0, "cost_usd": 0.0, "calls": 4}},
                           "cost_usd": round(out_tok * 1e-6, 6), "timing": {"trial_wall": round(rnd.uniform(2, 90), 2)},
                           "n_attempts": n_att, "final_attempt": final,
                           "attempts": None if n_att == 1 else [{"index": a, "stage": "iter0" if a < 4 else "iter1",
                                                                 "passed": results[a]} for a in range(n_att)],
                           "strategy_record": record, "trajectory_path": rel, "error": None,
                           "started_at": "2026-01-01T00:00:00+00:00", "finished_at": "2026-01-01T00:00:10+00:00"}
                    index.write(json.dumps(row) + "\n")
    return count


# ---- measuring -----------------------------------------------------------------------------------------
def timed_build(run: Path) -> tuple[float, str]:
    t0 = time.perf_counter()
    res = subprocess.run([tbscale_executable(), "view", str(run)], capture_output=True, text=True, timeout=1800)
    elapsed = time.perf_counter() - t0
    if res.returncode != 0:
        sys.exit(f"tbscale view failed ({res.returncode}): {res.stderr[-800:]}")
    return elapsed, res.stderr.strip().splitlines()[-1] if res.stderr.strip() else ""


def read_all(run: Path) -> float:
    t0 = time.perf_counter()
    for p in (run / "trajectories").rglob("*.jsonl"):
        p.read_bytes()
    (run / "trials.jsonl").read_bytes()
    return time.perf_counter() - t0


def chromium_ms(url: str) -> tuple[float, float | None]:
    """(ms from navigation start to the rendered view, ms to when the page's scripts began to run)."""
    profile = tempfile.mkdtemp(prefix="tbscale-bench-chromium-")
    try:
        res = subprocess.run([browser(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                              "--disable-background-networking", "--disable-component-update", "--disable-sync",
                              f"--user-data-dir={profile}", "--virtual-time-budget=20000", "--dump-dom", url],
                             capture_output=True, text=True, timeout=300)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    m = re.search(r'data-rendered-ms="([0-9.]+)"', res.stdout)
    if not m:
        sys.exit(f"no data-rendered-ms in the page at {url}: {res.stdout[:500]!r} {res.stderr[-500:]!r}")
    start = re.search(r'data-start-ms="([0-9.]+)"', res.stdout)
    return float(m.group(1)), float(start.group(1)) if start else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=250)
    ap.add_argument("--trials", type=int, default=8, help="trials per task and setting (5 settings)")
    ap.add_argument("--runs", type=int, default=3, help="browser loads per page (median)")
    ap.add_argument("--keep", type=Path, default=None, help="write the synthetic run here and keep it")
    args = ap.parse_args()

    tmp = None
    if args.keep:
        if args.keep.exists():
            shutil.rmtree(args.keep)
        run = args.keep
    else:
        tmp = Path(tempfile.mkdtemp(prefix="tbscale-bench-viewer-"))
        run = tmp / "bench-viewer"
    try:
        t0 = time.perf_counter()
        n = write_run(run, args.tasks, args.trials)
        gen_s = time.perf_counter() - t0
        traj_bytes = sum(p.stat().st_size for p in (run / "trajectories").rglob("*.jsonl"))
        read_s = read_all(run)
        cold_s, cold_msg = timed_build(run)
        warm_s, warm_msg = timed_build(run)
        view = run / "view"
        index_bytes = (view / "index.js").stat().st_size
        trial_files = list((view / "trials").glob("*.js"))
        trial_bytes = sum(p.stat().st_size for p in trial_files)
        results = {"trials": n, "generate_s": round(gen_s, 2), "trajectory_bytes": traj_bytes,
                   "read_all_trajectories_s": round(read_s, 3), "build_cold_s": round(cold_s, 2),
                   "build_unchanged_s": round(warm_s, 2), "build_cold_vs_read_all": round(cold_s / read_s, 1),
                   "build_cold_ms_per_trial": round(1000 * cold_s / n, 3), "index_js_bytes": index_bytes,
                   "index_bytes_per_trial": round(index_bytes / n, 1), "trial_files": len(trial_files),
                   "trial_js_bytes_total": trial_bytes, "trial_js_bytes_mean": round(trial_bytes / max(1, len(trial_files))),
                   "build_messages": [cold_msg, warm_msg], "cpus": os.cpu_count(),
                   "load_avg": round(os.getloadavg()[0], 2)}
        print(f"synthetic run: {n:,} trials, {traj_bytes / 1e6:.1f} MB of trajectories (written in {gen_s:.1f} s)")
        print(f"{'measure':50} {'value':>16}")
        rows = [("tbscale view, from scratch", f"{cold_s:.2f} s"),
                ("  per trial", f"{1000 * cold_s / n:.3f} ms"),
                ("  vs reading every trajectory's bytes", f"{cold_s / read_s:.1f}x ({read_s:.2f} s)"),
                ("tbscale view, nothing changed", f"{warm_s:.2f} s"),
                ("index.js", f"{index_bytes:,} B"),
                ("  per trial", f"{index_bytes / n:.1f} B"),
                ("trial files (mean)", f"{trial_bytes / max(1, len(trial_files)):,.0f} B")]
        if browser() is None:
            print("headless Chromium not found: browser timings skipped")
            results["browser"] = None
        else:
            ref = Path(tempfile.mkdtemp(prefix="tbscale-bench-ref-")) / "ref.html"
            ref.write_text('<!DOCTYPE html><html><body><main id="app"></main><script>document.getElementById("app")'
                           '.setAttribute("data-rendered-ms", performance.now().toFixed(1))</script></body></html>')
            base = (view / "index.html").resolve().as_uri()
            keys = json.loads((view / "index.js").read_text()[len("window.TBV_INDEX="):-2])["cols"]["key"]
            pages = {"reference (empty page)": ref.resolve().as_uri(),
                     "index, first 100 of all trials": base + "#/",
                     "index, filtered + sorted by tokens": base + "#/?setting=turn_bon_n4&passed=0&sort=tokens&dir=desc",
                     "trial page, Turn-BoN N=4": base + f"#/trial/{keys[args.trials]}",
                     "trial page, PDR (8 attempts, 2 brackets)": base + f"#/trial/{keys[4 * args.trials]}"}
            timings = {}
            for name, url in pages.items():
                chromium_ms(url)  # warm-up
                loads = [chromium_ms(url) for _ in range(args.runs)]
                xs = [r for r, _ in loads]
                starts = [s for _, s in loads if s is not None]
                timings[name] = {"median_ms": round(statistics.median(xs), 1), "min_ms": min(xs), "max_ms": max(xs),
                                 "scripts_loaded_median_ms": round(statistics.median(starts), 1) if starts else None}
            shutil.rmtree(ref.parent, ignore_errors=True)
            ref_ms = timings["reference (empty page)"]["median_ms"]
            for name, t in timings.items():
                t["vs_reference"] = round(t["median_ms"] / ref_ms, 2) if ref_ms else None
                if name.startswith("reference"):
                    rows.append((f"Chromium: {name}", f"{t['median_ms']:.0f} ms"))
                else:
                    rows.append((f"Chromium: {name}", f"{t['median_ms']:.0f} ms ({t['vs_reference']:.1f}x)"))
                    if t["scripts_loaded_median_ms"] is not None:
                        rows.append(("  of which loading index.js + viewer.js", f"{t['scripts_loaded_median_ms']:.0f} ms"))
            results["browser"] = timings
        for name, value in rows:
            print(f"{name:50} {value:>16}")
        print(f"(load avg {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; browser: median of {args.runs} loads, "
              "milliseconds from navigation start to the rendered view)")
        OUT.mkdir(exist_ok=True)
        (OUT / "viewer.json").write_text(json.dumps(results, indent=2))
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
