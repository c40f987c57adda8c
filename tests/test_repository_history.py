"""A repository's history beyond its HEAD, with no engine: the commands that read past HEAD
(shell/git_history.py), the check and the scrub run here on repositories made here
(runner/repository_history.py), where a task's repositories are, and the report's section. Through
the runner on the SWE-bench demo in a container: tests/test_repository_history_docker.py."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from tbscale.analysis.report import history_section
from tbscale.runner.repository_history import history_script, parse_history, repository_paths
from tbscale.shell.git_history import history_reads, trial_history_reads
from tbscale.tasks import load_task
from tbscale_testing.tasks import write_harbor_task

REFS = ["refs/remotes/origin/main", "refs/tags/v2.0", "refs/stash"]


@pytest.mark.parametrize("command", [
    'git log --all --oneline --grep="#2317"',
    "git log --all -S median -- statskit/",
    "git -C /testbed log --branches --format=%H",
    "cd /testbed && git log --remotes | head",
    "git rev-list --tags --max-count=5",
    "git log --glob='refs/*'",
    "git show $(git rev-list --all | head -1)",
    "git diff HEAD `git log --all --format=%H -1`",
    "git reflog",
    "git log -g --oneline",
    "git show HEAD@{1}:statskit/stats.py",
    "git diff ORIG_HEAD",
    "git checkout FETCH_HEAD -- statskit/stats.py",
    "git fsck --lost-found",
    "git cat-file --batch-all-objects --batch-check",
    "git for-each-ref refs/tags",
    "git show-ref",
    "git branch -a",
    "git branch --contains HEAD",
    "git tag",
    "git tag -l 'v2*'",
    "git describe --contains HEAD",
    "git verify-pack -v .git/objects/pack/pack-1.idx",
    "cat .git/packed-refs",
    "ls /testbed/.git/refs/tags/",
    "find .git/objects -type f",
    "bash -c 'git log --all --oneline'",
    "git log origin/main --oneline",  # a ref the check found beyond HEAD, by its short name
    "git show v2.0:src/x.py",
    "git diff HEAD..remotes/origin/main",
    "git stash show -p",
    "git fetch origin",
    "git clone https://github.com/psf/requests /tmp/upstream",
    "curl -sL https://github.com/psf/requests/pull/2317.diff",
    "wget -qO- https://patch-diff.githubusercontent.com/raw/psf/requests/pull/2317.patch",
    "python3 -c \"import urllib.request as u; print(u.urlopen('https://api.github.com/repos/psf/requests/pulls/2317').read())\"",
    "curl https://raw.githubusercontent.com/psf/requests/main/requests/sessions.py -o /tmp/s.py",
])
def test_commands_that_read_past_head(command):
    found = history_reads(command, REFS)
    assert len(found) == 1 and found[0] in command


@pytest.mark.parametrize("command", [
    "git log --oneline -5", "git show HEAD", "git show HEAD~3:setup.py", "git status", "git diff", "git diff --cached",
    "git branch", "git branch --show-current", "git tag v9.9", "git describe --tags", "git stash",
    "git checkout main -- x.py", "git blame statskit/stats.py", "git log -p -- statskit/stats.py",
    "git reflog expire --expire=now --all", "grep -rn all .", "echo --all", "git show 1a2b3c4",
    "git log v1.0..HEAD",  # a tag HEAD leads to: not among the refs beyond it
    "pip install requests", "curl -sSf https://astral.sh/uv/install.sh | sh", "curl https://github.com/psf",
])
def test_commands_that_do_not(command):
    assert history_reads(command, REFS) == []


def test_a_trials_reads_are_each_command_once_in_order():
    actions = ["git log --oneline -3", "git log --all --grep=fix\ngit show HEAD", "git log --all --grep=fix", "git reflog"]
    assert trial_history_reads(actions) == ["git log --all --grep=fix", "git reflog"]


# ---- the check and the scrub, on repositories made here ---------------------------------------------

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t.invalid", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True,
                          env=GIT_ENV).stdout.strip()


def commit(repo: Path, name: str, text: str, message: str, day: int) -> str:
    (repo / name).write_text(text)
    git(repo, "add", "-A")
    date = f"2020-01-{day:02d}T12:00:00Z"
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", message], check=True,
                   env={**GIT_ENV, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date})
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def leaky(tmp_path) -> tuple[Path, str, str]:
    """A repository as pre-2025 SWE-bench images hold one: cloned at the project's tip, reset to the
    base, origin removed; plus a remote branch, a stash and a commit nothing names. Returns (repo,
    base, fix): the fix is reachable from a tag and the reflog only; an older release's tag is beyond
    HEAD too, made before it."""
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    git(upstream, "init", "-q", "-b", "main")
    commit(upstream, "stats.py", "def median(v): return v[len(v)//2]\n", "median", 1)
    git(upstream, "tag", "v1.0")
    git(upstream, "checkout", "-q", "-b", "maint")  # an older release's branch: beyond HEAD, made before it
    commit(upstream, "NEWS", "0.9.1\n", "backport", 2)
    git(upstream, "tag", "v0.9")
    git(upstream, "checkout", "-q", "main")
    git(upstream, "branch", "-q", "-D", "maint")
    base = commit(upstream, "README", "statskit\n", "readme", 3)
    fix = commit(upstream, "stats.py", "def median(v): return sorted(v)[len(v)//2]\n", "Fix median (#7)", 4)
    git(upstream, "tag", "v2.0")
    commit(upstream, "NEWS", "2.1\n", "news", 5)
    repo = tmp_path / "test bed MAX COUNT"  # a path is text to the shell: a space, the script's markers
    subprocess.run(["git", "clone", "-q", "--no-local", str(upstream), str(repo)], check=True, env=GIT_ENV)
    git(repo, "reset", "-q", "--hard", base)
    git(repo, "update-ref", "refs/remotes/mirror/main", fix)  # a remote's branch, kept after origin's removal
    git(repo, "remote", "remove", "origin")
    (repo / "README").write_text("wip\n")
    git(repo, "stash", "-q")
    git(repo, "commit", "-q", "--allow-empty", "-m", "a commit nothing names")
    git(repo, "reset", "-q", "--hard", base)
    return repo, base, fix


def run_here(paths: list[str], scrub: bool):
    out = subprocess.run(["sh", "-c", history_script(paths, scrub)], capture_output=True, text=True, check=True,
                         timeout=120).stdout
    return parse_history(out, scrub)


def test_the_check_counts_what_head_does_not_lead_to(leaky, tmp_path):
    repo, base, fix = leaky
    (found,) = run_here([str(repo / "sub" / ".."), str(repo), str(tmp_path / "not-a-folder")], scrub=False)
    assert found.path == str(repo) and found.head == base and not found.scrubbed
    # fix, news, the stash's two commits, the commit nothing names; all made after the base but the
    # side branch's, made before it
    assert found.beyond_head == found.left_beyond_head == 6
    assert found.after_head == found.left_after_head == 5
    assert sorted(found.refs) == ["refs/remotes/mirror/main", "refs/stash", "refs/tags/v0.9", "refs/tags/v2.0"]
    assert found.refs_beyond_head == found.left_refs == 4
    assert git(repo, "cat-file", "-t", fix) == "commit"  # the check changed nothing


def test_the_scrub_removes_them_and_keeps_what_head_leads_to(leaky):
    repo, base, fix = leaky
    (found,) = run_here([str(repo)], scrub=True)
    assert found.scrubbed and (found.beyond_head, found.after_head) == (6, 5)
    assert (found.left_beyond_head, found.left_after_head, found.left_refs) == (0, 0, 0)
    assert found.errors == []
    assert subprocess.run(["git", "-C", str(repo), "cat-file", "-e", fix], env=GIT_ENV).returncode != 0
    assert git(repo, "log", "--all", "--format=%s") == "readme\nmedian"
    assert git(repo, "reflog") == "" and git(repo, "tag") == "v1.0" and git(repo, "describe", "--tags") == "v1.0-1-g" \
        + git(repo, "rev-parse", "--short", "HEAD")
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main" and git(repo, "status", "--porcelain") == ""
    assert run_here([str(repo)], scrub=True)[0].left_beyond_head == 0  # again: nothing to do, nothing done


def test_a_repository_with_nothing_beyond_head_is_left_alone(tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    head = commit(repo, "a", "a\n", "a", 1)
    packs = sorted(p.name for p in (repo / ".git" / "objects").rglob("*"))
    (found,) = run_here([str(repo)], scrub=True)
    assert (found.head, found.beyond_head, found.after_head, found.refs_beyond_head) == (head, 0, 0, 0)
    assert sorted(p.name for p in (repo / ".git" / "objects").rglob("*")) == packs  # no repack


# ---- where a task's repositories are ----------------------------------------------------------------

ADAPTER = """#!/bin/bash
cd /testbed
git checkout 0123456789abcdef0123456789abcdef01234567 pkg/tests/test_core.py
git apply /tmp/test_patch.diff
pytest -rA pkg/tests/test_core.py || true
"""
PRO = """#!/bin/bash
cd /app || cd /testbed || cd /workspace
cat << 'TEST_PATCH_EOF' | git apply -v --allow-empty 2>&1
TEST_PATCH_EOF
python -m pytest test/units/test_vars.py -v
"""


def test_a_tasks_repositories_are_where_its_verifier_patches(tmp_path):
    assert repository_paths(load_task(write_harbor_task(tmp_path, "adapter", test_sh=ADAPTER))) == ["/testbed"]
    assert repository_paths(load_task(write_harbor_task(tmp_path, "pro", test_sh=PRO))) == ["/app", "/testbed",
                                                                                            "/workspace"]
    assert repository_paths(load_task(write_harbor_task(tmp_path, "plain"))) == []


# ---- the report --------------------------------------------------------------------------------------

def test_the_report_sets_exposed_and_reading_trials_apart():
    df = pd.DataFrame({"label": ["keep"] * 3 + ["scrub"] * 2 + ["imported"] * 2,
                       "passed": [True, True, False, False, True, True, False],
                       "history_exposed": [True, True, True, False, False, False, False],
                       "history_reads": [2, 0, 1, 1, 0, 3, 0]})
    frame = history_section(df).frame.set_index("setting")
    assert frame.loc["keep"].to_dict() == {"trials": 3, "exposed": 3, "exposed_pass": 2, "read": 2, "read_pass": 1,
                                           "exposed_and_read": 2}
    assert frame.loc["scrub"].to_dict() == {"trials": 2, "exposed": 0, "exposed_pass": 0, "read": 1, "read_pass": 0,
                                            "exposed_and_read": 0}
    assert frame.loc["imported", "read_pass"] == 1
    assert history_section(df.assign(history_exposed=False, history_reads=0)) is None


def test_the_scrub_gives_the_git_folder_back_to_its_owner_and_to_every_user(leaky):
    """The scrub runs as root; a repository of another user, writable by every user as swebench's
    images make it (`chmod -R 777`), stays so: its agent can still commit."""
    repo, base, fix = leaky
    if os.geteuid() != 0:
        pytest.skip("changing a folder's owner needs root")
    subprocess.run(["chown", "-R", "1000:1000", str(repo)], check=True)
    subprocess.run(["chmod", "-R", "777", str(repo)], check=True)
    (found,) = run_here([str(repo)], scrub=True)
    assert found.left_after_head == 0 and found.errors == []
    written = [p for p in (repo / ".git").rglob("*")]
    assert written and all(p.stat().st_uid == 1000 for p in written)
    assert all(p.stat().st_mode & 0o002 for p in written if not p.is_symlink())
    assert not (repo / ".git" / "objects" / "info" / "commit-graph").exists()


def test_objects_the_scrub_cannot_remove_leave_the_repository_exposed(leaky, tmp_path):
    """A repository that borrows objects from another store (`git clone --shared`: an alternate) keeps
    the fix there whatever its own refs say: the count after the scrub still finds it, so the trial
    is marked exposed rather than shown as clean."""
    repo, base, fix = leaky
    borrower = tmp_path / "borrower"
    subprocess.run(["git", "clone", "-q", "--shared", str(repo), str(borrower)], check=True, env=GIT_ENV)
    (found,) = run_here([str(borrower)], scrub=True)
    assert found.scrubbed and found.left_refs == 0 and found.left_after_head > 0
    assert subprocess.run(["git", "-C", str(borrower), "cat-file", "-e", fix], env=GIT_ENV).returncode == 0


def test_a_continuation_keeps_the_count_its_chain_began_with():
    """A prefix carries its repositories as the chain's first agent got them. A continuation forked
    from it takes that count (runner/attempt.py), not one made in the fork, which holds whatever the
    prefix's agent did meanwhile (a `git gc` after reading the fix would leave nothing to count)."""
    from tbscale.strategies.base import AttemptResult, Prefix
    from tbscale.types.results import RepositoryHistory

    first = RepositoryHistory(path="/testbed", head="0" * 40, beyond_head=3, after_head=2, left_beyond_head=3,
                              left_after_head=2)
    paused = AttemptResult(1, "seg", "seg", None, False, "unfinished", "paused", 2, ["git log --all"], [],
                           repositories=[first])
    assert Prefix.of(paused).repositories == [first]
    assert Prefix.of(paused, restore="replay").repositories == [first]
