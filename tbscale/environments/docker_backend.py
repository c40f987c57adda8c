"""The `docker` backend: environments on one Docker engine (the local one, or any Docker host).

A task's environment is one container (environments/docker.py), or, when the task brings a
compose file that needs it, a compose project on the same engine (environments/compose.py).
Clean-up and the sweep of orphans go by the owner labels every container, project and network
carries (environments/owner.py, cleanup.py). `compose` is the same backend under the name configs
used for it before tasks with a compose file ran under `docker` too.
"""

from __future__ import annotations

from functools import partial
from typing import Iterable

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tbscale.config.experiment import url_problem
from tbscale.environments import docker as containers
from tbscale.environments import snapshots
from tbscale.environments.base import BaseBackend, Capabilities, CleanResult, Snapshot, StartSpec
from tbscale.environments.cleanup import clean as clean_engine
from tbscale.environments.cleanup import cleanup_labelled, cleanup_orphans
from tbscale.environments.compose import ComposeProjects, compose_binary
from tbscale.environments.compose import cleanup_session as stop_projects
from tbscale.environments.engine import client
from tbscale.errors import SandboxError
from tbscale.tasks.model import uses_compose

# What a Docker host's URL may start with (docker-py's own list, and the ssh:// of its paramiko transport).
DOCKER_SCHEMES = ("unix", "tcp", "ssh", "npipe", "http", "https")


class DockerOptions(BaseModel):
    """`environment.options` of the docker backend."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    host: str | None = Field(None, description="a Docker host (tcp://, ssh://, unix://); default: DOCKER_HOST or the "
                                               "local socket")
    image_disk_budget_gb: float | None = Field(
        None, gt=0, description="evict tbscale-built images no pending trial needs, least recently used first, to "
                                "stay within this (docs/scale.md)")

    @field_validator("host")
    @classmethod
    def _host(cls, v: str | None) -> str | None:
        if v is not None and (problem := url_problem(v, DOCKER_SCHEMES)):
            raise ValueError(problem)
        return v


class DockerBackend(BaseBackend):
    """Containers and compose projects on one Docker engine: the local one, or `host` (tcp://,
    ssh://). With an `image_disk_budget_gb`, tbscale-built images that no pending trial needs are
    evicted, least recently used first, before a new image is built or pulled (`evict_images`)."""

    name = "docker"
    Options = DockerOptions
    flat_keys = {"docker_host": "host", "image_disk_budget_gb": "image_disk_budget_gb"}

    def __init__(self, host: str | None = None, image_disk_budget_gb: float | None = None, **_):
        self.host = host
        self.image_disk_budget_gb = image_disk_budget_gb
        self.kept_images: set[str] = set()  # tags the pending trials need (never evicted)
        self.projects = ComposeProjects(host)

    def check(self) -> None:
        client(self.host)

    def capabilities(self) -> Capabilities:
        found = containers.engine_capabilities(self.host)
        why = {"allowlist_hosts": "tbscale enforces an allowlist by network topology and cannot reach hosts outside "
                                  "the task",
               "gpu_types": "a Docker engine cannot pick a GPU model",
               "tpus": "a Docker engine has no TPU slices (they exist only on cloud providers)"}
        if not found["gpus"]:
            why["gpus"] = "this Docker engine has no GPUs (no nvidia runtime)"
        if not found["storage_quota"]:
            why["storage_quota"] = ("this Docker engine cannot enforce a storage quota (overlay2 needs xfs with "
                                    "pquota; btrfs and zfs can)")
        return Capabilities(gpus=found["gpus"], storage_quota=found["storage_quota"], services=True,
                            network_policies=True, restart=True, snapshots=True, changes=True,
                            why_not=why)

    # ---- images ----------------------------------------------------------------------------------
    def task_problem(self, task) -> str | None:
        ref = self.image_ref(task)
        problem = containers.reference_problem(ref) if ref else None
        return f"its image {problem}" if problem else None

    def image_ref(self, task) -> str | None:
        if not (task.image or task.environment_dir):
            return None
        try:
            return containers.image_tag_for(task)
        except (OSError, ValueError):
            return None

    def keep_images(self, refs: set[str]) -> None:
        self.kept_images = set(refs)

    def build_swebench_images(self, rows, images, source, log) -> None:
        """On this backend's engine, where the trials will look for them."""
        from tbscale.environments.swebench_images import prepare_images

        prepare_images(rows, images, source, log, host=self.host)

    def plan(self, tasks: list) -> None:
        """The tasks whose trials are still to run: their images are kept whatever the budget."""
        if self.image_disk_budget_gb is not None:
            super().plan(tasks)

    def prepare(self, task, build_timeout_sec: float | None = None) -> tuple[str, bool]:
        if uses_compose(task):
            return self.projects.prepare(task, build_timeout_sec)
        tag = containers.image_tag_for(task)
        if self.image_disk_budget_gb is not None and not containers._image_present(tag, self.host):
            containers.evict_images(self.image_disk_budget_gb, self.kept_images | {tag} | snapshots.STORE.tags(),
                                    self.host)
        return containers.ensure_image(task, build_timeout_sec, self.host)

    # ---- environments ----------------------------------------------------------------------------
    def start(self, spec: StartSpec):
        if spec.compose is not None or (spec.task is not None and uses_compose(spec.task)):
            box = self.projects.start(spec)
            box.snapshot = partial(snapshots.snapshot_compose, box)  # Environment.snapshot()
        else:
            box = containers.Container.start(spec, self.host)
            box.snapshot = partial(snapshots.snapshot_container, box)
        box.start_spec = spec  # what a snapshot's forks start with
        box.on_snapshot = self._within_budget
        return box

    # ---- snapshots and forks (environments/snapshots.py) -------------------------------------------
    def fork(self, snapshot: Snapshot, *, labels: dict[str, str] | None = None):
        return snapshots.fork(snapshot, self.start, labels)

    def release(self, snapshot: Snapshot) -> None:
        snapshots.release(snapshot)

    def _within_budget(self, snap: Snapshot) -> None:
        """With an image budget: evict images no pending trial or live snapshot needs; a snapshot
        that still does not fit is refused (SandboxError), never kept past the budget."""
        if self.image_disk_budget_gb is None:
            return
        keep = self.kept_images | snapshots.STORE.tags()
        containers.evict_images(self.image_disk_budget_gb, keep, self.host)
        total = sum(i.size for i in containers.tbscale_images(self.host))
        if total > self.image_disk_budget_gb * 1e9:
            raise SandboxError(f"snapshot {snap.id} ({snap.size_bytes / 1e6:.0f} MB) does not fit the image budget "
                               f"({self.image_disk_budget_gb} GB; images in use or kept take {total / 1e9:.2f} GB)")

    def cleanup_orphans(self) -> int:
        return cleanup_orphans(self.host)

    def clean(self, *, runs: Iterable[str] = (), labels: Iterable[str] = (), images: bool = False,
              every: bool = False) -> CleanResult:
        if every:
            return CleanResult(containers=cleanup_labelled(host=self.host, labels=labels))
        return clean_engine(self.host, runs=runs, labels=labels, images=images)

    def stop_all(self) -> int:
        snapshots.STORE.release_all()  # stops the forks first, then removes the images
        return containers.cleanup_session() + stop_projects()


class ComposeBackend(DockerBackend):
    """`backend: compose`, as configs named the docker backend for tasks with a compose file; it
    checks for the Compose CLI up front."""

    name = "compose"

    def check(self) -> None:
        client(self.host)
        compose_binary()
