"""Run every bad input of tbscale_testing/bad_inputs.py as a user would (`python -m tbscale.cli`,
one process each) and print a markdown table: the input, the command, the exit code, the first
line printed, and whether it is what the test expects.

    .venv/bin/python scripts/bad_input_table.py [--only SUBSTRING]

Exits 1 when any case differs from what the list expects. Starts no container and reaches no
remote host (a loopback model server answers the preflight cases).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tbscale_testing.bad_inputs import CASES, can_mount_read_only, fill, inputs, run_case  # noqa: E402


def cell(text: str, width: int = 150) -> str:
    text = text.replace("|", "\\|").replace("`", "'")
    return text if len(text) <= width else text[:width - 1] + "…"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default=None, help="only cases whose name holds this")
    args = parser.parse_args()
    cases = [c for c in CASES if args.only is None or args.only in c.name]
    mounts = can_mount_read_only()
    bad = 0
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tbscale-bad-input-") as tmp, inputs(Path(tmp) / "in") as subs:
        shown = {**subs, "root": "$IN"}
        print("| # | input | command | exit | first line printed | as expected |")
        print("|---|---|---|---|---|---|")
        for i, case in enumerate(cases, 1):
            command = "tbscale " + " ".join(fill(a, shown) for a in case.argv)
            if case.readonly and not mounts:
                print(f"| {i} | {cell(case.name)} | `{cell(command)}` | - | (skipped: cannot mount read-only here) | - |")
                continue
            got = run_case(case, subs)
            first = got.first_line.replace(subs["root"], "$IN").replace(subs["api"], "$API")
            ok = (got.code == case.code and fill(case.first_line, subs) in got.output and not got.traceback
                  and (case.check is None or case.check(Path(subs["root"])))
                  and (case.absent is None or case.absent not in got.output))
            bad += not ok
            mark = ("yes" if ok else "**no**") + (" (issue)" if case.from_issue else "")
            print(f"| {i} | {cell(case.name)} | `{cell(command)}` | {got.code} | {cell(first)} | {mark} |", flush=True)
    print(f"\n{len(cases)} inputs, {len(cases) - bad} as expected, {bad} not; "
          f"{sum(c.from_issue for c in cases)} from the issue; {time.monotonic() - t0:.0f} s. "
          "$IN is the inputs' folder, $API the loopback model server.")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
