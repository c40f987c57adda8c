"""Start-up cost of the command line: `tbscale --help` against `python -c pass`, in one run.

The CLI imports heavy modules (litellm, docker, pandas, matplotlib) only inside the commands
that need them, so `--help` should cost little more than starting the interpreter plus typer
and rich. Both commands run as subprocesses, interleaved, after one untimed warm-up each; the
medians of --runs runs (default 5) and their ratio and difference are reported. Shared machines
are noisy: compare the ratio, not the absolute times.

Run: .venv/bin/python benchmarks/bench_cli_help.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def tbscale_executable() -> str:
    beside = Path(sys.executable).parent / "tbscale"
    if beside.exists():
        return str(beside)
    found = shutil.which("tbscale")
    if not found:
        sys.exit("tbscale is not installed in this environment (pip install -e .)")
    return found


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    res = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=300)
    elapsed = time.perf_counter() - t0
    if res.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({res.returncode}): {res.stderr.decode(errors='replace')[-500:]}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    commands = {"python -c pass": [sys.executable, "-c", "pass"],
                "tbscale --help": [tbscale_executable(), "--help"]}
    for cmd in commands.values():  # warm-up: page cache, .pyc files
        timed(cmd)
    samples: dict[str, list[float]] = {k: [] for k in commands}
    for _ in range(args.runs):
        for name, cmd in commands.items():  # interleaved, so load changes hit both alike
            samples[name].append(timed(cmd))
    base = statistics.median(samples["python -c pass"])
    cli = statistics.median(samples["tbscale --help"])
    print(f"{'command':18} {'median s':>9} {'min s':>7} {'max s':>7}   ({args.runs} runs each, load avg "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    for name, xs in samples.items():
        print(f"{name:18} {statistics.median(xs):9.3f} {min(xs):7.3f} {max(xs):7.3f}")
    print(f"tbscale --help / python -c pass = {cli / base:.1f}x; tbscale --help costs {cli - base:.3f} s "
          f"more than an empty interpreter")


if __name__ == "__main__":
    main()
