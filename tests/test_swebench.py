"""SWE-bench in tbscale: instances through `datasets`, images, patches, grading with swebench.

The end-to-end part makes a tiny SWE-bench-format benchmark from a local git repository
(tbscale_testing.swebench_demo: statskit, whose median() is wrong for even-length lists; one FAIL_TO_PASS
and four PASS_TO_PASS tests), builds its image locally, runs the oracle (gold patch) and the nop
agent through the runner, grades through the swebench code path, and checks tbscale's verdicts
against swebench's own: get_eval_report on the same test log, and `python -m
swebench.harness.run_evaluation` on the exported predictions in its own containers.
No network is used: no hub, no Docker Hub, no GitHub.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tbscale.errors import TbscaleError
from tbscale_testing import swebench_demo as demo_mod
from tbscale_testing.one_command_agent import register_one_command_agent
from tbscale.tasks.swebench.config import parse_source

ROOT = Path(__file__).resolve().parents[1]
TIMINGS: dict[str, float] = {}


# ---- fixtures -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cache_home(tmp_path_factory):
    """Solutions and datasets caches inside the test's temp folder, not the user's home."""
    d = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(d))
        yield d


@pytest.fixture(scope="module")
def demo(tmp_path_factory, cache_home):
    t = time.monotonic()
    d = demo_mod.make_demo(tmp_path_factory.mktemp("swebench") / "demo")
    TIMINGS["make_demo (git repo, task repo, swebench write_parquets)"] = time.monotonic() - t
    return d


def source(demo, **kw):
    return {"dataset": str(demo.dataset_jsonl), "task_repo": str(demo.task_repo),
            "cache_dir": str(demo.root / "hf-cache"), **kw}


@pytest.fixture(scope="module")
def built(demo):
    """The demo image, built through `build: docker` (cached by the task folder's content hash)."""
    from tbscale.runner.plan import swebench_tasks as load_swebench_tasks

    t = time.monotonic()
    tasks = load_swebench_tasks(source(demo, build="docker", cpus=1, memory_mb=1024, eval_timeout_sec=300))
    TIMINGS["load + image build (docker; ~0 when the image is current)"] = time.monotonic() - t
    return tasks[0]


def _events(run_dir: Path, row: dict, kind: str) -> list[dict]:
    lines = (run_dir / row["trajectory_path"]).read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["type"] == kind]


# Four ways a patch made the demo's tests pass with its bug left in place (swebench graded each
# resolved before the patch was reviewed): a conftest.py hook that reports every test passed; a
# fixed copy of the package beside the tests, which their `from statskit import` takes first; an
# __init__.py in the tests' folder that replaces median(); pytest's `pythonpath` put ahead of the
# project a folder with a fixed copy of the package.
FIXED_MEDIAN = ("def median(values):\n    v = sorted(values)\n    if not v:\n        raise ValueError\n"
                "    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2\n")
PLANTS = "\n".join([
    "cat > conftest.py <<'EOF'",
    "import pytest",
    "@pytest.hookimpl(hookwrapper=True)",
    "def pytest_runtest_makereport(item, call):",
    "    (yield).get_result().outcome = 'passed'",
    "EOF",
    "sed -n '/^def mean/,/^$/p' statskit/stats.py > tests/statskit.py",
    f"printf '%s' '{FIXED_MEDIAN}' >> tests/statskit.py",
    f"printf 'import statskit, statskit.stats\\n%s\\nstatskit.median = statskit.stats.median = median\\n' '{FIXED_MEDIAN}'"
    " > tests/__init__.py",
    f"mkdir -p alt && cp -r statskit alt/ && printf '%s' '{FIXED_MEDIAN}' >> alt/statskit/stats.py && sed -i 's/pythonpath = \\[\".\"\\]/pythonpath = [\"alt\", \".\"]/' pyproject.toml",
])


# runs PLANTS and submits, leaving the bug in place
register_one_command_agent("plants-what-the-tests-read", PLANTS)


@pytest.fixture(scope="module")
def e2e(demo, built, tmp_path_factory):
    """The oracle, the nop and the planting agent through the runner, one trial each, graded by
    swebench."""
    from tbscale.config import Experiment
    from tbscale.runner import Runner, load_rows

    exp = Experiment.model_validate({
        "name": "swebench-e2e", "tasks": {"swebench": source(demo)}, "trials": 1, "concurrency": 2,
        "settings": [{"name": "oracle", "agent": "oracle"}, {"name": "nop", "agent": "nop"},
                     {"name": "planted", "agent": "plants-what-the-tests-read"}]})
    run_dir = tmp_path_factory.mktemp("runs") / "swebench-e2e"
    t = time.monotonic()
    asyncio.run(Runner(exp, [built], run_dir).run())
    TIMINGS["runner: oracle + nop trials, concurrently"] = time.monotonic() - t
    rows = {r.setting: r.model_dump(mode="json") for r in load_rows(run_dir)}  # as the trial lines hold them
    for name, row in rows.items():
        for k, v in row["timing"].items():
            TIMINGS[f"  {name}: {k}"] = v
        for ev in _events(run_dir, row, "verifier"):
            for k, v in ev["details"]["timing"].items():
                TIMINGS[f"  {name}: verify/{k}"] = v
    return run_dir, rows


# ---- config -------------------------------------------------------------------------------------

@pytest.mark.parametrize("raw, message", [
    ({"dataset": "x.jsonl", "colour": 1}, "tasks.swebench.colour: unknown key"),
    ({}, "tasks.swebench: give `dataset`"),
    ({"dataset": "x.jsonl", "build": "podman"}, "tasks.swebench.build: Input should be 'none', 'docker' or 'swebench'"),
    ({"dataset": "x.jsonl", "build": "swebench"}, "tasks.swebench: build: swebench needs `task_repo`"),
    ({"dataset": "x.jsonl", "filter": "("}, "tasks.swebench.filter: not a regular expression"),
    ({"dataset": "x.jsonl", "slice": "a:b"}, "tasks.swebench.slice: 'a:b' is not a slice"),
    ({"dataset": "x.jsonl", "grading_container": "old"}, "tasks.swebench.grading_container: Input should be"),
])
def test_config_errors_name_the_key(raw, message) -> None:
    with pytest.raises(TbscaleError) as e:
        parse_source(raw)
    assert str(e.value).startswith(message)
    assert "\n" not in str(e.value)


def test_configs_in_the_repository_validate() -> None:
    from tbscale.runner import load_experiment

    verified = load_experiment(ROOT / "configs" / "swebench_verified_turnbon.yaml")
    src = parse_source(verified.tasks.swebench)
    assert src.dataset == "SWE-bench/SWE-bench_Verified" and src.build == "none"
    assert all(m.api_key_env for m in verified.models.values())
    local = load_experiment(ROOT / "configs" / "swebench_local_demo.yaml")
    src = parse_source(local.tasks.swebench)
    assert src.build == "docker" and src.task_repo
    assert {s.agent for s in local.settings} == {"oracle", "nop", "bash"}


# ---- instances through datasets -----------------------------------------------------------------

def test_local_jsonl_json_and_parquet_load_the_same_instance(demo, tmp_path) -> None:
    from tbscale.tasks.swebench import select_instances

    rows_json = [json.loads(line) for line in demo.dataset_jsonl.read_text().splitlines()]
    (tmp_path / "test.json").write_text(json.dumps(rows_json))
    seen = []
    for ds in (demo.dataset_jsonl, tmp_path / "test.json", demo.dataset_parquet, demo.dataset_parquet.parent):
        _, rows = select_instances({"dataset": str(ds), "cache_dir": str(tmp_path / "c")})
        (row,) = rows
        f2p = row["FAIL_TO_PASS"]
        seen.append((row["instance_id"], row["base_commit"], row["eval_script"], row["patch"],
                     json.loads(f2p) if isinstance(f2p, str) else list(f2p)))
    assert all(s == seen[0] for s in seen)
    assert seen[0][4] == demo_mod.FAIL_TO_PASS


def test_task_repo_alone_is_a_source(demo) -> None:
    from tbscale.tasks.swebench import select_instances

    _, rows = select_instances({"task_repo": str(demo.task_repo)})
    assert [r["instance_id"] for r in rows] == [demo.instance_id]
    assert rows[0]["eval_script"] == demo.instance["eval_script"]


def _many(demo, tmp_path, n=6) -> Path:
    base = json.loads(demo.dataset_jsonl.read_text().splitlines()[0])
    path = tmp_path / "many.jsonl"
    path.write_text("".join(json.dumps({**base, "instance_id": f"statskit__statskit-{i}"}) + "\n" for i in range(n)))
    return path


def test_filters_ids_regex_slice_include_exclude(demo, tmp_path) -> None:
    from tbscale.tasks.swebench import select_instances

    ds = str(_many(demo, tmp_path))

    def ids(include=None, exclude=None, **kw):
        return [r["instance_id"][-1] for r in select_instances({"dataset": ds, **kw}, include, exclude)[1]]

    assert ids() == list("012345")
    assert ids(instance_ids=["statskit__statskit-4", "statskit__statskit-1"]) == ["1", "4"]  # dataset order
    assert ids(filter=r"-[2-5]$") == list("2345")
    assert ids(filter=r"-[2-5]$", slice="1:3") == list("34")
    assert ids(slice="::2") == list("024")
    assert ids(include=["statskit__statskit-5"]) == ["5"]
    assert ids(exclude=["statskit__statskit-0"], slice="0:2") == ["1"]
    with pytest.raises(TbscaleError, match="instance_ids: not in the dataset: nope"):
        ids(instance_ids=["nope"])
    with pytest.raises(TbscaleError, match="tasks.include: not among the selected"):
        ids(include=["statskit__statskit-0"], slice="3:")
    with pytest.raises(TbscaleError, match="no instances left"):
        ids(filter="zzz")


def test_rows_without_swebench5_columns_are_refused_by_name(demo, tmp_path) -> None:
    from tbscale.tasks.swebench import select_instances

    legacy = {k: v for k, v in json.loads(demo.dataset_jsonl.read_text()).items()
              if k not in ("eval_script", "log_parser", "eval_type", "image")}
    (tmp_path / "legacy.jsonl").write_text(json.dumps(legacy) + "\n")
    with pytest.raises(TbscaleError, match=r"statskit__statskit-1 has no eval_script, log_parser, eval_type .*"
                                           r"SWE-bench/SWE-bench_Verified"):
        select_instances({"dataset": str(tmp_path / "legacy.jsonl"), "cache_dir": str(tmp_path / "c")})
    bad = {**json.loads(demo.dataset_jsonl.read_text()), "log_parser": "parse_log_nothing"}
    (tmp_path / "bad.jsonl").write_text(json.dumps(bad) + "\n")
    with pytest.raises(TbscaleError, match="parse_log_nothing.*PARSER_REGISTRY"):
        select_instances({"dataset": str(tmp_path / "bad.jsonl"), "cache_dir": str(tmp_path / "c")})


def test_a_dry_run_builds_no_instance_image(demo, tmp_path, monkeypatch) -> None:
    """`run --dry-run` of a config whose instances' images are built first (`build: docker`) plans
    them and builds nothing."""
    import yaml
    from typer.testing import CliRunner

    from tbscale.cli import app
    from tbscale.environments import swebench_images

    def no_build(*a, **k):
        raise AssertionError("a dry run built an image")

    monkeypatch.setattr(swebench_images, "prepare_images", no_build)
    cfg = tmp_path / "exp.yaml"
    cfg.write_text(yaml.safe_dump({"name": "swe-dry", "tasks": {"swebench": source(demo, build="docker")},
                                   "output_dir": str(tmp_path / "results"),
                                   "settings": [{"name": "oracle", "agent": "oracle"}]}))
    res = CliRunner().invoke(app, ["run", str(cfg), "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "  oracle: 1 planned, 0 kept from an earlier run, 1 to run" in res.output
    assert not (tmp_path / "results").exists()


def test_missing_local_file_is_named(tmp_path) -> None:
    from tbscale.tasks.swebench import select_instances

    with pytest.raises(TbscaleError, match="dataset: ./nowhere.jsonl: no such file or folder"):
        select_instances({"dataset": "./nowhere.jsonl"})


def test_hub_dataset_offline_fails_fast_with_a_clear_error(monkeypatch, tmp_path) -> None:
    """A hub name on a machine that cannot reach the hub: one clear line within seconds (the
    probe switches datasets to offline mode instead of minutes of retries), and the offline
    switches are restored afterwards."""
    import datasets.config as dconfig
    from huggingface_hub import constants

    from tbscale.tasks.swebench import select_instances

    for k in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setattr(constants, "ENDPOINT", "https://127.0.0.1:9")  # nothing listens there
    monkeypatch.setattr(dconfig, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    t = time.monotonic()
    with pytest.raises(TbscaleError) as e:
        select_instances({"dataset": "tbscale-nobody/not-a-dataset", "cache_dir": str(tmp_path)})
    assert time.monotonic() - t < 30
    msg = str(e.value)
    assert msg.startswith("tasks.swebench.dataset: tbscale-nobody/not-a-dataset: the Hugging Face hub cannot be reached")
    assert "to_parquet" in msg and "\n" not in msg
    assert dconfig.HF_HUB_OFFLINE is False and constants.HF_HUB_OFFLINE is False
    monkeypatch.setattr(dconfig, "HF_HUB_OFFLINE", True)  # as HF_HUB_OFFLINE=1 in the environment
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(TbscaleError, match="hub offline mode is on"):
        select_instances({"dataset": "tbscale-nobody/not-a-dataset", "cache_dir": str(tmp_path)})


# ---- tasks, images, instruction, oracle ---------------------------------------------------------

def test_image_names_template_instance_and_swebench_derived(demo) -> None:
    from swebench.task.checks import expected_image

    from tbscale.tasks.swebench.images import resolve_image

    row = dict(demo.instance)
    src = parse_source({"dataset": "x.jsonl"})
    assert resolve_image(row, src) == row["image"]  # the instance's own
    row.pop("image")
    assert resolve_image(row, src) == expected_image(row["instance_id"]) == \
        "swebench/sweb.eval.x86_64.statskit_1776_statskit-1:latest"
    assert resolve_image(row, parse_source({"dataset": "x.jsonl", "namespace": None, "tag": "v2"})) == \
        "sweb.eval.x86_64.statskit__statskit-1:v2"
    templ = parse_source({"dataset": "x.jsonl", "image": "registry.local/{repo_slug}:{docker_id}-{version}"})
    assert resolve_image(row, templ) == "registry.local/statskit__statskit:statskit_1776_statskit-1-0.1"
    with pytest.raises(TbscaleError, match="tasks.swebench.image: cannot fill .*KeyError"):
        resolve_image(row, parse_source({"dataset": "x.jsonl", "image": "x/{nope}"}))


def test_task_instruction_workdir_limits_and_hidden_data(demo) -> None:
    from tbscale.runner.plan import swebench_tasks as load_swebench_tasks

    (task,) = load_swebench_tasks(source(demo), build=False)
    assert task.id == demo.instance_id and task.format == "swebench"
    assert task.workdir == "/testbed" and task.image == demo.image and task.environment_dir is None
    assert demo_mod.PROBLEM.strip() in task.instruction
    assert "/testbed" in task.instruction and "Do not modify" in task.instruction
    assert demo_mod.HINTS not in task.instruction and "test_median_even" not in task.instruction
    assert task.cpus == 2.0 and task.memory_mb == 4096 and task.verifier_timeout_sec == 1800
    assert task.extra["instance"]["image"] == task.image
    (hinted,) = load_swebench_tasks(source(demo, include_hints=True,
                                           instruction_template="Fix {instance_id} in {repo_dir}:\n{problem_statement}"),
                                    build=False)
    assert hinted.instruction.startswith("Fix statskit__statskit-1 in /testbed:\nmedian()")
    assert hinted.instruction.endswith(demo_mod.HINTS)


def test_oracle_step_applies_the_gold_patch(demo, tmp_path) -> None:
    """The reference solution is one action (the oracle runs it as a file, the simulated model
    types it); run it against a clone of the repository at the base commit."""
    from tbscale.runner.plan import swebench_tasks as load_swebench_tasks

    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(demo.repo), str(clone)], check=True)
    (task,) = load_swebench_tasks(source(demo, repo_dir=str(clone)), build=False)
    (step,) = task.solution_steps()
    assert (task.solution_dir / "solve.sh").read_text().strip() == step
    subprocess.run(["bash", "-c", step], check=True, capture_output=True)
    assert (clone / "statskit/stats.py").read_text() == \
        demo_mod.FILES["statskit/stats.py"].replace(*demo_mod.GOLD_EDIT)
    diff = subprocess.run(["git", "-C", str(clone), "diff"], capture_output=True, text=True, check=True).stdout
    assert diff == demo.patches["gold"]


@pytest.mark.docker
def test_swebench_build_path_uses_swebench_image_builder(demo, tmp_path, monkeypatch) -> None:
    """`build: swebench` hands swebench.image_builder an ImageSpec per instance whose name is the
    name tbscale runs the instance under, with the task repo's Dockerfile and context. Dry run:
    swebench writes the Dockerfile it would build (it builds with buildx, absent here)."""
    from swebench.image_builder.constants import IMAGE_BUILDER_LOG_DIR

    from tbscale.tasks.swebench import select_instances
    from tbscale.environments.swebench_images import _task_repo_parts, build_with_swebench
    from tbscale.tasks.swebench.images import resolve_image

    monkeypatch.chdir(tmp_path)  # swebench writes its build logs under ./logs/image_builder
    src, rows = select_instances(source(demo, build="swebench"))
    images = {r["instance_id"]: resolve_image(r, src) for r in rows}
    dockerfiles, contexts = _task_repo_parts(src, list(images))
    (spec,) = build_with_swebench(rows, images, dockerfiles, contexts, src, log=lambda m: None, dry_run=True)
    assert spec.name == demo.image
    assert spec.context_dir == str(demo.task_repo / "tasks" / demo.instance_id)
    written = tmp_path / IMAGE_BUILDER_LOG_DIR / spec.filesafe_name / "Dockerfile"
    assert written.read_text() == (demo.task_repo / "tasks" / demo.instance_id / "Dockerfile").read_text()


@pytest.mark.docker
def test_swebench_builds_on_the_runs_engine_and_its_buildx_is_pointed_there(demo, monkeypatch) -> None:
    """`build: swebench` on a Docker host: swebench's builder gets a client of that engine, and the
    `docker buildx` it runs sees DOCKER_HOST naming it, for the build only."""
    import swebench.image_builder as builder

    from tbscale.environments.swebench_images import _task_repo_parts, build_with_swebench
    from tbscale.tasks.swebench import select_instances
    from tbscale.tasks.swebench.images import resolve_image
    from tbscale_testing.engine import TcpToDockerSocket

    seen = {}
    monkeypatch.setattr(builder, "build_instance_images", lambda client, image_specs, **kw: seen.update(
        base_url=client.api.base_url, docker_host=os.environ.get("DOCKER_HOST"), names=[s.name for s in image_specs]))
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    src, rows = select_instances(source(demo, build="swebench"))
    images = {r["instance_id"]: resolve_image(r, src) for r in rows}
    dockerfiles, contexts = _task_repo_parts(src, list(images))
    proxy = TcpToDockerSocket()
    try:
        build_with_swebench(rows, images, dockerfiles, contexts, src, log=lambda m: None, dry_run=True, host=proxy.url)
    finally:
        proxy.close()
    assert seen == {"base_url": f"http://127.0.0.1:{proxy.port}", "docker_host": proxy.url, "names": [demo.image]}
    assert "DOCKER_HOST" not in os.environ


# ---- export and command registration ------------------------------------------------------------

def _fake_run(tmp_path: Path) -> Path:
    """A run folder as the runner writes it: two settings, two trials, a multi-attempt trial whose
    final attempt is not the last one, a trial without a verifier event, and a resumed duplicate."""
    run = tmp_path / "myrun"
    (run / "trajectories" / "a__a-1").mkdir(parents=True)
    rows, n = [], 0

    def trial(setting, task, t, patches, final, fmt="swebench"):
        nonlocal n
        n += 1
        rel = f"trajectories/{task}/{setting}__t{t}__{n}.jsonl"
        (run / rel).parent.mkdir(parents=True, exist_ok=True)
        events = [{"type": "start"}] + [{"type": "verifier", "attempt": i, "details": {"model_patch": p}}
                                        for i, p in enumerate(patches)]
        (run / rel).write_text("".join(json.dumps(e) + "\n" for e in events))
        rows.append({"schema_version": 2, "run": "myrun", "setting": setting, "setting_key": f"key-{setting}",
                     "trial_key": f"k{n}", "task_id": task, "trial": t, "task_format": fmt, "ending": "wrong_submission",
                     "trajectory_path": rel, "final_attempt": final})

    trial("base", "a__a-1", 0, ["p-a0"], 0)
    trial("base", "b__b-2", 0, [], 0)  # sandbox died before grading
    trial("base", "a__a-1", 1, ["p-a1-old"], 0)
    trial("base", "a__a-1", 1, ["p-a1"], 0)  # the same trial again (a later line wins)
    trial("bon", "a__a-1", 0, ["x0", "x1-chosen", "x2"], 1)
    trial("bon", "t-bench-task", 0, ["nope"], 0, fmt="harbor")
    (run / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def test_export_one_file_per_setting_and_trial(tmp_path) -> None:
    from swebench.harness.utils import get_predictions_from_file

    from tbscale.analysis.swebench_export import export_predictions

    files = export_predictions(_fake_run(tmp_path), tmp_path / "out")
    assert [(f.setting, f.trial, f.path.name) for f in files] == [
        ("base", 0, "base__t0.jsonl"), ("base", 1, "base__t1.jsonl"), ("bon", 0, "bon__t0.jsonl")]
    got = {f.path.name: get_predictions_from_file(str(f.path), "unused", "test") for f in files}
    assert got["base__t0.jsonl"] == [
        {"instance_id": "a__a-1", "model_name_or_path": "myrun__base__t0", "model_patch": "p-a0"},
        {"instance_id": "b__b-2", "model_name_or_path": "myrun__base__t0", "model_patch": ""}]
    assert [p["model_patch"] for p in got["base__t1.jsonl"]] == ["p-a1"]
    assert got["bon__t0.jsonl"] == [{"instance_id": "a__a-1", "model_name_or_path": "myrun__bon__t0",
                                     "model_patch": "x1-chosen"}]
    with pytest.raises(TbscaleError, match="no SWE-bench trials for settings zzz"):
        export_predictions(_fake_run(tmp_path / "again"), settings=["zzz"])


def test_export_command(tmp_path) -> None:
    from tbscale.cli import app

    run = _fake_run(tmp_path)
    res = CliRunner().invoke(app, ["export", "swebench-preds", str(run), "--setting", "bon",
                                   "--model-name", "m-{setting}-{trial}"])
    assert res.exit_code == 0, res.output
    line = json.loads((run / "swebench_predictions" / "bon__t0.jsonl").read_text())
    assert line["model_name_or_path"] == "m-bon-0"
    # One `export` group holds every exporter.
    res = CliRunner().invoke(app, ["export", "--help"])
    assert res.exit_code == 0 and "swebench-preds" in res.output and "verifier-data" in res.output


def test_verifier_is_found_by_task_format() -> None:
    import tbscale.verifiers.swebench
    from tbscale.verifiers import verifier_for

    assert verifier_for("swebench") is tbscale.verifiers.swebench.verify_swebench


def test_list_command(demo, tmp_path) -> None:
    from tbscale.cli import app

    cfg = tmp_path / "exp.yaml"
    cfg.write_text(yaml.safe_dump({"name": "l", "tasks": {"swebench": source(demo, image="local/{docker_id}:t")},
                                   "settings": [{"name": "nop", "agent": "nop"}]}))
    res = CliRunner().invoke(app, ["swebench", "list", str(cfg)])
    assert res.exit_code == 0, res.output
    assert "statskit__statskit-1" in res.output and "local/statskit_1776_statskit-1:t" in res.output


# ---- end to end (Docker) -------------------------------------------------------------------------

@pytest.mark.docker
def test_oracle_is_resolved_and_nop_is_not(demo, e2e) -> None:
    run_dir, rows = e2e
    oracle, nop = rows["oracle"], rows["nop"]
    assert (oracle["reward"], oracle["passed"], oracle["ending"]) == (1.0, True, "pass")
    assert (nop["reward"], nop["passed"], nop["ending"]) == (0.0, False, "wrong_submission")
    (ov,) = _events(run_dir, oracle, "verifier")
    assert ov["details"]["status"] == "resolved" and ov["details"]["swebench_version"] == "5.0.2"
    assert ov["details"]["model_patch"] == demo.patches["gold"]  # the diff against the base commit
    assert ov["details"]["tests"] == {"FAIL_TO_PASS": "1/1", "PASS_TO_PASS": "4/4"}
    assert ov["details"]["apply_command"] == "git apply --verbose"
    (nv,) = _events(run_dir, nop, "verifier")
    assert nv["details"]["status"] == "empty_patch" and nv["details"]["model_patch"] == ""
    (start,) = _events(run_dir, oracle, "attempt_start")
    assert start["image"] == demo.image
    # The image is the one `build: docker` made from this task folder (rebuilt when it changes).
    from tbscale.environments.docker import client
    from tbscale.environments.swebench_images import CONTEXT_LABEL
    from tbscale.seeds import hash_directory

    labels = client().images.get(demo.image).labels
    assert labels[CONTEXT_LABEL] == hash_directory(demo.task_repo / "tasks" / demo.instance_id)


@pytest.mark.docker
def test_a_patch_that_changes_what_the_tests_read_is_tampered_whatever_swebench_says(demo, e2e) -> None:
    """swebench grades the planted patch resolved (the bug is still there: the reference harness
    would count it); the attempt is `tampered`, never a pass, and its trial line says why."""
    run_dir, rows = e2e
    row = rows["planted"]
    (ev,) = _events(run_dir, row, "verifier")
    assert ev["details"]["status"] == "resolved" and "statskit/stats.py" not in ev["details"]["patch_files"]
    assert (row["reward"], row["passed"], row["ending"]) == (1.0, False, "tampered")
    found = {e["kind"]: e["paths"] for e in row["tampering"] if e["source"] == "patch"}
    assert found == {"test_config_planted": ["conftest.py", "pyproject.toml"],
                     "tests_written": ["tests/__init__.py", "tests/statskit.py"]}
    assert ev["details"]["patch_tampering"] == [e for e in row["tampering"] if e["source"] == "patch"]
    assert "review_patch" in ev["details"]["timing"]


@pytest.mark.docker
def test_verdict_agrees_with_swebench_report_on_the_same_log(demo, e2e) -> None:
    """swebench's get_eval_report, with a TestSpec swebench makes from the dataset row, on the test
    log tbscale kept: the same resolved flag and the same per-test lists."""
    from swebench.harness.grading import get_eval_report
    from swebench.harness.utils import make_test_spec

    run_dir, rows = e2e
    (ev,) = _events(run_dir, rows["oracle"], "verifier")
    log = run_dir / "oracle_test_output.txt"
    log.write_text(ev["output"])
    spec = make_test_spec(json.loads(demo.dataset_jsonl.read_text()))
    theirs = get_eval_report(spec, {"instance_id": demo.instance_id, "model_name_or_path": "x",
                                    "model_patch": ev["details"]["model_patch"]}, str(log), True)[demo.instance_id]
    assert theirs["resolved"] is True is ev["details"]["resolved"]
    assert theirs["tests_status"] == ev["details"]["tests_status"]


@pytest.mark.docker
@pytest.mark.slow
def test_exported_predictions_run_through_swebench_run_evaluation(demo, e2e, tmp_path) -> None:
    """`python -m swebench.harness.run_evaluation` accepts the exported files and, in its own
    containers, reaches tbscale's verdicts: the oracle's patch resolved with the same test lists,
    the nop's empty patch counted as such."""
    from tbscale.analysis.swebench_export import export_predictions

    run_dir, rows = e2e
    files = {f.setting: f for f in export_predictions(run_dir, tmp_path / "preds")}
    t = time.monotonic()
    reports = {}
    for setting in ("oracle", "nop"):
        model = files[setting].predictions[0]["model_name_or_path"]
        for attempt in range(3):
            run_id = f"tbscale-test-{setting}-{os.getpid()}-{attempt}"
            argv = [sys.executable, "-m", "swebench.harness.run_evaluation", "-d", str(demo.dataset_jsonl),
                    "-p", str(files[setting].path), "-id", run_id, "--max_workers", "1",
                    "--report_dir", str(tmp_path / "reports"), "-t", "300"]
            res = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=600)
            for _ in range(5):
                if res.returncode == 0 or not _lost_a_listed_object(res.stderr):
                    break
                # swebench's closing report lists every container and every image on the engine, then
                # inspects each one: one that another test removes in between (a container, a fork's
                # snapshot image) fails it with a 404 after the evaluation itself is done. Again (its
                # results are cached, so only the report runs again); on a busy engine the second
                # report once lost one too.
                res = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=600)
            assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
            # swebench reads the verdict from its tests' output, which it takes from an exec's stream.
            # Under load the start of that stream is sometimes lost (moby/moby#27289, the race
            # tbscale's own execs wait out: environments/docker.py), and with it the "Start Test
            # Output" marker; the instance then reads as a patch that did not apply (seen once, in a
            # fresh-clone run: pytest's "5 passed" kept, the marker gone). Evaluated again, under a
            # new run id.
            output = tmp_path / "logs/run_evaluation" / run_id / model / demo.instance_id / "test_output.txt"
            if not output.is_file() or ">>>>> Start Test Output" in output.read_text(errors="replace"):
                break
        reports[setting] = json.loads((tmp_path / "reports" / f"{model}.{run_id}.json").read_text())
        if setting == "oracle":
            inst = json.loads((tmp_path / "logs/run_evaluation" / run_id / model / demo.instance_id /
                               "report.json").read_text())[demo.instance_id]
    TIMINGS["swebench run_evaluation on the exports (oracle + nop)"] = time.monotonic() - t
    assert reports["oracle"]["resolved_ids"] == [demo.instance_id]
    assert reports["nop"]["empty_patch_ids"] == [demo.instance_id] and reports["nop"]["resolved_ids"] == []
    (ev,) = _events(run_dir, rows["oracle"], "verifier")
    assert inst["resolved"] is True and inst["tests_status"] == ev["details"]["tests_status"]


def _lost_a_listed_object(stderr: str) -> bool:
    return ("make_run_report" in stderr and ("containers.list" in stderr or "images.list" in stderr)
            and "404 Client Error" in stderr)


def _box(task):
    from tbscale.environments import StartSpec
    from tbscale.environments.docker import Container

    return Container.start(StartSpec(task.image, cpus=1, memory_mb=1024, workdir=task.workdir))


def _grade_directly(task, setup: str, timeout: float = 300, **grading):
    """The swebench verifier on a fresh container after running `setup` in it (as an agent would)."""
    import copy

    from tbscale.environments import StartSpec
    from tbscale.environments.docker import Container
    from tbscale.verifiers import VerifierContext, verify

    task = copy.deepcopy(task)
    task.extra["grading"].update(grading)
    box = _box(task)
    try:
        if setup:
            res = box.exec(setup, 60)
            assert res.exit_code == 0, res.output
        spec = StartSpec(task.image, cpus=1, memory_mb=1024, workdir=task.workdir)
        return verify(VerifierContext(task=task, env=box, timeout_sec=timeout, spec=spec, start=Container.start))
    finally:
        box.remove()


def _swebench_verdict(demo, verdict) -> dict:
    from swebench.harness.grading import get_eval_report
    from swebench.harness.utils import make_test_spec

    log = demo.root / "direct_test_output.txt"
    log.write_text(verdict.output)
    spec = make_test_spec(json.loads(demo.dataset_jsonl.read_text()))
    return get_eval_report(spec, {"instance_id": demo.instance_id, "model_name_or_path": "x",
                                  "model_patch": verdict.details["model_patch"]}, str(log), True)[demo.instance_id]


@pytest.mark.docker
def test_wrong_patch_is_unresolved_and_patch_extraction_rules(demo, built) -> None:
    """A fix that breaks a PASS_TO_PASS test, plus an untracked text file (kept in the patch), a
    binary file and bytecode (left out), graded in a fresh container as swebench would."""
    wrong = demo.patches["wrong"].replace("'", "'\\''")
    setup = (f"printf '%s' '{wrong}' | git apply - && echo note > NOTES.txt && printf '\\x00\\x01\\x02' > blob.bin"
             " && python -c 'import statskit' && ls statskit/__pycache__"
             # what the review leaves alone: a test the eval resets, a test module nothing runs,
             # pyproject's other tables
             " && echo '# edited' >> tests/test_stats.py && echo 'def test_repro(): pass' > tests/test_repro.py"
             " && sed -i 's/0.1.0/0.1.1/' pyproject.toml")
    v = _grade_directly(built, setup)
    d = v.details
    assert (v.reward, v.passed, v.error, d["status"]) == (0.0, False, None, "unresolved")
    assert d["tests"] == {"FAIL_TO_PASS": "1/1", "PASS_TO_PASS": "3/4"}
    assert d["tests_status"]["PASS_TO_PASS"]["failure"] == ["tests/test_stats.py::test_median_odd"]
    assert sorted(d["patch_files"]) == ["NOTES.txt", "pyproject.toml", "statskit/stats.py", "tests/test_repro.py",
                                        "tests/test_stats.py"]
    assert "patch_tampering" not in d and d["patch_tests_reset"] == ["tests/test_stats.py"]
    assert d["patch_excluded_binary"] == ["blob.bin"] and "__pycache__" not in d["model_patch"]
    theirs = _swebench_verdict(demo, v)
    assert theirs["resolved"] is False and theirs["tests_status"] == d["tests_status"]


@pytest.mark.docker
def test_empty_patch_evaluated_on_request_and_same_container_mode(demo, built) -> None:
    """evaluate_empty_patch runs the tests on the untouched repository (the FAIL_TO_PASS test
    fails); grading_container: same grades the agent's container as it stands."""
    v = _grade_directly(built, "", evaluate_empty_patch=True)
    assert (v.reward, v.details["status"], v.details["tests"]["FAIL_TO_PASS"]) == (0.0, "unresolved", "0/1")
    assert _swebench_verdict(demo, v)["tests_status"] == v.details["tests_status"]
    step = built.solution_steps()[0]
    v = _grade_directly(built, step, grading_container="same")
    assert (v.reward, v.passed, v.details["status"]) == (1.0, True, "resolved")
    assert "grading_container" not in v.details["timing"] and v.details["grading_container"] == "same"


@pytest.mark.docker
def test_infrastructure_failures_are_labelled(demo, built) -> None:
    """Not wrong submissions: an eval past its time limit, swebench's environment-tier log
    signature, a grading image that cannot start, a failure of the grading code. The patch is kept
    in every case."""
    import copy

    step = built.solution_steps()[0]
    slow = copy.deepcopy(built)
    slow.extra["instance"]["eval_script"] = slow.extra["instance"]["eval_script"].replace(
        ": '>>>>> Start Test Output'", "sleep 60\n: '>>>>> Start Test Output'")
    v = _grade_directly(slow, step, timeout=3)
    assert (v.reward, v.error, v.details["status"]) == (None, "verifier_timeout", "eval_timeout")
    assert v.details["model_patch"] == demo.patches["gold"]

    oom = copy.deepcopy(built)
    oom.extra["instance"]["eval_script"] = "#!/bin/bash\necho 'bash: fork: Cannot allocate memory'\nexit 1\n"
    v = _grade_directly(oom, step)
    assert (v.reward, v.error, v.details["status"]) == (None, "sandbox_error", "infra_failure")
    assert v.details["infra_failure_reason"] == "out_of_memory"

    gone = copy.deepcopy(built)
    gone.extra["instance"]["image"] = "tbscale-test/no-such-image:never"
    v = _grade_directly(gone, step)
    assert (v.reward, v.error, v.details["status"]) == (None, "sandbox_error", "infra_failure")
    assert "no-such-image" in v.details["infra_failure_reason"] and v.details["model_patch"]

    from tbscale.verifiers import classify_ending

    assert classify_ending("submitted", v) == "agent_error"

    broken = copy.deepcopy(built)  # a grading-side bug (here: a parser swebench does not have)
    broken.extra["instance"]["log_parser"] = "parse_log_missing"
    v = _grade_directly(broken, step)
    assert (v.reward, v.error, v.details["status"]) == (None, "reward_missing", "grading_error")
    assert "parse_log_missing" in v.details["error"] and v.details["model_patch"] == demo.patches["gold"]


@pytest.mark.docker
def test_docker_build_rebuilds_only_when_the_task_folder_changes(demo, built, tmp_path) -> None:
    from tbscale.environments.docker import client
    from tbscale.tasks.swebench import select_instances
    from tbscale.environments.swebench_images import CONTEXT_LABEL, build_with_docker
    from tbscale.tasks.swebench.images import resolve_image

    repo = tmp_path / "task-repo"
    shutil.copytree(demo.task_repo, repo)
    src, rows = select_instances(source(demo, task_repo=str(repo), build="docker",
                                        image=f"tbscale-test/rebuild-{os.getpid()}:{{docker_id}}"))
    images = {r["instance_id"]: resolve_image(r, src) for r in rows}
    contexts = {demo.instance_id: repo / "tasks" / demo.instance_id}
    try:
        assert build_with_docker(list(images), images, contexts, src, log=lambda m: None) == [demo.instance_id]
        assert build_with_docker(list(images), images, contexts, src, log=lambda m: None) == []  # current
        with open(contexts[demo.instance_id] / "Dockerfile", "a") as f:
            f.write("LABEL org.tbscale.test=changed\n")
        assert build_with_docker(list(images), images, contexts, src, log=lambda m: None) == [demo.instance_id]
        labels = client().images.get(images[demo.instance_id]).labels
        assert labels["org.tbscale.test"] == "changed" and labels[CONTEXT_LABEL]
    finally:  # the first build is the demo image itself (same content, same labels): untag only
        client().images.remove(images[demo.instance_id])


@pytest.mark.docker
def test_instance_images_are_built_on_the_engine_the_run_starts_containers_on(demo, built, tmp_path) -> None:
    """`build: docker` builds through the run's backend: with `environment.options.host` naming a
    tcp:// Docker host, the build goes there, where the trials will look for the image (here the
    local engine behind a TCP forwarder that records the requests passing through it)."""
    from tbscale.config import Experiment
    from tbscale.environments.engine import client
    from tbscale.runner.plan import experiment_tasks
    from tbscale_testing.engine import TcpToDockerSocket

    proxy = TcpToDockerSocket()
    task = None
    try:
        exp = Experiment.model_validate({
            "name": "swe-tcp", "tasks": {"swebench": source(demo, build="docker",
                                                            image=f"tbscale-test/overtcp-{os.getpid()}:{{docker_id}}")},
            "settings": [{"name": "oracle", "agent": "oracle"}], "environment": {"options": {"host": proxy.url}}})
        (task,) = experiment_tasks(exp, log=lambda m: None)
        builds = [r for r in proxy.requests if r.startswith("POST ") and "/build?" in r]
        assert len(builds) == 1 and "tbscale-test%2Fovertcp-" in builds[0], proxy.requests
        assert client().images.get(task.image).labels["org.tbscale.task"] == demo.instance_id
    finally:
        proxy.close()
        if task is not None:
            client().images.remove(task.image)  # it shares the demo image's layers and labels: untagged only


@pytest.mark.docker
def test_swebench_build_without_buildx_says_so(demo, tmp_path, monkeypatch) -> None:
    """The real `build: swebench` path on this engine: swebench runs `docker buildx build`; where
    that is missing, the error names swebench's log and the `build: docker` alternative."""
    if subprocess.run(["docker", "buildx", "version"], capture_output=True).returncode == 0:
        pytest.skip("this engine has buildx; the failure path cannot be shown")
    from tbscale.runner.plan import swebench_tasks as load_swebench_tasks

    monkeypatch.chdir(tmp_path)
    with pytest.raises(TbscaleError, match=r"swebench could not build 1 image.*build_image.log.*build: docker"):
        load_swebench_tasks(source(demo, build="swebench", image="tbscale-test/nobuildx-{docker_id}:x"),
                            log=lambda m: None)


@pytest.mark.docker
def test_agent_that_breaks_git_gets_an_empty_patch(built) -> None:
    """No repository left to diff: the attempt is unresolved (the agent's doing, not the harness's)."""
    v = _grade_directly(built, "rm -rf .git")
    assert (v.reward, v.error, v.details["status"], v.details["model_patch"]) == (0.0, None, "empty_patch", "")
    assert "not a git repository" in v.details["patch_error"]


# A patch that writes a hook into the repository's git folder, with the bug left in place: `git
# apply` refuses the path, swebench's last apply command (`patch --fuzz=5`) writes the file with its
# mode, and the eval's `git checkout` of the test files runs it, which plants a conftest.py that
# reports every test passed. tbscale's own patches come from `git diff`, which never holds such a
# path, so the agent here answers that `git diff` itself (a `git` ahead of the real one on PATH).
HOOK_PATCH = """diff --git a/.git/hooks/post-checkout b/.git/hooks/post-checkout
new file mode 100755
--- /dev/null
+++ b/.git/hooks/post-checkout
@@ -0,0 +1,3 @@
+#!/bin/sh
+printf 'import pytest\\n@pytest.hookimpl(hookwrapper=True)\\ndef pytest_runtest_makereport(item, call):\\n    (yield).get_result().outcome = "passed"\\n' > conftest.py
+exit 0
"""
FORGED_GIT = ("printf '%s' \"$FORGED\" > /tmp/forged.patch && printf '%s\\n' '#!/bin/sh' "
              "'case \" $* \" in *\" diff --cached \"*) case \" $* \" in *\" --numstat \"*) ;; *) cat /tmp/forged.patch; exit 0 ;; esac ;; esac'"
              " 'exec /usr/bin/git \"$@\"' > /usr/local/bin/git && chmod +x /usr/local/bin/git && hash -r")


@pytest.mark.docker
def test_a_patch_that_writes_a_git_hook_is_tampered_whatever_swebench_says(built) -> None:
    import shlex

    v = _grade_directly(built, f"FORGED={shlex.quote(HOOK_PATCH)}; export FORGED; {FORGED_GIT}")
    assert v.details["status"] == "resolved" and v.details["apply_command"].startswith("patch"), v.details
    (found,) = v.details["patch_tampering"]
    assert found["kind"] == "git_hook_planted" and found["paths"] == [".git/hooks/post-checkout"], found


@pytest.mark.docker
def test_zz_e2e_timing(e2e) -> None:
    """Where the end-to-end time goes (printed; run with -s to see it)."""
    assert TIMINGS
    width = max(map(len, TIMINGS))
    print("\nSWE-bench end-to-end timings (s):")
    for k, v in TIMINGS.items():
        print(f"  {k:<{width}}  {v:8.2f}")
    if shutil.which("uptime"):
        print("  load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())



def test_multimodal_assets_are_staged_through_the_environment_protocol(tmp_path) -> None:
    """swebench's own staging code puts a binary test asset into any backend's environment (here
    a recording one with no docker SDK container), and the eval script restores it."""
    from types import SimpleNamespace

    from swebench.harness.constants import START_TEST_OUTPUT
    from swebench.task.repo import asset_path

    from tbscale.environments import ExecResult
    from tbscale.verifiers.swebench import _stage_assets

    class Recording:
        def __init__(self):
            self.commands, self.files = [], {}

        def exec(self, command, timeout_sec, **kw):
            self.commands.append((command, kw.get("user")))
            return ExecResult(0, "", False, 0.0)

        def put_archive(self, files, dest="/"):
            self.files.update({f"{dest.rstrip('/')}/{name}": data for name, data in files.items()})

    iid, png = "org__repo-1", b"\x89PNG\r\n\x1a\n\x00binary"
    (tmp_path / "tasks").mkdir()
    local = asset_path(tmp_path, iid, "tests/baseline/expected.png")
    local.parent.mkdir(parents=True)
    local.write_bytes(png)
    spec = SimpleNamespace(instance_id=iid, image_assets={"test_patch": [{"path": "tests/baseline/expected.png"}]})
    box = Recording()
    script = _stage_assets(box, spec, str(tmp_path), f"git apply /tmp/test.patch\n{START_TEST_OUTPUT}\npytest\n")
    assert box.files == {"/image_assets/tests__baseline__expected.png": png}
    assert ("mkdir -p /image_assets", "root") in box.commands
    restore = "mkdir -p $(dirname tests/baseline/expected.png) && cp /image_assets/tests__baseline__expected.png " \
              "tests/baseline/expected.png"
    assert script.split("\n")[1:3] == [restore, START_TEST_OUTPUT]
