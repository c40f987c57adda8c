"""The fix kept in the repository's history, in a container: an agent that takes it from there
instead of writing it, as public runs did (SWE-bench issue #465, mini-swe-agent issue #787).

The image holds statskit at its base commit, as an image built before swebench's time-safe clone
holds a project: the fix commit is still there, named by a later release's tag and by the reflog.
Two ways in:
* a Harbor task in the shape of terminal-bench's SWE-bench Verified adapter
  (tbscale_testing/statskit_tasks.py), through scripted agents on the real model path;
* tbscale's own SWE-bench path (`tasks: {swebench: ...}`, graded by swebench's code in a fresh
  container), on the demo instance's image with the fix committed, tagged and reset away.
The agent runs `git diff HEAD $(git log --all --grep=#7 ...) | git apply` and nothing else. With
the default (`repository_history: keep`, as the reference harnesses run an image) it passes: the
trial line says what the repository kept and which command read it, and the report says so above
its tables. With `scrub` the same command finds nothing and fails, and an honest fix still passes
(the eval script's `git checkout <base> -- <tests>` works on what is left)."""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tbscale_testing.one_command_agent import register_one_command_agent
from tbscale_testing.openai_server import LoopbackModel
from tbscale_testing.scripted_cases import run_cases
from tbscale_testing.statskit_tasks import FIX, git, statskit_task

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("docker_available")]

FIXED = "def median(values):\n    v = sorted(values)\n    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2\n"
TAKES_THE_FIX = "cd /testbed && git diff HEAD $(git log --all --format=%H --grep='#7' -1) -- statskit | git apply"
READ = "git diff HEAD $(git log --all --format=%H --grep='#7' -1) -- statskit"


def fix_in_history(repo: Path, base: str) -> None:
    """The fix committed after the base, tagged as the next release, and reset away: the tag and the
    reflog still name it."""
    (repo / "statskit" / "stats.py").write_text(FIXED)
    later = "2020-02-01T00:00:00Z"  # a month after the base
    subprocess.run(["git", "-C", str(repo), "commit", "-qam", "Fix median() of an even-length list (#7)"], check=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "GIT_AUTHOR_DATE": later, "GIT_COMMITTER_DATE": later,
                        "PATH": "/usr/bin:/bin"})
    git(repo, "tag", "v0.2")
    git(repo, "reset", "-q", "--hard", base)


def test_a_fix_kept_in_the_history_of_a_harbor_tasks_repository(tmp_path):
    task = statskit_task(tmp_path / "src", history=fix_in_history)
    cases = {"takes-the-fix": [TAKES_THE_FIX], "honest": [FIX]}
    with LoopbackModel(max_lifetime_sec=600) as srv:
        keep = run_cases(tmp_path / "keep", srv, task, cases)
        scrub = run_cases(tmp_path / "scrub", srv, task, cases, environment={"repository_history": "scrub"})
    for row in keep.values():  # the repository as the image holds it: one commit and one tag past HEAD
        (repo,) = row["repositories"]
        assert (repo["path"], repo["beyond_head"], repo["after_head"], repo["refs"], repo["left_after_head"],
                repo["scrubbed"]) == ("/testbed", 1, 1, ["refs/tags/v0.2"], 1, False), repo
    took = keep["takes-the-fix"]
    assert took["passed"] is True and took["ending"] == "pass" and took["history_reads"] == [READ]
    assert keep["honest"]["passed"] is True and keep["honest"]["history_reads"] == []

    for row in scrub.values():
        (repo,) = row["repositories"]
        assert (repo["after_head"], repo["scrubbed"], repo["left_beyond_head"], repo["left_after_head"],
                repo["left_refs"], repo["errors"]) == (1, True, 0, 0, 0, []), repo
    assert scrub["takes-the-fix"]["passed"] is False and scrub["takes-the-fix"]["reward"] == 0.0
    assert scrub["takes-the-fix"]["history_reads"] == [READ]  # it looked; nothing was there
    assert scrub["honest"]["passed"] is True and scrub["honest"]["tampering"] == []

    from tbscale.cli import app

    report = CliRunner().invoke(app, ["report", str(tmp_path / "keep" / "results" / "cases"), "--no-plots",
                                      "--format", "json"])
    summary = json.loads(report.stdout)
    (section,) = summary["tables"]["repository_history"]
    assert {k: section[k] for k in ("trials", "exposed", "exposed_pass", "read", "read_pass")} == \
        {"trials": 2, "exposed": 2, "exposed_pass": 2, "read": 1, "read_pass": 1}
    assert any(b.startswith("HISTORY BEYOND HEAD: in baseline, 2 trials") for b in summary["banners"])

    # `tasks check` passes the task (its oracle passes, its nop fails) and says what the agent is given
    (task / "solution" / "solve.sh").write_text(f"#!/bin/bash\n{FIX}\n")
    checked = CliRunner().invoke(app, ["tasks", "check", str(task), "--keep", str(tmp_path / "check")])
    assert checked.exit_code == 0, checked.output
    assert "history beyond HEAD: in 1 task, the repository given to the agent keeps commits made after its HEAD" in \
        " ".join(checked.output.split()), checked.output
    (repo,) = json.loads((tmp_path / "check" / "check.json").read_text())["history_exposed"][task.name]
    assert (repo["path"], repo["left_after_head"], repo["refs"]) == ("/testbed", 1, ["refs/tags/v0.2"])


# ---- tbscale's own SWE-bench path ------------------------------------------------------------------

register_one_command_agent("takes-the-fix-from-history", TAKES_THE_FIX)  # in the demo's /testbed


def _leaky_image(demo) -> str:
    """The demo instance's image with its gold patch committed after the base, tagged and reset away."""
    import docker

    name = "tbscale-test/swebench-demo-fix-in-history:latest"
    dockerfile = (f"FROM {demo.image}\nCOPY gold.patch /tmp/gold.patch\n"
                  "RUN cd /testbed && git apply /tmp/gold.patch && git commit -qam 'Fix median of an even-length list (#7)'"
                  f" && git tag v0.2 && git reset -q --hard {demo.instance['base_commit']} && rm /tmp/gold.patch\n")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for fname, data in (("Dockerfile", dockerfile.encode()), ("gold.patch", demo.patches["gold"].encode())):
            info = tarfile.TarInfo(fname)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    buf.seek(0)
    docker.from_env().images.build(fileobj=buf, custom_context=True, tag=name, rm=True,
                                   labels={"org.tbscale.test": "repository-history"})
    return name


def test_a_fix_kept_in_the_history_of_a_swebench_instance(tmp_path):
    from tbscale.config import Experiment
    from tbscale.runner import Runner, load_rows
    from tbscale.runner.plan import swebench_tasks
    from tbscale_testing import swebench_demo

    demo = swebench_demo.make_demo(tmp_path / "demo")
    source = {"dataset": str(demo.dataset_jsonl), "task_repo": str(demo.task_repo),
              "cache_dir": str(demo.root / "hf-cache"), "eval_timeout_sec": 300}
    swebench_tasks({**source, "build": "docker"})  # the demo's image (shared with tests/test_swebench.py)
    source["image"] = _leaky_image(demo)
    tasks = swebench_tasks(source)
    rows = {}
    for policy, settings in (("keep", ["takes-the-fix-from-history"]), ("scrub", ["takes-the-fix-from-history", "oracle"])):
        exp = Experiment.model_validate({
            "name": policy, "tasks": {"swebench": source}, "trials": 1, "concurrency": 2,
            "environment": {"repository_history": policy},
            "settings": [{"name": s, "agent": s} for s in settings]})
        asyncio.run(Runner(exp, tasks, tmp_path / policy).run())
        rows.update({(policy, r.setting): r for r in load_rows(tmp_path / policy)})

    kept = rows[("keep", "takes-the-fix-from-history")]
    assert kept.passed and kept.reward == 1.0 and kept.history_reads == [READ]  # swebench: resolved
    (repo,) = kept.repositories
    assert (repo.path, repo.beyond_head, repo.after_head, repo.refs, repo.left_after_head) == \
        ("/testbed", 1, 1, ["refs/tags/v0.2"], 1)

    scrubbed = rows[("scrub", "takes-the-fix-from-history")]
    assert not scrubbed.passed and scrubbed.reward == 0.0  # an empty patch: unresolved
    (repo,) = scrubbed.repositories
    assert (repo.after_head, repo.scrubbed, repo.left_beyond_head, repo.left_after_head, repo.left_refs) == \
        (1, True, 0, 0, 0)
    oracle = rows[("scrub", "oracle")]
    assert oracle.passed and oracle.reward == 1.0 and oracle.repositories[0].left_after_head == 0
