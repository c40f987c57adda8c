"""A backend tbscale does not know: `remote-sandbox` (tbscale_testing/remote_backend.py), added
through the `tbscale.environments` entry point, running environments in a sandbox service over
HTTP (the loopback stand-in tbscale_testing/sandbox_service.py). Its options are checked at load;
its capabilities decide refusals before anything starts; the bundled tasks pass and fail under it
as under docker; its clean-up goes through the backend protocol."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from tbscale.errors import TbscaleError
from tbscale.runfiles import latest_trials

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "tasks"


def _config(tmp_path: Path, environment: dict, settings: list | None = None, **extra) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    cfg = tmp_path / "exp.yaml"
    cfg.write_text(yaml.safe_dump({"name": "remote", "tasks": {"path": str(TASKS)}, "environment": environment,
                                   "settings": settings or [{"name": "oracle", "agent": "oracle"}], **extra}))
    return cfg


# ---- options and registration (no engine) --------------------------------------------------------

def test_the_backend_is_found_through_its_entry_point() -> None:
    from tbscale.environments import backend_names, get_backend

    assert "remote-sandbox" in backend_names()
    backend = get_backend("remote-sandbox", url="http://127.0.0.1:9")
    assert backend.name == "remote-sandbox" and type(backend).__module__ == "tbscale_testing.remote_backend"


def test_a_backend_that_cannot_build_images_refuses_a_swebench_build_in_one_line() -> None:
    """Building SWE-bench images goes through the backend; one without builds says so (a plan-time error)."""
    from types import SimpleNamespace

    from tbscale.environments import get_backend

    backend = get_backend("remote-sandbox", url="http://127.0.0.1:9")
    with pytest.raises(TbscaleError, match=r"^tasks\.swebench\.build: docker: the remote-sandbox backend cannot build "
                                           r"images; give images it can start and build: none$"):
        backend.build_swebench_images([], {}, SimpleNamespace(build="docker"), print)


@pytest.mark.parametrize("environment, error", [
    ({"backend": "remote-sandbox"}, "environment.options.url: Field required"),
    ({"backend": "remote-sandbox", "options": {"url": "ftp://x"}},
     "environment.options.url: 'ftp://x' is not a URL starting with http:// or https://"),
    ({"backend": "remote-sandbox", "options": {"url": "http://x", "bogus": 1}}, "environment.options.bogus: unknown option"),
    ({"backend": "remote-sandbox", "options": {"url": "http://x"}, "docker_host": "tcp://h:2375"},
     "environment.docker_host: not a key of `environment:`, nor one the remote-sandbox backend takes there (its "
     "options, under `options:`: image_prefix, request_margin_sec, url)"),
    # Keys beside the section's own are a backend's options spelt flat: the backend checks them.
    ({"backend": "docker", "agent_procesess": "keep"},
     "environment.agent_procesess: not a key of `environment:`, nor one the docker backend takes there (it takes "
     "docker_host, image_disk_budget_gb there; its options, under `options:`: host, image_disk_budget_gb)"),
    ({"backend": "docker", "docker_host": "not a host"}, "environment.docker_host: 'not a host' is not a URL"),
    ({"image_disk_budget_gb": 0}, "environment.image_disk_budget_gb: Input should be greater than 0"),
    ({"backend": "docker", "options": {"host": "not a host"}}, "environment.options.host: 'not a host' is not a URL"),
    ({"backend": "docker", "options": {"image_disk_budget_gb": -1}},
     "environment.options.image_disk_budget_gb: Input should be greater than 0"),
    ({"backend": "docker", "options": {"host": "tcp://a:1"}, "docker_host": "tcp://b:1"},
     "environment.docker_host: disagrees with options.host (give one of them)"),
    ({"backend": "nowhere"}, "environment.backend: unknown backend 'nowhere' (known: compose, docker, remote-sandbox"),
])
def test_backend_options_are_checked_at_load_in_one_line(tmp_path: Path, environment: dict, error: str) -> None:
    from tbscale.runner import load_experiment

    cfg = _config(tmp_path, environment)
    with pytest.raises(TbscaleError) as e:
        load_experiment(cfg)
    assert str(e.value).startswith(f"{cfg}: {error}"), str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("flags, error", [
    (["--backend", "remote-sandbox", "--option", "url=http://x:1", "--docker-host", "tcp://h:1"],
     "--docker-host: the remote-sandbox backend takes no such option (its options, under `options:`: image_prefix, "
     "request_margin_sec, url)"),
    (["--docker-host", "not a host"], "--docker-host: 'not a host' is not a URL"),
    (["--option", "bogus=1"], "--option bogus: unknown option"),
    (["--docker-host=not a host"], "--docker-host: 'not a host' is not a URL"),
    (["--dockr-host", "tcp://h:1"], "--dockr-host: the docker backend takes no such option (it takes docker_host, "
                                    "image_disk_budget_gb there; "),
    (["--docker-host"], "--docker-host: needs a value"),
    (["stray"], "stray: unexpected argument"),
    (["--pids-limit", "abc"], "--pids-limit: not an option of tbscale clean"),
    (["--config", "x.yaml", "--docker-host", "tcp://h:1"], "--config: give either a config or the backend's flags"),
])
def test_clean_checks_its_backend_flags_in_one_line(flags: list, error: str) -> None:
    """`clean`'s flags go through the backend's options as a config's keys do, and name the flag.
    The command names no backend's flag: any flag beside its own is the backend's flat key."""
    from typer.testing import CliRunner

    from tbscale.cli import app

    res = CliRunner().invoke(app, ["clean", *flags])
    assert res.exit_code == 2 and res.output.startswith(f"error: {error}"), res.output
    assert len(res.output.strip().splitlines()) == 1


def test_flat_docker_keys_are_the_docker_backends_options(tmp_path: Path) -> None:
    from tbscale.environments import open_backend
    from tbscale.runner import load_experiment

    flat = load_experiment(_config(tmp_path, {"docker_host": "tcp://h:2375", "image_disk_budget_gb": 5}))
    nested = load_experiment(_config(tmp_path, {"options": {"host": "tcp://h:2375", "image_disk_budget_gb": 5}}))
    for exp in (flat, nested):
        backend = open_backend(exp.environment)
        assert (backend.name, backend.host, backend.image_disk_budget_gb) == ("docker", "tcp://h:2375", 5)


def test_the_backend_and_its_options_leave_setting_identities_alone(tmp_path: Path) -> None:
    from tbscale.runner import load_experiment
    from tbscale.runner.identity import setting_key

    docker = load_experiment(_config(tmp_path / "docker", {}))
    remote = load_experiment(_config(tmp_path, {"backend": "remote-sandbox", "options": {"url": "http://x:1"}}))
    flat = load_experiment(_config(tmp_path / "flat", {"docker_host": "tcp://h:1", "image_disk_budget_gb": 9}))
    assert setting_key(docker, docker.settings[0]) == setting_key(remote, remote.settings[0])
    assert setting_key(docker, docker.settings[0]) == setting_key(flat, flat.settings[0])
    keep = load_experiment(_config(tmp_path / "keep", {"agent_processes": "keep"}))  # and what is not a place does change it
    assert setting_key(docker, docker.settings[0]) != setting_key(keep, keep.settings[0])


# ---- refusals from capabilities (no engine: capabilities are the backend's own knowledge) -------

def _refusal(tmp_path: Path, task_toml: str, backend=None, **environment) -> str | None:
    from tbscale.config import Experiment
    from tbscale.logs import AttemptRecorder
    from tbscale.runner.environment import AttemptEnvironments
    from tbscale.tasks import load_task
    from tbscale_testing.remote_backend import RemoteSandboxBackend
    from tbscale_testing.tasks import write_harbor_task

    task = load_task(write_harbor_task(tmp_path / "tasks", "t", task_toml=task_toml))
    exp = Experiment.model_validate({"name": "x", "tasks": {"path": "."}, "settings": [{"name": "o", "agent": "oracle"}],
                                     "environment": {"backend": "remote-sandbox", **environment}})
    backend = backend or RemoteSandboxBackend(url="http://127.0.0.1:9")  # never called: capabilities are known
    return AttemptEnvironments(exp, backend, task, AttemptRecorder(None, 0), labels={}).refusal()


def test_a_gpu_model_and_a_tpu_slice_are_the_backends_to_give(tmp_path: Path) -> None:
    """The loader keeps `[environment].tpu` and `gpu_types` as the task asks them; whether they are
    given, refused or noted as not enforced is the backend's capabilities' call."""
    from tbscale.config import Experiment
    from tbscale.environments import Capabilities
    from tbscale.runner.enforcement import not_enforced
    from tbscale.tasks import load_task
    from tbscale_testing.tasks import write_harbor_task

    task = load_task(write_harbor_task(tmp_path / "tasks", "t", task_toml=(
        '[environment]\ngpus = 1\ngpu_types = ["H100"]\ntpu = { type = "v6e", topology = "2x2" }\n')))
    assert (task.environment.tpu.type, task.environment.tpu.topology, task.environment.gpu_types) == (
        "v6e", "2x2", ["H100"])
    exp = Experiment.model_validate({"name": "x", "tasks": {"path": "."}, "settings": [{"name": "o", "agent": "oracle"}],
                                     "environment": {"backend": "remote-sandbox", "options": {"url": "http://x:1"}}})
    notes = {n.key: n.why for n in not_enforced(task, exp, Capabilities(gpus=True))}
    assert notes["[environment].gpu_types"] == ("the remote-sandbox backend cannot pick a GPU model: any GPU it has "
                                                "is given (Harbor's Docker backend ignores the key too)")
    assert "[environment].gpu_types" not in {n.key for n in not_enforced(task, exp, Capabilities(gpus=True,
                                                                                                  gpu_types=True))}
    # `tasks show` with no engine reached names no backend's lack, only that none was asked.
    from tbscale.runner.describe import describe

    shown = {n["key"]: n["why"] for n in describe(task, exp, None)["not_enforced"]}
    assert shown["[environment].gpu_types"].startswith("no engine was asked whether it can pick a GPU model: ")


def test_what_the_backend_cannot_give_is_refused_naming_the_key(tmp_path: Path) -> None:
    assert _refusal(tmp_path / "ok", "[agent]\ntimeout_sec = 30\n") is None
    gpu = _refusal(tmp_path / "gpu", "[environment]\ngpus = 1\n")
    assert gpu == "[environment].gpus = 1: the sandbox service gives no GPUs; a GPU task is refused, not run without one"
    # a TPU slice is the backend's to give or refuse (tbscale refused it when the task was loaded)
    tpu = _refusal(tmp_path / "tpu", '[environment]\ntpu = { type = "v6e", topology = "2x2" }\n')
    assert tpu == ("[environment].tpu = v6e (2x2): the remote-sandbox backend gives no TPU slices; a TPU task is "
                   "refused, not run without one")
    storage = _refusal(tmp_path / "st", "[environment]\nstorage_mb = 512\n", storage_limit="enforce")
    assert storage.startswith("[environment].storage_mb = 512: the sandbox service has no storage quotas; the task is "
                              "refused")
    assert _refusal(tmp_path / "st2", "[environment]\nstorage_mb = 512\n") is None  # auto: run without it, said so
    offline = _refusal(tmp_path / "net", "[agent]\ntimeout_sec = 30\n", network="none")
    assert offline == ("[environment] network no-network: the sandbox service has no network policies (every sandbox "
                       "is on its public network); the task is refused, not run with the network open")


def test_the_process_sweep_needs_a_backend_that_restarts(tmp_path: Path) -> None:
    from tbscale.environments import BaseBackend

    class CommandsOnly(BaseBackend):
        name = "commands-only"

    stop = _refusal(tmp_path / "a", "[agent]\ntimeout_sec = 30\n", backend=CommandsOnly())
    assert stop.startswith("environment.agent_processes = stop: the process sweep before verification restarts the "
                           "environment, and the commands-only backend cannot restart one (set "
                           "environment.agent_processes: keep")
    assert _refusal(tmp_path / "b", "[agent]\ntimeout_sec = 30\n", backend=CommandsOnly(), agent_processes="keep") is None


def test_a_compose_task_is_refused_without_services(tmp_path: Path) -> None:
    from tbscale.config import Experiment
    from tbscale.logs import AttemptRecorder
    from tbscale.runner.environment import AttemptEnvironments
    from tbscale.tasks import load_task
    from tbscale_testing.remote_backend import RemoteSandboxBackend
    from tbscale_testing.tasks import write_harbor_task

    folder = write_harbor_task(tmp_path, "with-db")
    (folder / "environment" / "docker-compose.yaml").write_text(
        "services:\n  main:\n    build: .\n  db:\n    image: debian:bookworm-slim\n")
    exp = Experiment.model_validate({"name": "x", "tasks": {"path": "."}, "settings": [{"name": "o", "agent": "oracle"}]})
    envs = AttemptEnvironments(exp, RemoteSandboxBackend(url="http://127.0.0.1:9"), load_task(folder),
                               AttemptRecorder(None, 0), labels={})
    assert envs.refusal() == ("[environment]: the task's compose file runs as a project of services (main, db), and "
                              "the sandbox service runs no services beside a sandbox; the task is refused")


# ---- the bundled tasks through the service (Docker behind it) -------------------------------------

@pytest.fixture(scope="module")
def service():
    from tbscale_testing.sandbox_service import SandboxService

    with SandboxService() as svc:
        yield svc


def _run(cfg: Path, run_dir: Path, only: list[str] | None = None):
    import asyncio

    from tbscale.runner import Runner, experiment_tasks, load_experiment

    exp = load_experiment(cfg)
    tasks = experiment_tasks(exp, only)
    runner = Runner(exp, tasks, run_dir)
    asyncio.run(runner.run())
    return runner, [json.loads(x) for x in (run_dir / "trials.jsonl").read_text().splitlines()]


@pytest.mark.docker
@pytest.mark.slow
def test_every_bundled_oracle_passes_and_every_nop_fails_remotely(tmp_path: Path, service) -> None:
    cfg = _config(tmp_path, {"backend": "remote-sandbox", "options": {"url": service.url}},
                  settings=[{"name": "oracle", "agent": "oracle"}, {"name": "nop", "agent": "nop"}], concurrency=4)
    runner, _ = _run(cfg, tmp_path / "run")
    # A verifier that runs out of time on a machine busy with other work (http-kv-server's nop did
    # once, 69 s for tests that take a few seconds quiet, in a CI run with both cores kept busy) is
    # an infrastructure error, not a verdict: a rerun retries it, as a user's rerun would.
    def latest() -> list[dict]:  # each trial's last line: a rerun appends the trials it retried
        return [t.model_dump(mode="json") for t in latest_trials(tmp_path / "run" / "trials.jsonl").values()]

    for _ in range(2):
        if not any(r["infra_error"] for r in latest()):
            break
        runner, _ = _run(cfg, tmp_path / "run")
    rows = latest()
    n_tasks = len([p for p in TASKS.iterdir() if (p / "task.toml").is_file()])
    assert runner.exit_code == 0 and len(rows) == 2 * n_tasks
    failing = [(r["setting"], r["task_id"], r["ending"], r["error"]) for r in rows
               if (r["setting"] == "oracle") != (r["ending"] == "pass")]
    assert failing == []
    assert all(r["tampering"] == [] and not r["infra_error"] for r in rows)
    starts = [json.loads(x) for r in rows for x in (tmp_path / "run" / r["trajectory_path"]).read_text().splitlines()
              if '"attempt_start"' in x]
    assert {e["environment"] for e in starts} == {"remote-sandbox"}
    assert all(e["container"].startswith("sbx-") for e in starts)
    # The process sweep went through the service (a restart), and nothing is left there.
    sweeps = [json.loads(x) for r in rows for x in (tmp_path / "run" / r["trajectory_path"]).read_text().splitlines()
              if '"sweep"' in x]
    assert len(sweeps) == len(rows) and {s["method"] for s in sweeps} == {"restart"}
    assert service.list(None) == []


@pytest.mark.docker
@pytest.mark.slow
def test_the_simulated_model_gives_the_same_trials_as_under_docker(tmp_path: Path, service) -> None:
    settings = [{"name": "baseline", "generator": "policy"}]
    models = {"policy": {"model": "sim/policy", "sim": {"skill": 0.55}}}
    only = ["extract-emails", "edit-ini-config", "csv-sales-summary"]
    docker = _config(tmp_path / "docker", {}, settings=settings, models=models, trials=2)
    remote = _config(tmp_path, {"backend": "remote-sandbox", "options": {"url": service.url}}, settings=settings,
                     models=models, trials=2)
    _, under_docker = _run(docker, tmp_path / "run-docker", only)
    _, under_remote = _run(remote, tmp_path / "run-remote", only)
    keys = ("trial_key", "reward", "passed", "ending", "stop_reason", "turns", "tokens", "tampering", "not_enforced")
    by_key = {r["trial_key"]: {k: r[k] for k in keys} for r in under_docker}
    assert len(by_key) == 6
    assert {r["trial_key"]: {k: r[k] for k in keys} for r in under_remote} == by_key
    assert {r["ending"] for r in under_remote} >= {"pass"}


@pytest.mark.docker
def test_a_killed_runs_sandboxes_are_cleaned_through_the_backend(tmp_path: Path, service) -> None:
    script = tmp_path / "hold.py"
    script.write_text(textwrap.dedent(f"""
        import time
        from tbscale.environments import StartSpec, get_backend
        backend = get_backend("remote-sandbox", url={service.url!r})
        box = backend.start(StartSpec(image="debian:bookworm-slim", labels={{"org.tbscale.run": "/held"}}))
        print(box.id, flush=True)
        time.sleep(600)
    """))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    sid = proc.stdout.readline().strip()
    assert sid.startswith("sbx-")
    live = subprocess.run([sys.executable, "-m", "tbscale.cli", "clean", "--backend", "remote-sandbox", "--option",
                           f"url={service.url}"], capture_output=True, text=True, timeout=120)
    assert live.returncode == 0, live.stderr
    assert "removed 0 containers" in live.stdout and f"pid {proc.pid}" in live.stdout  # a live owner's is kept
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert [s["id"] for s in service.list(None)] == [sid]
    cfg = _config(tmp_path, {"backend": "remote-sandbox", "options": {"url": service.url}})
    gone = subprocess.run([sys.executable, "-m", "tbscale.cli", "clean", "--config", str(cfg)],
                          capture_output=True, text=True, timeout=120)
    assert gone.returncode == 0 and "removed 1 containers" in gone.stdout, gone.stdout + gone.stderr
    assert service.list(None) == []
