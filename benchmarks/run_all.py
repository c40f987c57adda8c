"""Run every benchmark in this folder, one after another, and collect their JSON outputs into
benchmarks/out/all.json. Each benchmark reports ratios measured within its own run."""

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
BENCHES = ["bench_sandbox.py", "bench_exec_output.py", "bench_loop_overhead.py", "bench_turn_bon.py", "bench_cli_help.py", "bench_viewer.py",
           "bench_report_scale.py", "bench_ray.py", "bench_compose.py", "bench_import_tb.py", "bench_guard.py", "bench_guard_snapshot.py",
           "bench_forks.py", "bench_fork_by_copy.py", "bench_lookahead.py"]


def main() -> int:
    failed = []
    for name in BENCHES:
        print(f"== {name}", flush=True)
        if subprocess.run([sys.executable, str(HERE / name)]).returncode != 0:
            failed.append(name)
    out = HERE / "out"
    merged = {p.stem: json.loads(p.read_text()) for p in sorted(out.glob("*.json")) if p.name != "all.json"}
    (out / "all.json").write_text(json.dumps(merged, indent=2))
    if failed:
        print("failed:", ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
