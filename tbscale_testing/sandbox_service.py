"""A stand-in for a remote sandbox service, on loopback: an HTTP API (described at /openapi.json)
that builds images from an uploaded build context, creates sandboxes from an image, runs commands
in them, copies files in and out, restarts and deletes them. The remote-sandbox backend
(tbscale_testing/remote_backend.py) talks to it over HTTP and nothing else, the way a backend for
a hosted sandbox service would.

Behind the API the sandboxes are containers on this machine's Docker engine (through the docker
SDK and tbscale's exec with a timeout and bounded output); what a client sends as labels is kept
under the service's own prefix, so the docker backend's clean-up never takes them for its own.

    with SandboxService() as svc:
        print(svc.url)                 # http://127.0.0.1:<port>
"""

from __future__ import annotations

import io
import json
import re
import shlex
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

LABEL_SERVICE = "org.tbscale.testing.sandbox-service"
LABEL_PREFIX = "sandbox.label."
OPENAPI = {
    "openapi": "3.0.3",
    "info": {"title": "tbscale test sandbox service", "version": "1"},
    "paths": {
        "/v1/health": {"get": {"summary": "the service answers"}},
        "/v1/images": {"get": {"summary": "whether an image exists (?name=)"},
                       "post": {"summary": "build ?name= from the tar of a build context in the body "
                                           "(?dockerfile=, ?timeout=) unless it exists; {image, built}"}},
        "/v1/images/pull": {"post": {"summary": "{name}: make sure a prebuilt image is there; {image, built}"}},
        "/v1/sandboxes": {"get": {"summary": "sandboxes with their labels (?label=k=v narrows)"},
                          "post": {"summary": "{image, cpus, memory_mb, pids_limit, env, workdir, labels}: "
                                              "create one; {id, workdir, default_user}"}},
        "/v1/sandboxes/{id}": {"get": {"summary": "{id, running, labels}"}, "delete": {"summary": "delete it"}},
        "/v1/sandboxes/{id}/exec": {"post": {"summary": "{command, timeout_sec, user, env, workdir, output_limit}: "
                                                        "{exit_code, output, timed_out, duration_sec, output_bytes, "
                                                        "elided_bytes, abandoned}"}},
        "/v1/sandboxes/{id}/archive": {"get": {"summary": "a tar of ?path= (404: no such path)"},
                                       "put": {"summary": "unpack the tar in the body under ?path="}},
        "/v1/sandboxes/{id}/restart": {"post": {"summary": "kill every process and start it again"}},
    },
}


class ApiError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class SandboxService:
    """The service: a threading HTTP server and the sandboxes it made (all deleted on close)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        import docker

        self.id = uuid.uuid4().hex[:10]
        self.docker = docker.from_env(timeout=3600, max_pool_size=64)
        self.boxes: dict[str, Any] = {}  # sandbox id -> tbscale Container (exec and restart)
        self._build_locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self.requests = 0
        service = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _body(self) -> bytes:
                size = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(size) if size else b""

            def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _handle(self, method: str) -> None:
                service.requests += 1
                url = urlparse(self.path)
                query = {k: v[-1] for k, v in parse_qs(url.query).items()}
                try:
                    result = service.route(method, url.path, query, self._body())
                except ApiError as e:
                    self._send(e.status, json.dumps({"error": str(e)}).encode())
                    return
                except Exception as e:  # noqa: BLE001 - the client gets the service's error
                    self._send(500, json.dumps({"error": f"{type(e).__name__}: {e}"}).encode())
                    return
                if isinstance(result, bytes):
                    self._send(200, result, "application/x-tar")
                elif result is None:
                    self._send(204, b"")
                else:
                    self._send(200, json.dumps(result).encode())

            def do_GET(self) -> None:  # noqa: N802
                self._handle("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._handle("POST")

            def do_PUT(self) -> None:  # noqa: N802
                self._handle("PUT")

            def do_DELETE(self) -> None:  # noqa: N802
                self._handle("DELETE")

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.url = f"http://{host}:{self.server.server_address[1]}"
        self._thread: threading.Thread | None = None

    # ---- lifecycle --------------------------------------------------------------------------------
    def start(self) -> "SandboxService":
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, name="sandbox-service", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        for c in self.docker.api.containers(all=True, filters={"label": f"{LABEL_SERVICE}={self.id}"}):
            try:
                self.docker.api.remove_container(c["Id"], force=True)
            except Exception:  # noqa: BLE001 - gone already
                pass

    def __enter__(self) -> "SandboxService":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- the API ----------------------------------------------------------------------------------
    def route(self, method: str, path: str, query: dict[str, str], body: bytes) -> Any:
        if path == "/openapi.json" and method == "GET":
            return OPENAPI
        if path == "/v1/health" and method == "GET":
            return {"ok": True, "service": self.id}
        if path == "/v1/images":
            if method == "GET":
                return {"image": query["name"], "exists": self._image_exists(query["name"])}
            if method == "POST":
                return self.build(query["name"], body, query.get("dockerfile") or "Dockerfile",
                                  float(query.get("timeout") or 600))
        if path == "/v1/images/pull" and method == "POST":
            return self.pull(json.loads(body)["name"])
        if path == "/v1/sandboxes":
            if method == "GET":
                return self.list(query.get("label"))
            if method == "POST":
                return self.create(json.loads(body))
        m = re.fullmatch(r"/v1/sandboxes/([a-z0-9-]+)(/[a-z]+)?", path)
        if m:
            sid, action = m.group(1), m.group(2) or ""
            if action == "" and method == "GET":
                return self.describe(sid)
            if action == "" and method == "DELETE":
                return self.delete(sid)
            if action == "/exec" and method == "POST":
                return self.exec(sid, json.loads(body))
            if action == "/archive" and method == "GET":
                return self.get_archive(sid, query["path"])
            if action == "/archive" and method == "PUT":
                return self.put_archive(sid, query["path"], body)
            if action == "/restart" and method == "POST":
                self._box(sid).restart()
                return {"id": sid, "running": True}
        raise ApiError(404, f"no route {method} {path}")

    def _image_exists(self, name: str) -> bool:
        import docker

        try:
            self.docker.images.get(name)
            return True
        except docker.errors.ImageNotFound:
            return False

    def _image_lock(self, name: str) -> threading.Lock:
        with self._lock:
            return self._build_locks.setdefault(name, threading.Lock())

    def build(self, name: str, context_tar: bytes, dockerfile: str, timeout: float) -> dict[str, Any]:
        import docker

        with self._image_lock(name):
            if self._image_exists(name):
                return {"image": name, "built": False}
            try:
                self.docker.images.build(fileobj=io.BytesIO(context_tar), custom_context=True, dockerfile=dockerfile,
                                         tag=name, rm=True, forcerm=True, timeout=int(timeout),
                                         labels={LABEL_SERVICE: self.id})
            except docker.errors.BuildError as e:
                tail = "".join(str(x.get("stream", x.get("error", ""))) for x in list(e.build_log)[-8:])
                raise ApiError(422, f"building {name} failed: {e.msg}\n{tail}") from None
            return {"image": name, "built": True}

    def pull(self, name: str) -> dict[str, Any]:
        import docker

        with self._image_lock(name):
            if self._image_exists(name):
                return {"image": name, "built": False}
            try:
                self.docker.images.pull(name)
            except docker.errors.APIError as e:
                raise ApiError(422, f"image {name} is not present and cannot be pulled: {e.explanation}") from None
            return {"image": name, "built": True}

    def create(self, req: dict[str, Any]) -> dict[str, Any]:
        import docker

        from tbscale.environments.docker import Container

        sid = "sbx-" + uuid.uuid4().hex[:12]
        labels = {LABEL_SERVICE: self.id, "org.tbscale.testing.sandbox": sid}
        labels.update({LABEL_PREFIX + k: str(v) for k, v in (req.get("labels") or {}).items()})
        options: dict[str, Any] = {}
        if req.get("cpus"):
            options["nano_cpus"] = int(float(req["cpus"]) * 1e9)
        if req.get("memory_mb"):
            options["mem_limit"] = options["memswap_limit"] = f"{int(req['memory_mb'])}m"
        try:
            container = self.docker.containers.run(
                req["image"], command=["sleep", "infinity"], detach=True, init=True, network_mode="bridge",
                pids_limit=req.get("pids_limit"), labels=labels, environment=req.get("env") or {},
                working_dir=req.get("workdir"), **options)
        except docker.errors.APIError as e:
            raise ApiError(422, f"could not create a sandbox from {req['image']}: {e.explanation or e}") from None
        box = Container(container, req.get("workdir"))
        with self._lock:
            self.boxes[sid] = box
        config = (container.attrs or {}).get("Config") or {}
        return {"id": sid, "workdir": req.get("workdir") or config.get("WorkingDir") or None,
                "default_user": config.get("User") or ""}

    def _box(self, sid: str):
        with self._lock:
            box = self.boxes.get(sid)
        if box is None:
            raise ApiError(404, f"no sandbox {sid}")
        return box

    def list(self, label: str | None) -> list[dict[str, Any]]:
        wanted = [f"{LABEL_SERVICE}={self.id}"] + ([LABEL_PREFIX + label] if label else [])
        out = []
        for c in self.docker.api.containers(all=True, filters={"label": wanted}):
            tags = c.get("Labels") or {}
            out.append({"id": tags.get("org.tbscale.testing.sandbox"), "running": c.get("State") == "running",
                        "labels": {k[len(LABEL_PREFIX):]: v for k, v in tags.items() if k.startswith(LABEL_PREFIX)}})
        return out

    def describe(self, sid: str) -> dict[str, Any]:
        box = self._box(sid)
        return {"id": sid, "running": box.running()}

    def delete(self, sid: str) -> None:
        with self._lock:
            box = self.boxes.pop(sid, None)
        if box is not None:
            box.stop()
            return None
        for c in self.docker.api.containers(all=True, filters={"label": f"org.tbscale.testing.sandbox={sid}"}):
            self.docker.api.remove_container(c["Id"], force=True)  # one a restarted service still holds
        return None

    def exec(self, sid: str, req: dict[str, Any]) -> dict[str, Any]:
        res = self._box(sid).exec(req["command"], float(req.get("timeout_sec") or 60), workdir=req.get("workdir"),
                                  env=req.get("env") or None, user=req.get("user") or "",
                                  output_limit=req.get("output_limit"), hostile_peers=bool(req.get("hostile_peers")))
        return {"exit_code": res.exit_code, "output": res.output, "timed_out": res.timed_out,
                "duration_sec": res.duration_sec, "output_bytes": res.output_bytes, "elided_bytes": res.elided_bytes,
                "abandoned": res.abandoned}

    def get_archive(self, sid: str, path: str) -> bytes:
        import docker

        box = self._box(sid)
        try:
            stream, _ = box.container.get_archive(path)
        except docker.errors.NotFound:
            raise ApiError(404, f"no such path {path}") from None
        return b"".join(stream)

    def put_archive(self, sid: str, path: str, body: bytes) -> None:
        box = self._box(sid)
        box.exec(f"mkdir -p {shlex.quote(path)}", 30, user="0")
        if not box.container.put_archive(path, body):
            raise ApiError(500, f"could not unpack into {path}")
        return None


def wait_until_up(url: str, timeout: float = 30.0) -> None:
    """Block until the service at `url` answers its health check."""
    from urllib.request import urlopen

    end = time.monotonic() + timeout
    while True:
        try:
            with urlopen(f"{url}/v1/health", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.1)
