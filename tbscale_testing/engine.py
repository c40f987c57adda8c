"""What a test sees on the engine: the containers of its own runs only.

Several suites can share one engine (xdist workers, another checkout's `make test`), and they
make tasks of the same names. A test that looked containers up by task name alone could take
another suite's container for its own run's, and, say, interrupt its run before that run had
started one. Every tbscale container carries its run folder (`org.tbscale.run`), and a test's run
folders are under its `tmp_path`.
"""

from __future__ import annotations

import re
import socket
import subprocess
import threading
from pathlib import Path

LABEL_RUN = "org.tbscale.run"


def containers(*labels: str, under: Path | str | None = None) -> list[str]:
    """Ids of the containers (running or not) that carry every label ("key" or "key=value"),
    and, with `under`, whose run folder is `under` or inside it."""
    argv = ["docker", "ps", "-a", "--no-trunc", "--format", "{{.ID}}\t{{.Label \"%s\"}}" % LABEL_RUN]
    for label in labels:
        argv += ["--filter", f"label={label}"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120).stdout
    found = [line.split("\t", 1) + [""] for line in out.splitlines() if line.strip()]
    if under is None:
        return [cid for cid, *_ in found]
    root = str(Path(under).resolve())
    return [cid for cid, run, *_ in found if run == root or run.startswith(root + "/")]


class TcpToDockerSocket:
    """A TCP port on 127.0.0.1 that forwards every connection to the local engine's unix socket:
    the engine seen as a remote `tcp://` Docker host, without starting a second one. `requests`
    are the request lines ("POST /v1.41/build?...") that came through, in order."""

    REQUEST_LINE = re.compile(rb"(GET|HEAD|POST|PUT|DELETE) (/[^ \r\n]*) HTTP/1\.[01]\r\n")

    def __init__(self, socket_path: str = "/var/run/docker.sock"):
        self.socket_path, self.connections = socket_path, 0
        self.requests: list[str] = []
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            upstream = socket.socket(socket.AF_UNIX)
            upstream.connect(self.socket_path)
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, src, dst, outbound: bool) -> None:
        try:
            while data := src.recv(65536):
                if outbound:  # the SDK sends a request's head in one write, so no line is split
                    self.requests += [f"{m[1].decode()} {m[2].decode()}" for m in self.REQUEST_LINE.finditer(data)]
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.server.close()
