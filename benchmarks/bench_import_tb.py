"""Importing a terminal-bench submission: 5 runs x 80 tasks = 400 trial folders.

A synthetic submission in terminal-bench 0.2.x's layout (tbscale_testing/tb_runs.py: run-level
results.json, run_metadata.json, and per trial results.json, panes/post-test.txt, commands.txt and
sessions/agent.cast) is imported with `tbscale.ingest.import_runs` (median of 5, each into a fresh
folder); the reference, measured in the same run, is reading and parsing every JSON file of the
submission once (the floor any importer pays). Pass real submissions with --real PATH (e.g. a
Terminal-Bench-Core leaderboard folder) to time them too. Writes benchmarks/out/import_tb.json.

    .venv/bin/python benchmarks/bench_import_tb.py [--real PATH ...]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tbscale.ingest import import_runs  # noqa: E402
from tbscale_testing.tb_runs import write_submission  # noqa: E402

BUDGET_SEC = 10.0  # what a 5-run submission may take (the bound)


def time_import(source: Path, work: Path, repeats: int) -> tuple[float, int]:
    times, trials = [], 0
    for i in range(repeats):
        target = work / f"import-{i}"
        t0 = time.perf_counter()
        res = import_runs([source], target)
        times.append(time.perf_counter() - t0)
        trials = res.trials
        shutil.rmtree(target)
    return statistics.median(times), trials


def time_reading(source: Path, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for f in source.rglob("*.json"):
            try:
                json.loads(f.read_bytes())
            except ValueError:  # agent logs of real submissions hold empty or partial JSON files
                pass
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--real", type=Path, action="append", default=[], help="a real submission folder to time too")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    out: dict = {"budget_sec": BUDGET_SEC, "synthetic": {}, "real": []}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        sub = write_submission(tmp / "submission", tasks=80, runs=5)
        folders = sum(1 for p in sub.glob("*/*/*") if p.is_dir())
        imp, trials = time_import(sub, tmp, args.repeats)
        ref = time_reading(sub, args.repeats)
        out["synthetic"] = {"trial_folders": folders, "trials": trials, "import_sec": round(imp, 3),
                            "read_json_sec": round(ref, 3), "ratio_to_reading": round(imp / ref, 2),
                            "within_budget": imp <= BUDGET_SEC}
        print(f"synthetic submission: {folders} trial folders, {trials} trials; import {imp:.2f} s (median of "
              f"{args.repeats}); reading its JSON files {ref:.3f} s; ratio {imp / ref:.1f}x; budget {BUDGET_SEC} s")
        for real in args.real:
            imp, trials = time_import(real, tmp, args.repeats)
            ref = time_reading(real, args.repeats)
            out["real"].append({"path": str(real), "trials": trials, "import_sec": round(imp, 3),
                                "read_json_sec": round(ref, 3), "ratio_to_reading": round(imp / ref, 2)})
            print(f"{real}: {trials} trials; import {imp:.2f} s; reading its JSON files {ref:.3f} s; "
                  f"ratio {imp / ref:.1f}x")
    dest = ROOT / "benchmarks" / "out"
    dest.mkdir(exist_ok=True)
    (dest / "import_tb.json").write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
