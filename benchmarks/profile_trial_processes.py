"""Where an oracle trial's CPU goes, process by process (benchmarks/README.md).

bench_sandbox.py gives the machine's CPU per trial and per engine operation; this says which
processes spend it. It runs oracle trials of the trivial task (bench_sandbox.py's) at a given
concurrency with BSD process accounting on (`accton`, Debian package `acct`; root), and reads:
- /proc/stat: the machine's user and system CPU over the trials;
- /proc/<pid>/stat before and after: what the processes alive throughout spent (dockerd,
  containerd, this process);
- the accounting file: every process that exited meanwhile, by command name. dockerd runs copies
  of itself (`exe`) for work it does out of process: a network namespace for a container start,
  the prestart hook that hands it to the engine, an archive unpacked into a container.
What no process carries is the rest (kernel work after a process's accounting record is written,
kernel threads). The accounting clock is 10 ms ticks, so short processes are counted by sampling.

Writes benchmarks/out/trial_processes.json. Run (as root):
    .venv/bin/python benchmarks/profile_trial_processes.py [--trials 16] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_sandbox as bench  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"
HZ = os.sysconf("SC_CLK_TCK")
# struct acct_v3 (linux/acct.h): flag, version, tty, exitcode, uid, gid, pid, ppid, btime, etime,
# utime, stime, mem, io, rw, minflt, majflt, swaps, comm[16]; utime and stime are comp_t ticks.
ACCT_V3 = struct.Struct("<cBHIIIIIIfHHHHHHHH16s")
ACCT_HZ = 100


def comp_t(value: int) -> int:
    """A comp_t: 13-bit mantissa, 3-bit base-8 exponent."""
    return (value & 0x1FFF) << (3 * (value >> 13))


def exited_cpu(path: Path) -> tuple[collections.Counter, collections.Counter]:
    """CPU seconds and process counts by command name, from an acct v3 file."""
    cpu, count = collections.Counter(), collections.Counter()
    data = path.read_bytes()
    for off in range(0, len(data) - ACCT_V3.size + 1, ACCT_V3.size):
        f = ACCT_V3.unpack_from(data, off)
        if f[1] != 3:  # not a v3 record
            continue
        name = f[-1].split(b"\0")[0].decode(errors="replace")
        cpu[name] += (comp_t(f[10]) + comp_t(f[11])) / ACCT_HZ
        count[name] += 1
    return cpu, count


def live_processes() -> dict[int, tuple[str, int, int]]:
    """pid -> (command, utime + stime ticks, start time) for every process now."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        fields = text[text.rindex(")") + 2:].split()
        out[int(entry)] = (name, int(fields[11]) + int(fields[12]), int(fields[19]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=16)
    ap.add_argument("--concurrency", type=int, default=4)
    args = ap.parse_args()
    if os.geteuid() != 0 or shutil.which("accton") is None:
        sys.exit("profile_trial_processes.py: needs root and `accton` (apt-get install acct)")
    OUT.mkdir(exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="tbscale-procs-"))
    task = bench.load_task(bench.trivial_task(root))
    bench.dk.ensure_image(task)
    bench.bench_trials(root, task, 2, 2, "warm")
    acct = root / "pacct"
    acct.touch()
    before = live_processes()
    subprocess.run(["accton", str(acct)], check=True, capture_output=True)
    try:
        # the machine's CPU a trial comes with the trials (bench_sandbox.MachineCPU, /proc/stat)
        wall, _, calls, busy = bench.bench_trials(root, task, args.trials, args.concurrency, "profiled")
    finally:
        subprocess.run(["accton", "off"], check=True, capture_output=True)
    after = live_processes()
    n = args.trials
    live = collections.Counter()
    for pid, (name, spent, started) in after.items():
        was = before.get(pid)
        live[name] += (spent - (was[1] if was and was[2] == started else 0)) / HZ / n
    cpu, count = exited_cpu(acct)
    total = busy["total"]
    exited = sum(cpu.values()) / n
    live_total = sum(v for v in live.values() if v > 0)
    result = {
        "trials": n, "concurrency": args.concurrency, "wall_sec": round(wall, 2),
        "machine_cpu_sec_per_trial": busy,
        "live_processes_cpu_sec_per_trial": {k: round(v, 3) for k, v in live.most_common(8) if v > 0},
        "exited_processes_cpu_sec_per_trial": {k: round(v / n, 3) for k, v in cpu.most_common(10)},
        "exited_processes_per_trial": {k: round(count[k] / n, 2) for k, _ in cpu.most_common(10)},
        "no_process_cpu_sec_per_trial": round(total - exited - live_total, 3),
        "engine_calls_per_trial": calls,
        "load_average_1min": round(os.getloadavg()[0], 2),
    }
    (OUT / "trial_processes.json").write_text(json.dumps(result, indent=2))
    print(f"{n} oracle trials at concurrency {args.concurrency}: {wall:.2f} s; machine CPU {total:.3f} CPU-s a trial "
          f"(user {busy['user']:.3f}, system {busy['system']:.3f})")
    print("processes alive throughout (CPU-s a trial):")
    for k, v in result["live_processes_cpu_sec_per_trial"].items():
        print(f"  {v:7.3f}  {k}")
    print(f"processes that exited: {exited:.3f} CPU-s a trial; by command (CPU-s, processes a trial):")
    for k, v in result["exited_processes_cpu_sec_per_trial"].items():
        print(f"  {v:7.3f}  {result['exited_processes_per_trial'][k]:7.2f}  {k}")
    print(f"carried by no process: {result['no_process_cpu_sec_per_trial']:.3f} CPU-s a trial")


if __name__ == "__main__":
    main()
