"""Datasets by name@version from a registry, offline: the tests make git repositories and registries
(Harbor's registry.json and terminal-bench's legacy one) with file:// URLs, pull datasets from them
at their pinned commits into a cache, reuse the cache, and fail with one line naming the task and
the URL."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tbscale.errors import TbscaleError
from tbscale.tasks import load_tasks
from tbscale.tasks.registry import find_dataset, pull, pull_by_name, read_registry
from tbscale_testing.tasks import write_harbor_task


def git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid", "HOME": str(repo.parent), "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=env).stdout.strip()


@pytest.fixture
def harbor_repo(tmp_path: Path) -> tuple[Path, str, str]:
    """A repository with tasks/hello and tasks/bye (and an unrelated big folder) at commit one;
    hello's instruction changed at commit two."""
    repo = tmp_path / "upstream"
    repo.mkdir()
    git(repo, "init", "-q")
    write_harbor_task(repo / "tasks", "hello", instruction="Say hello (v1).\n")
    write_harbor_task(repo / "tasks", "bye")
    (repo / "unrelated").mkdir()
    (repo / "unrelated" / "blob.bin").write_bytes(b"x" * 100_000)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "one")
    one = git(repo, "rev-parse", "HEAD")
    (repo / "tasks" / "hello" / "instruction.md").write_text("Say hello (v2).\n")
    git(repo, "commit", "-qam", "two")
    return repo, one, git(repo, "rev-parse", "HEAD")


def harbor_registry(tmp_path: Path, repo: Path, one: str, two: str) -> Path:
    url = repo.as_uri()
    rows = [{"name": "demo", "version": "1.0", "description": "first", "tasks": [
                {"name": "hello", "git_url": url, "git_commit_id": one, "path": "tasks/hello"},
                {"name": "bye", "git_url": url, "git_commit_id": one, "path": "tasks/bye"}]},
            {"name": "demo", "version": "2.0", "description": "second", "tasks": [
                {"name": "hello", "git_url": url, "git_commit_id": two, "path": "tasks/hello"}]}]
    path = tmp_path / "registry.json"
    path.write_text(json.dumps(rows))
    return path


def test_a_dataset_pulled_by_name_at_its_pinned_commits(tmp_path, harbor_repo):
    repo, one, two = harbor_repo
    registry = harbor_registry(tmp_path, repo, one, two)
    cache = tmp_path / "cache"
    pulled = pull_by_name("demo@1.0", str(registry), cache=cache)
    assert pulled.commits == {"hello": one, "bye": one} and pulled.fetched == 2 and pulled.reused == 0
    assert (pulled.path / "hello" / "instruction.md").read_text() == "Say hello (v1).\n"  # the pinned commit, not HEAD
    assert sorted(p.name for p in pulled.path.iterdir() if not p.name.startswith(".")) == ["bye", "hello"]
    tasks, problems = load_tasks(pulled.path)
    assert problems == [] and [t.id for t in tasks] == ["bye", "hello"]
    # the cache is reused; a task changed in the cache is fetched again
    again = pull_by_name("demo@1.0", registry.as_uri(), cache=cache)
    assert (again.fetched, again.reused) == (0, 2)
    (pulled.path / "bye" / "instruction.md").write_text("tampered\n")
    third = pull_by_name("demo@1.0", str(registry), cache=cache)
    assert (third.fetched, third.reused) == (1, 1)
    assert (pulled.path / "bye" / "instruction.md").read_text() == "Write 'done' into /app/out.txt.\n"
    # a name alone is its newest version
    newest = pull_by_name("demo", str(registry), cache=cache)
    assert newest.dataset.version == "2.0" and newest.commits == {"hello": two}
    assert (newest.path / "hello" / "instruction.md").read_text() == "Say hello (v2).\n"
    assert newest.manifest().commits == {"hello": two}


def test_only_the_task_paths_are_checked_out(tmp_path, harbor_repo, monkeypatch):
    """Sparse and shallow: the checkout holds the task's path only, at depth one."""
    from tbscale.tasks import registry

    repo, one, two = harbor_repo
    seen = {}
    real = registry._checkout

    def spy(where, git_url, ref, paths, what):
        commit = real(where, git_url, ref, paths, what)
        seen["files"] = sorted(str(p.relative_to(where)) for p in where.rglob("*") if ".git" not in p.parts)
        seen["depth"] = subprocess.run(["git", "rev-list", "--count", "HEAD"], cwd=where, capture_output=True,
                                       text=True).stdout.strip()
        return commit

    monkeypatch.setattr(registry, "_checkout", spy)
    pull_by_name("demo@2.0", str(harbor_registry(tmp_path, repo, one, two)), cache=tmp_path / "cache")
    assert seen["depth"] == "1" and not any(f.startswith("unrelated") for f in seen["files"])
    assert "tasks/hello/task.toml" in seen["files"] and not any(f.startswith("tasks/bye") for f in seen["files"])


@pytest.mark.parametrize("edit, expected", [
    (lambda rows, repo: rows[0]["tasks"][1].update(git_url=(repo.parent / "gone").as_uri()),
     "dataset demo@1.0: task 'bye' ({url}/gone @ {one}): git fetch failed"),
    (lambda rows, repo: rows[0]["tasks"][1].update(git_commit_id="0" * 40),
     "dataset demo@1.0: task 'bye' ({url}/upstream @ 0000000000000000000000000000000000000000): git"),
    (lambda rows, repo: rows[0]["tasks"][1].update(path="tasks/nothing"),
     "dataset demo@1.0: task 'bye' ({url}/upstream @ {one}): 'tasks/nothing' is not a task folder"),
    (lambda rows, repo: rows[0]["tasks"][1].update(path="../outside"),
     "must be a relative path inside the repository"),
])
def test_a_fetch_failure_is_one_line_naming_the_task_and_the_url(tmp_path, harbor_repo, edit, expected):
    repo, one, two = harbor_repo
    registry = harbor_registry(tmp_path, repo, one, two)
    rows = json.loads(registry.read_text())
    edit(rows, repo)
    registry.write_text(json.dumps(rows))
    with pytest.raises(TbscaleError) as err:
        pull_by_name("demo@1.0", str(registry), cache=tmp_path / "cache")
    msg = str(err.value)
    assert "\n" not in msg and expected.format(url=tmp_path.as_uri(), one=one) in msg, msg


def test_an_unreachable_registry_is_a_clean_one_line_error():
    with pytest.raises(TbscaleError) as err:
        read_registry("http://127.0.0.1:9/registry.json")
    msg = str(err.value)
    assert msg.startswith("could not read the registry http://127.0.0.1:9/registry.json: ") and "\n" not in msg


def test_the_legacy_terminal_bench_registry(tmp_path):
    """terminal-bench's registry rows: github_url, dataset_path, commit_hash, task_id_subset;
    task.yaml variants get the legacy harness's ids."""
    repo = tmp_path / "tb"
    (repo / "tasks").mkdir(parents=True)
    git(repo, "init", "-q")
    for name, yaml_text in [("plain", "instruction: Do it.\n"),
                            ("crack", "descriptions:\n  - key: base\n    description: B.\n  - key: easy\n"
                                      "    description: E.\n"),
                            ("skipped", "instruction: Not in the subset.\n")]:
        d = repo / "tasks" / name
        (d / "tests").mkdir(parents=True)
        (d / "task.yaml").write_text(yaml_text)
        (d / "Dockerfile").write_text("FROM debian:bookworm-slim\n")
        (d / "run-tests.sh").write_text("echo\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "tasks")
    commit = git(repo, "rev-parse", "HEAD")
    registry = tmp_path / "tb-registry.json"
    registry.write_text(json.dumps([{"name": "terminal-bench-core", "version": "0.1.1", "description": "core",
                                     "terminal_bench_version": ">=0.1.0", "github_url": repo.as_uri(),
                                     "dataset_path": "tasks", "branch": "main", "commit_hash": commit,
                                     "task_id_subset": ["plain", "crack"]}]))
    ds = find_dataset(read_registry(str(registry)), "terminal-bench-core@0.1.1", str(registry))
    assert ds.format == "terminal-bench"
    pulled = pull(ds, cache=tmp_path / "cache")
    assert pulled.commits == {"crack": commit, "plain": commit}
    tasks, _ = load_tasks(pulled.path)
    assert [t.id for t in tasks] == ["crack", "crack.easy", "plain"]
    again = pull(ds, cache=tmp_path / "cache")
    assert (again.fetched, again.reused) == (0, 2)


def test_cli_datasets_list_and_pull(tmp_path, harbor_repo):
    from tbscale.cli import app

    repo, one, two = harbor_repo
    registry = harbor_registry(tmp_path, repo, one, two)
    listed = CliRunner().invoke(app, ["datasets", "list", "--registry", str(registry)])
    assert listed.exit_code == 0 and "demo@1.0" in listed.stdout and "demo@2.0" in listed.stdout
    pulled = CliRunner().invoke(app, ["datasets", "pull", "demo@1.0", "--registry", registry.as_uri(),
                                      "--cache", str(tmp_path / "cache")])
    assert pulled.exit_code == 0, pulled.output
    assert pulled.stdout.strip().splitlines()[-1] == str(tmp_path / "cache" / "demo" / "1.0")
    bad = CliRunner().invoke(app, ["datasets", "pull", "demo@9", "--registry", str(registry)])
    assert bad.exit_code == 2 and "has no version '9'" in bad.output


def test_a_config_naming_a_dataset_loads_its_tasks_and_a_bad_fetch_exits_2(tmp_path, harbor_repo, monkeypatch):
    from tbscale.cli import app
    from tbscale.runner import experiment_dataset, experiment_tasks, load_experiment

    repo, one, two = harbor_repo
    registry = harbor_registry(tmp_path, repo, one, two)
    monkeypatch.setenv("TBSCALE_DATASETS", str(tmp_path / "cache"))
    config = tmp_path / "exp.yaml"
    config.write_text("name: ds\ntasks: {dataset: demo@1.0, registry: registry.json}\n"
                      "settings: [{name: oracle, agent: oracle}]\n")
    exp = load_experiment(config)
    dataset = experiment_dataset(exp)
    assert [t.id for t in experiment_tasks(exp, dataset=dataset)] == ["bye", "hello"]
    assert dataset.manifest().commits == {"hello": one, "bye": one}
    rows = json.loads(registry.read_text())
    rows[0]["tasks"][0]["git_url"] = (tmp_path / "missing").as_uri()
    registry.write_text(json.dumps(rows))
    (tmp_path / "cache").rename(tmp_path / "cache-old")
    result = CliRunner().invoke(app, ["run", str(config), "--no-preflight"])
    errors = [ln for ln in result.output.splitlines() if ln.startswith("error:")]
    assert result.exit_code == 2 and len(errors) == 1, result.output  # progress lines aside, one error line
    assert "task 'hello'" in errors[0] and (tmp_path / "missing").as_uri() in errors[0]


@pytest.mark.docker
def test_a_run_of_a_registry_dataset_records_name_version_and_every_commit(tmp_path, harbor_repo, monkeypatch):
    from tbscale.cli import app

    repo, one, two = harbor_repo
    registry = harbor_registry(tmp_path, repo, one, two)
    monkeypatch.setenv("TBSCALE_DATASETS", str(tmp_path / "cache"))
    config = tmp_path / "exp.yaml"
    config.write_text(f"name: ds\noutput_dir: {tmp_path / 'results'}\ntasks: {{dataset: demo@1.0, registry: "
                      f"{registry.as_uri()}}}\nsettings: [{{name: oracle, agent: oracle}}]\n")
    result = CliRunner().invoke(app, ["run", str(config), "--no-report"])
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "results" / "ds" / "manifest.json").read_text())
    assert {k: manifest["dataset"][k] for k in ("name", "version", "registry", "commits")} == {
        "name": "demo", "version": "1.0", "registry": registry.as_uri(), "commits": {"hello": one, "bye": one}}
    rows = [json.loads(x) for x in (tmp_path / "results" / "ds" / "trials.jsonl").read_text().splitlines()]
    assert sorted((r["task_id"], r["passed"]) for r in rows) == [("bye", True), ("hello", True)]


def test_an_unpinned_task_follows_the_branch_tip(tmp_path, harbor_repo):
    repo, one, two = harbor_repo
    registry = tmp_path / "tip.json"
    registry.write_text(json.dumps([{"name": "tip", "version": "head", "description": "", "tasks": [
        {"name": "hello", "git_url": repo.as_uri(), "path": "tasks/hello"}]}]))
    first = pull_by_name("tip", str(registry), cache=tmp_path / "cache")
    assert first.commits == {"hello": two}
    (repo / "tasks" / "hello" / "instruction.md").write_text("Say hello (v3).\n")
    git(repo, "commit", "-qam", "three")
    again = pull_by_name("tip@head", str(registry), cache=tmp_path / "cache")
    assert again.commits == {"hello": git(repo, "rev-parse", "HEAD")} and again.fetched == 1
    assert (again.path / "hello" / "instruction.md").read_text() == "Say hello (v3).\n"
