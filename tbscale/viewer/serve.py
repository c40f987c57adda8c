"""`tbscale view RUN --serve`: the viewer folder over HTTP on 127.0.0.1 (the standard library's
http.server), for browsers or setups that will not run scripts from file:// pages."""

from __future__ import annotations

import functools
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass

    def end_headers(self):
        self.send_header("Cache-Control", "no-cache")
        super().end_headers()


def make_server(directory: Path, port: int = 0) -> ThreadingHTTPServer:
    """A server for `directory` bound to 127.0.0.1 (port 0: any free port). Not started."""
    handler = functools.partial(_Quiet, directory=str(directory))
    return ThreadingHTTPServer(("127.0.0.1", port), handler)


def serve_dir(directory: Path, port: int, announce: Callable[[str], None] = print) -> None:
    server = make_server(directory, port)
    url = f"http://127.0.0.1:{server.server_address[1]}/index.html"
    announce(url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
