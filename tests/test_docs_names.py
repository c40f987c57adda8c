"""Every file of this repository and every `tbscale...` module or name that the README, docs/ and
benchmarks/README.md give in backticks is there: a renamed module leaves no stale pointer behind.
(docs/architecture.md's walk through one attempt is checked more closely in test_architecture_doc.py.)"""

from __future__ import annotations

import importlib
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FOLDERS = ("tbscale", "tbscale_sim", "tbscale_testing", "benchmarks", "scripts", "configs", "tasks", "docs", "tests")
PATH = re.compile(r"`((?:%s)/[^`\s]*)`" % "|".join(FOLDERS))
DOTTED = re.compile(r"`(tbscale(?:_sim|_testing)?(?:\.[A-Za-z_]\w*)+)")
# Paths in a task's own folder (a Harbor or Terminal-Bench task's tests/) or in a SWE-bench
# instance's repository, not in this one.
ELSEWHERE = {"tests/test.sh", "tests/test_data", "tests/test_outputs.py", "tests/test_stats.py::test_median_even"}
# Folders that runs and benchmarks write, ignored by git: a fresh clone has none of them.
WRITTEN = ("benchmarks/out/", "results/")


def _named(pattern: re.Pattern) -> dict[str, str]:
    """name -> the first doc that gives it."""
    found: dict[str, str] = {}
    for doc in DOCS:
        for name in pattern.findall(doc.read_text(encoding="utf-8")):
            found.setdefault(name, doc.relative_to(ROOT).as_posix())
    return found


def _exists(path: str) -> bool:
    """At the repository's root, or in the package (the docs name `tasks/harbor.py` for short)."""
    return _exists_under(ROOT, path) or _exists_under(ROOT / "tbscale", path)


def _exists_under(base: Path, path: str) -> bool:
    if "<" in path or "{" in path:  # a placeholder: `tasks/<id>/Dockerfile`
        return (base / path.split("<")[0].split("{")[0]).exists()
    if "*" in path:
        return any(base.glob(path))
    return (base / path.rstrip("/")).exists()


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_every_repository_path_the_docs_name_exists() -> None:
    named = {p: doc for p, doc in _named(PATH).items() if p not in ELSEWHERE and not p.startswith(WRITTEN)}
    assert len(named) > 50  # the pattern still finds the docs' paths
    assert {p: doc for p, doc in named.items() if not _exists(p)} == {}


def test_every_tbscale_module_and_name_the_docs_give_resolves() -> None:
    groups = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"])
    named = {d: doc for d, doc in _named(DOTTED).items() if d not in groups}  # entry-point groups are names only
    assert len(named) > 10
    assert {d: doc for d, doc in named.items() if not _resolves(d)} == {}


def test_a_stale_name_is_caught() -> None:
    assert not _exists("tbscale/strategies/verifiers.py") and _exists("tbscale/strategies/action_verifiers.py")
    assert not _resolves("tbscale.verify.VERIFIERS") and _resolves("tbscale.verifiers.VERIFIERS")
    assert _exists("tbscale/posthoc/judge/prompts/rubrics_*.txt") and not _exists("tbscale/no_such_*.txt")
