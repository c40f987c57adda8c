"""A tiny SWE-bench-format benchmark made on this machine: no hub, no GitHub, no Docker Hub.

`make_demo(out)` writes
- `repo/`: a small Python project (statskit) in git, at the base commit, with a real bug:
  median() of an even-length list returns the upper middle value instead of the mean of the two;
- `task-repo/`: a swebench task repo (sweb.yaml, tasks/<instance_id>/ with task.yaml, tests.json,
  problem_statement.md, hints.md, gold.patch, test.patch, eval.sh, Dockerfile and the repository as
  a git bundle the Dockerfile clones to /testbed), checked with swebench's own check_task_repo;
- `dataset/statskit-demo/test.parquet`: the task repo compiled by swebench's write_parquets (the
  way the hub datasets are published), and `dataset.jsonl` with the same rows.

The eval script has the shape of swebench's Python eval scripts (reset the test files, apply the
test patch from a heredoc, run pytest -rA between swebench's output markers, reset again), without
conda: the image is python:3.11-slim-bookworm with git and pytest. Its log parser is swebench's
parse_log_pytest and its eval_type pass_and_fail, both named by the instance as swebench>=5 expects,
so no swebench table needs an entry for this repo.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tbscale.errors import TbscaleError

INSTANCE_ID = "statskit__statskit-1"
REPO = "statskit/statskit"
VERSION = "0.1"
DATASET = "tbscale/statskit-demo"
TEST_FILE = "tests/test_stats.py"
TEST_CMD = f"pytest --no-header -rA --tb=no -p no:cacheprovider {TEST_FILE}"
FAIL_TO_PASS = [f"{TEST_FILE}::test_median_even"]
PASS_TO_PASS = [f"{TEST_FILE}::test_mean", f"{TEST_FILE}::test_mean_empty", f"{TEST_FILE}::test_median_odd",
                f"{TEST_FILE}::test_median_empty"]
BASE_IMAGE = "python:3.11-slim-bookworm"
HEREDOC = "EOF_114329324912"  # swebench's delimiter for the test patch

PROBLEM = """\
median() returns the wrong value for lists with an even number of elements

```python
>>> from statskit import median
>>> median([1, 2, 3, 4])
3
```

The median of an even-length sequence is the mean of its two middle values, so this should be
2.5. Odd-length input is fine: `median([3, 1, 2])` is 2.
"""
HINTS = "The bug is in statskit/stats.py."

FILES = {
    "README.md": "# statskit\n\nSmall descriptive statistics helpers.\n",
    ".gitignore": "__pycache__/\n*.pyc\n.pytest_cache/\n",
    "pyproject.toml": '[project]\nname = "statskit"\nversion = "0.1.0"\n\n[tool.pytest.ini_options]\npythonpath = ["."]\n',
    "statskit/__init__.py": 'from statskit.stats import mean, median\n\n__all__ = ["mean", "median"]\n',
    "statskit/stats.py": '''\
"""Descriptive statistics."""


def mean(values):
    """Arithmetic mean of a non-empty sequence."""
    values = list(values)
    if not values:
        raise ValueError("mean() of an empty sequence")
    return sum(values) / len(values)


def median(values):
    """Middle value of a non-empty sequence."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("median() of an empty sequence")
    mid = len(ordered) // 2
    return ordered[mid]
''',
    TEST_FILE: '''\
import pytest

from statskit import mean, median


def test_mean():
    assert mean([1, 2, 3, 4]) == 2.5


def test_mean_empty():
    with pytest.raises(ValueError):
        mean([])


def test_median_odd():
    assert median([3, 1, 2]) == 2


def test_median_empty():
    with pytest.raises(ValueError):
        median([])
''',
}
GOLD_EDIT = ("    return ordered[mid]\n",
             "    if len(ordered) % 2:\n        return ordered[mid]\n    return (ordered[mid - 1] + ordered[mid]) / 2\n")
# Fixes the even case and breaks the odd one: FAIL_TO_PASS passes, a PASS_TO_PASS test fails.
WRONG_EDIT = ("    return ordered[mid]\n", "    return (ordered[mid - 1] + ordered[mid]) / 2\n")
TEST_EDIT = '''

def test_median_even():
    assert median([1, 2, 3, 4]) == 2.5
    assert median([4, 1]) == 2.5
'''

DOCKERFILE = """\
FROM {base_image}
RUN pip install --no-cache-dir pytest==8.3.3
RUN apt-get update && apt-get install -y --no-install-recommends git patch && rm -rf /var/lib/apt/lists/*
RUN git config --global user.name tbscale && git config --global user.email tbscale@localhost \\
 && git config --global --add safe.directory /testbed
COPY repo.bundle /tmp/repo.bundle
RUN git clone -q /tmp/repo.bundle /testbed && cd /testbed && git reset -q --hard {base_commit} \\
 && git remote remove origin && rm /tmp/repo.bundle
WORKDIR /testbed
"""

_GIT_ENV = {"GIT_AUTHOR_NAME": "statskit dev", "GIT_AUTHOR_EMAIL": "dev@statskit.invalid",
            "GIT_COMMITTER_NAME": "statskit dev", "GIT_COMMITTER_EMAIL": "dev@statskit.invalid",
            "GIT_AUTHOR_DATE": "2024-05-01T12:00:00+00:00", "GIT_COMMITTER_DATE": "2024-05-01T12:00:00+00:00",
            "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


@dataclass
class Demo:
    root: Path
    repo: Path
    task_repo: Path
    dataset_jsonl: Path
    dataset_parquet: Path
    instance: dict[str, Any]
    patches: dict[str, str] = field(default_factory=dict)  # gold, wrong, test

    @property
    def instance_id(self) -> str:
        return self.instance["instance_id"]

    @property
    def image(self) -> str:
        return self.instance["image"]


def _git(repo: Path, *args: str, date: str | None = None) -> str:
    env = {**os.environ, **_GIT_ENV}
    if date:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = date
    res = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise TbscaleError(f"git {' '.join(args[:2])} in {repo} failed: {res.stderr.strip()[-300:]}")
    return res.stdout


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def _diff_of(repo: Path, rel: str, new_text: str) -> str:
    """The patch that turns the committed `rel` into new_text (the tree is restored)."""
    path = repo / rel
    old = path.read_text()
    path.write_text(new_text)
    try:
        return _git(repo, "diff", "--no-color", "--", rel)
    finally:
        path.write_text(old)


def make_repo(path: Path) -> str:
    """The statskit repository at its base commit; returns the base commit."""
    path.mkdir(parents=True, exist_ok=True)
    _git(path, "init", "-q", "-b", "main")
    first = {k: v for k, v in FILES.items() if k != TEST_FILE}
    first["statskit/stats.py"] = FILES["statskit/stats.py"].split("\n\ndef median")[0] + "\n"
    first["statskit/__init__.py"] = 'from statskit.stats import mean\n\n__all__ = ["mean"]\n'
    _write(path, first)
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "statskit: mean()", date="2024-04-01T12:00:00+00:00")
    _write(path, FILES)
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "Add median() and tests", date="2024-04-15T12:00:00+00:00")
    return _git(path, "rev-parse", "HEAD").strip()


def eval_script(base_commit: str, test_patch: str, repo_dir: str = "/testbed") -> str:
    """An eval script in the shape of swebench's Python ones (minus conda)."""
    return "\n".join([
        "#!/bin/bash",
        "set -uxo pipefail",
        f"cd {repo_dir}",
        f"git config --global --add safe.directory {repo_dir}",
        f"cd {repo_dir}",
        "git status",
        "git show",
        f"git -c core.fileMode=false diff {base_commit}",
        f"git checkout {base_commit} {TEST_FILE}",
        f"git apply -v - <<'{HEREDOC}'\n{test_patch}\n{HEREDOC}",
        ": '>>>>> Start Test Output'",
        TEST_CMD,
        ": '>>>>> End Test Output'",
        f"git checkout {base_commit} {TEST_FILE}",
    ]) + "\n"


def make_demo(out: Path, image: str | None = None, base_image: str = BASE_IMAGE) -> Demo:
    """Write the demo benchmark under `out` (which must not hold one already). `image` defaults
    to swebench's derived name for the instance, which swebench's task-repo check requires."""
    from swebench.task.checks import check_task_repo, errors, expected_image
    from swebench.task.publish import INTERNAL_KEYS, write_parquets
    from swebench.task.repo import TEST_KEYS, dump_tests, dump_yaml, load_task_repo

    out = Path(out).resolve()
    repo = out / "repo"
    base = make_repo(repo)
    stats = FILES["statskit/stats.py"]
    patches = {
        "gold": _diff_of(repo, "statskit/stats.py", stats.replace(*GOLD_EDIT)),
        "wrong": _diff_of(repo, "statskit/stats.py", stats.replace(*WRONG_EDIT)),
        "test": _diff_of(repo, TEST_FILE, FILES[TEST_FILE] + TEST_EDIT),
    }
    image = image or expected_image(INSTANCE_ID)

    task_repo = out / "task-repo"
    tdir = task_repo / "tasks" / INSTANCE_ID
    tdir.mkdir(parents=True)
    (task_repo / "sweb.yaml").write_text(dump_yaml({"datasets": [DATASET], "splits": ["test"]}))
    meta = {"instance_id": INSTANCE_ID, "repo": REPO, "version": VERSION, "base_commit": base,
            "environment_setup_commit": base, "created_at": "2024-05-01T12:00:00Z", "split": "test",
            "datasets": [DATASET], "image": image, "log_parser": "parse_log_pytest", "eval_type": "pass_and_fail"}
    (tdir / "task.yaml").write_text(dump_yaml(meta))
    (tdir / "tests.json").write_text(dump_tests({"FAIL_TO_PASS": FAIL_TO_PASS, "PASS_TO_PASS": PASS_TO_PASS}))
    (tdir / "problem_statement.md").write_text(PROBLEM)
    (tdir / "hints.md").write_text(HINTS)
    (tdir / "gold.patch").write_text(patches["gold"])
    (tdir / "test.patch").write_text(patches["test"])
    (tdir / "eval.sh").write_text(eval_script(base, patches["test"]))
    (tdir / "Dockerfile").write_text(DOCKERFILE.format(base_image=base_image, base_commit=base))
    _git(repo, "bundle", "create", "-q", str(tdir / "repo.bundle"), "HEAD", "main")
    problems = errors(check_task_repo(task_repo))
    if image == expected_image(INSTANCE_ID) and problems:
        raise TbscaleError("swebench rejects the demo task repo: " + "; ".join(map(str, problems)))

    written = write_parquets(task_repo, out / "dataset")
    parquet = written[f"{DATASET}/test"]
    rows = [{k: v for k, v in r.items() if k not in INTERNAL_KEYS} for r in load_task_repo(task_repo)]
    jsonl = out / "dataset.jsonl"
    with open(jsonl, "w") as f:
        for r in rows:  # as on the hub: the test lists as JSON strings
            f.write(json.dumps({**r, **{k: json.dumps(r[k]) for k in TEST_KEYS}}) + "\n")
    return Demo(out, repo, task_repo, jsonl, parquet, rows[0], patches)
