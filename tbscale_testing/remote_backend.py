"""The `remote-sandbox` backend: environments in a sandbox service reached over HTTP (the stand-in in
tbscale_testing/sandbox_service.py, or any service with the same API). It knows nothing of
Docker: an image is built by sending the task's build context, a command is one POST, files go in
and out as tar archives.

It is a plugin, registered through the `tbscale.environments` entry point in pyproject.toml; tbscale
itself names it nowhere. A config chooses it with

    environment:
      backend: remote-sandbox
      options: {url: "http://127.0.0.1:8765"}

What it can do beyond running commands it says in its capabilities: it restarts a sandbox (the
process sweep before verification), and it has no GPUs, storage quotas, compose services or
network policies, so tasks that ask for those are refused before anything starts.
"""

from __future__ import annotations

import io
import json
import tarfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterable
from urllib.parse import quote, urlencode

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tbscale.environments import BaseBackend, BoundedOutput, Capabilities, CleanResult, ExecResult, StartSpec
from tbscale.environments.base import READ_LIMIT, TAR_SLACK, LiveSet, extract_tar, file_from_tar, tar_of, tree_from_tar
from tbscale.environments.owner import HOST, LABEL_HOST, LABEL_RUN, describe_owner, owner_labels, owner_state
from tbscale.errors import ImageBuildError, SandboxError, TbscaleError
from tbscale.seeds import hash_directory

NAME = "remote-sandbox"


class RemoteSandboxOptions(BaseModel):
    """`environment.options` of the remote-sandbox backend."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    url: str = Field(..., description="the sandbox service, http(s)://host:port")
    image_prefix: str = Field("tbscale-remote", description="the repository the service builds task images into")
    request_margin_sec: float = Field(60.0, gt=0, description="how much longer than a command's own timeout a "
                                                              "request may take")

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError(f"{v!r} is not a URL starting with http:// or https://")
        return v.rstrip("/")


class Api:
    """The service's HTTP API: JSON in and out, tar archives for files."""

    def __init__(self, url: str, margin: float):
        self.url, self.margin = url, margin

    def call(self, method: str, path: str, *, body: Any = None, raw: bytes | None = None, query: dict | None = None,
             timeout: float = 60.0, missing_ok: bool = False) -> Any:
        url = self.url + path + (("?" + urlencode(query)) if query else "")
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        headers = {"Content-Type": "application/x-tar" if raw is not None else "application/json"}
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout + self.margin) as resp:
                payload = resp.read()
                kind = resp.headers.get("Content-Type", "")
        except urllib.error.HTTPError as e:
            if e.code == 404 and missing_ok:
                return None
            try:
                detail = json.loads(e.read()).get("error")
            except (ValueError, AttributeError):
                detail = e.reason
            raise SandboxError(f"sandbox service {method} {path}: {e.code} {detail}") from None
        except OSError as e:
            raise SandboxError(f"sandbox service at {self.url} not reachable ({type(e).__name__}: {e})") from None
        if not payload:
            return None
        return payload if kind == "application/x-tar" else json.loads(payload)


class RemoteSandbox:
    """One sandbox of the service: the backend's Environment."""

    backend = NAME
    live = LiveSet()
    idle_processes = None  # the service does not say what a sandbox runs of its own

    def __init__(self, api: Api, sid: str, workdir: str | None, default_user: str):
        self.api, self.id, self.workdir, self._user = api, sid, workdir, default_user
        self.services: list[str] = []
        self._stopped = False

    @property
    def default_user(self) -> str:
        return self._user

    def exec(self, command: str, timeout_sec: float, *, workdir: str | None = None,
             env: dict[str, str] | None = None, user: str = "", output_limit: int | None = None,
             tee: Path | None = None, hostile_peers: bool = False) -> ExecResult:
        # With `tee` the whole output is asked for, written there, and bounded here.
        body = {"command": command, "timeout_sec": timeout_sec, "workdir": workdir or self.workdir, "env": env or {},
                "user": user, "output_limit": None if tee is not None else output_limit,
                "hostile_peers": hostile_peers}
        res = self.api.call("POST", f"/v1/sandboxes/{self.id}/exec", body=body, timeout=timeout_sec)
        if tee is not None:
            with open(tee, "wb") as sink:
                out = BoundedOutput(output_limit, sink)
                out.add(res["output"].encode())
            res.update(output=out.text(), output_bytes=out.total, elided_bytes=out.elided)
        return ExecResult(res["exit_code"], res["output"], res["timed_out"], res["duration_sec"],
                          output_bytes=res.get("output_bytes", 0), elided_bytes=res.get("elided_bytes", 0),
                          abandoned=bool(res.get("abandoned")))

    def put_archive(self, files: dict[str, bytes | Path], dest: str = "/") -> None:
        data = tar_of(files)
        self.api.call("PUT", f"/v1/sandboxes/{self.id}/archive", raw=data, query={"path": dest or "/"})

    def put_dir(self, local: Path, dest: str) -> None:
        parent, name = dest.rstrip("/").rsplit("/", 1)
        self.put_archive({name: Path(local)}, parent or "/")

    def _archive(self, path: str, limit: int | None) -> bytes | None:
        data = self.api.call("GET", f"/v1/sandboxes/{self.id}/archive", query={"path": path}, missing_ok=True)
        if data is not None and limit is not None and len(data) > limit + TAR_SLACK:
            raise SandboxError(f"copy out of sandbox {self.id}: {path} is over {limit} bytes")
        return data

    def read_file(self, path: str, limit: int | None = READ_LIMIT) -> bytes | None:
        data = self._archive(path, limit)
        return None if data is None else file_from_tar(data)

    def get_dir(self, path: str, local: Path, limit: int | None = None) -> bool:
        data = self._archive(path, limit)
        if data is None:
            return False
        extract_tar(data, local)
        return True

    def read_tree(self, path: str, limit: int | None = None) -> dict[str, str] | None:
        data = self._archive(path, limit)
        return None if data is None else tree_from_tar(data, path)

    def service(self, name: str | None) -> "RemoteSandbox":
        if name in (None, "", "main"):
            return self
        raise SandboxError(f"no service {name!r}: a sandbox has no sidecars")

    def set_network(self, policy: Any) -> None:
        raise SandboxError("the remote-sandbox backend cannot apply network policies")

    def restart(self) -> None:
        self.api.call("POST", f"/v1/sandboxes/{self.id}/restart", timeout=120)

    def running(self) -> bool:
        found = self.api.call("GET", f"/v1/sandboxes/{quote(self.id)}", missing_ok=True)
        return bool(found and found.get("running"))

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self.live.discard(self.id)
        try:
            self.api.call("DELETE", f"/v1/sandboxes/{self.id}", missing_ok=True)
        except SandboxError:  # the service went away: nothing left to free here
            pass


class RemoteSandboxBackend(BaseBackend):
    """Sandboxes of one sandbox service (see the module doc)."""

    name = NAME
    Options = RemoteSandboxOptions

    def __init__(self, url: str, image_prefix: str = "tbscale-remote", request_margin_sec: float = 60.0, **_):
        self.api = Api(url, request_margin_sec)
        self.image_prefix = image_prefix

    def capabilities(self) -> Capabilities:
        return Capabilities(restart=True, why_not={
            "gpus": "the sandbox service gives no GPUs", "storage_quota": "the sandbox service has no storage quotas",
            "services": "the sandbox service runs no services beside a sandbox", "network_policies": "the sandbox service has no "
            "network policies (every sandbox is on its public network)"})

    def check(self) -> None:
        try:
            self.api.call("GET", "/v1/health", timeout=10)
        except SandboxError as e:
            raise TbscaleError(str(e)) from None

    def image_ref(self, task) -> str | None:
        if task.image:
            return task.image
        if task.environment_dir is None:
            return None
        safe = "".join(c if c.isalnum() or c in "._-" else "-" for c in task.id.lower()).strip("._-") or "task"
        return f"{self.image_prefix}/{safe}:{hash_directory(task.environment_dir)}"

    def prepare(self, task, build_timeout_sec: float | None = None) -> tuple[str, bool]:
        ref = self.image_ref(task)
        if ref is None:
            raise ImageBuildError(f"task {task.id} names no image and has no environment to build one from")
        try:
            if task.image:
                res = self.api.call("POST", "/v1/images/pull", body={"name": ref}, timeout=600)
            else:
                res = self.api.call("GET", "/v1/images", query={"name": ref})
                if res and res.get("exists"):
                    return ref, False
                timeout = float(build_timeout_sec or task.build_timeout_sec)
                res = self.api.call("POST", "/v1/images", raw=_context_tar(Path(task.environment_dir)),
                                    query={"name": ref, "dockerfile": task.dockerfile, "timeout": timeout},
                                    timeout=timeout)
        except SandboxError as e:
            raise ImageBuildError(f"building {task.id} failed: {e}") from None
        return res["image"], bool(res["built"])

    def start(self, spec: StartSpec) -> RemoteSandbox:
        body = {"image": spec.image, "cpus": spec.cpus, "memory_mb": spec.memory_mb, "pids_limit": spec.pids_limit,
                "env": spec.env, "workdir": spec.workdir, "labels": {**owner_labels(), **spec.labels}}
        made = self.api.call("POST", "/v1/sandboxes", body=body, timeout=120)
        box = RemoteSandbox(self.api, made["id"], made.get("workdir"), made.get("default_user") or "")
        RemoteSandbox.live.add(box.id, box)
        return box

    # ---- clean-up --------------------------------------------------------------------------------
    def _sandboxes(self, labels: Iterable[str] = ()) -> list[dict[str, Any]]:
        found = self.api.call("GET", "/v1/sandboxes", timeout=60) or []
        for text in labels:
            key, _, value = text.partition("=")
            found = [s for s in found if key in s["labels"] and (not value or s["labels"][key] == value)]
        return found

    def clean(self, *, runs: Iterable[str] = (), labels: Iterable[str] = (), images: bool = False,
              every: bool = False) -> CleanResult:
        runs = set(runs)
        result = CleanResult()
        for s in self._sandboxes(labels):
            state = owner_state(s["labels"])
            if every or state == "gone" or (runs and s["labels"].get(LABEL_RUN) in runs):
                self.api.call("DELETE", f"/v1/sandboxes/{s['id']}", missing_ok=True)
                result.containers += 1
            elif state in ("live", "unknown"):
                who = describe_owner(s["labels"])
                result.kept[who] = result.kept.get(who, 0) + 1
        return result

    def cleanup_orphans(self) -> int:
        return self.clean(labels=[f"{LABEL_HOST}={HOST}"]).containers

    def stop_all(self) -> int:
        return RemoteSandbox.live.stop_all()


def _context_tar(folder: Path) -> bytes:
    """The build context as the service takes it: a tar of the folder's contents."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path in sorted(folder.iterdir()):
            tar.add(str(path), arcname=path.name)
    return buf.getvalue()
