"""Size and fan-out of the code one attempt runs through (docs/architecture.md, "One attempt").

    python scripts/attempt_path_metrics.py [--json] [MODULE ...]

For each module of the attempt path: its lines, the tbscale modules it imports (module level and
inside functions: its fan-out) and its largest class or function. Read with `ast`, nothing is
imported. With no MODULE, the modules that hold the attempt path today (ATTEMPT_PATH).
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# From the trial's line down to one command: the trial, the attempt's phases, its environments,
# its verification, the agent loop, the policy seam and the recorder.
ATTEMPT_PATH = ["tbscale/runner/trial.py", "tbscale/runner/trial_line.py", "tbscale/runner/attempt.py",
                "tbscale/runner/steps.py", "tbscale/runner/environment.py", "tbscale/runner/verification.py",
                "tbscale/runner/artifacts.py", "tbscale/agent/loop.py", "tbscale/agent/policy.py", "tbscale/logs.py"]


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(tree: ast.AST, here: str) -> set[str]:
    """The tbscale modules a module imports, wherever the import statement is."""
    found: set[str] = set()
    package = here.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "tbscale")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            if base.split(".")[0] == "tbscale":
                found.add(base)
    return found


def code_lines(text: str, tree: ast.Module) -> int:
    """Lines that hold code: not blank, not only a comment, not part of a docstring."""
    doc: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(getattr(first, "value", None), ast.Constant) \
                    and isinstance(first.value.value, str):
                doc.update(range(first.lineno, first.end_lineno + 1))
    return sum(1 for i, line in enumerate(text.splitlines(), 1)
               if line.strip() and not line.strip().startswith("#") and i not in doc)


def largest(tree: ast.Module) -> tuple[str, int]:
    best = ("-", 0)
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            size = (node.end_lineno or node.lineno) - node.lineno + 1
            if size > best[1]:
                best = (node.name, size)
    return best


def functions(tree: ast.Module) -> dict[str, int]:
    """Lines of every top-level function and every method (Class.method)."""
    out: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[node.name] = node.end_lineno - node.lineno + 1
        elif isinstance(node, ast.ClassDef):
            out[node.name] = node.end_lineno - node.lineno + 1
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    out[f"{node.name}.{sub.name}"] = sub.end_lineno - sub.lineno + 1
    return out


def measure(paths: list[str]) -> dict:
    rows = []
    for rel in paths:
        path = ROOT / rel
        if not path.is_file():
            continue
        text = path.read_text()
        tree = ast.parse(text)
        name = _module_name(path)
        imported = sorted(imports_of(tree, name) - {name})
        big, size = largest(tree)
        rows.append({"module": rel, "lines": len(text.splitlines()), "code_lines": code_lines(text, tree),
                     "fan_out": len(imported), "imports": imported,
                     "largest": big, "largest_lines": size, "functions": functions(tree)})
    return {"modules": rows, "lines": sum(r["lines"] for r in rows), "code_lines": sum(r["code_lines"] for r in rows),
            "max_fan_out": max((r["fan_out"] for r in rows), default=0),
            "distinct_imports": len({i for r in rows for i in r["imports"]})}


def main(argv: list[str]) -> int:
    as_json = "--json" in argv
    paths = [a for a in argv if a != "--json"] or ATTEMPT_PATH
    out = measure(paths)
    if as_json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"{'module':36} {'lines':>5} {'code':>5} {'fan-out':>7}  largest class or function")
    for r in out["modules"]:
        print(f"{r['module']:36} {r['lines']:>5} {r['code_lines']:>5} {r['fan_out']:>7}  {r['largest']} "
              f"({r['largest_lines']} lines)")
    print(f"{'total':36} {out['lines']:>5} {out['code_lines']:>5} {out['max_fan_out']:>7}  (max fan-out; "
          f"{out['distinct_imports']} distinct tbscale modules imported)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
