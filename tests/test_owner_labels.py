"""Who owns what tbscale leaves on an engine, without an engine: the owner states read from labels
(a reused pid told apart by its start time), and a compose project whose every service, the main
one included, carries its starter's labels rather than the ones its image was built with."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tbscale.environments.owner import (HOST, LABEL_HOST, LABEL_PID, LABEL_SESSION, LABEL_STARTED, owner_labels,
                                        owner_state, process_start)


def test_owner_states() -> None:
    mine = owner_labels()
    assert owner_state(mine) == "mine"
    parent = os.getppid()
    live = {LABEL_HOST: HOST, LABEL_PID: str(parent), LABEL_SESSION: f"{parent}-0", LABEL_STARTED: process_start(parent)}
    assert owner_state(live) == "live"
    assert owner_state({**live, LABEL_STARTED: ""}) == "live"  # a system that does not say when it started
    assert owner_state({**live, LABEL_STARTED: "0000dead:12"}) == "gone"  # the pid went to another process
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone = int(done.stdout)
    assert owner_state({LABEL_HOST: HOST, LABEL_PID: str(gone), LABEL_SESSION: f"{gone}-0"}) == "gone"
    assert owner_state({**live, LABEL_HOST: "another-host"}) == "unknown"
    assert owner_state({}) == "unknown"


def test_owner_labels_are_all_set_so_none_is_inherited_from_an_image() -> None:
    labels = owner_labels()
    assert set(labels) >= {LABEL_HOST, LABEL_PID, LABEL_SESSION, LABEL_STARTED}
    assert labels[LABEL_STARTED] == (process_start(os.getpid()) or "")


def test_every_service_of_a_project_carries_its_starters_labels(tmp_path: Path) -> None:
    """The main service defined by tbscale's base alone (the task's file has only a sidecar) is
    labelled too: left to its image's labels, it named the process that built the image, and every
    other run's orphan sweep took the live project down as a gone owner's."""
    from tbscale.environments.base import ComposeSpec
    from tbscale.environments.compose import ComposeProjects

    file = tmp_path / "docker-compose.yaml"
    file.write_text("services:\n  side:\n    image: debian:bookworm-slim\n")
    spec = ComposeSpec(file=file, project_dir=tmp_path, main_service="main", services=["side"],
                       images={"main": "tbscale-task/t:1"})
    project = ComposeProjects()._project(spec, "tbscale-test", tmp_path / "work", {"image": "tbscale-task/t:1"},
                                         labels={"org.tbscale.run": "/r"})
    last = json.loads(project.files[-1].read_text())["services"]
    expected = {**owner_labels(), "org.tbscale.run": "/r"}
    assert {name: svc["labels"] for name, svc in last.items()} == {"main": expected, "side": expected}
    # As Compose merges the three files: the main service's labels are this process's.
    merged = subprocess.run(project.argv("config", "--format", "json"), capture_output=True, text=True,
                            env=project.env)
    assert merged.returncode == 0, merged.stderr
    services = json.loads(merged.stdout)["services"]
    assert services["main"]["labels"] == expected and services["side"]["labels"] == expected
