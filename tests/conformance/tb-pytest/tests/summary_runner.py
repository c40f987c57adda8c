"""Run the test_* functions of a module and print pytest's -rA short test summary for them.

A function marked with @xfail("reason") is expected to fail (XFAIL when it does, XPASS when it
passes); @skip("reason") is not run (SKIPPED).
"""
import importlib.util
import os
import sys
import traceback


def load(path):
    spec = importlib.util.spec_from_file_location("checks", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(path):
    module = load(path)
    rel = os.path.basename(path)
    lines, counts = [], {}
    for name in sorted(n for n in dir(module) if n.startswith("test_")):
        fn = getattr(module, name)
        node = f"{rel}::{name}"
        if getattr(fn, "skip_reason", None):
            lines.append(f"SKIPPED [1] {rel}: {fn.skip_reason}")
            status = "skipped"
        else:
            try:
                fn()
                error = None
            except Exception as e:  # noqa: BLE001
                error = f"{type(e).__name__}: {e}".strip()
                traceback.print_exc()
            if getattr(fn, "xfail_reason", None):
                status = "xfailed" if error else "xpassed"
                lines.append(f"XFAIL {node} - {fn.xfail_reason}" if error else f"XPASS {node} {fn.xfail_reason}")
            elif error:
                status = "failed"
                lines.append(f"FAILED {node} - {error}")
            else:
                status = "passed"
                lines.append(f"PASSED {node}")
        counts[status] = counts.get(status, 0) + 1
    print("=" * 25 + " short test summary info " + "=" * 25)
    print("\n".join(lines))
    print("=" * 20 + " " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) + " in 0.01s " + "=" * 20)
    return 1 if counts.get("failed") or counts.get("xpassed") else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
