"""One headless Chromium for many pages, driven over the DevTools protocol on a pipe.

Starting Chromium costs about a CPU-second here; loading one more page into a browser that is
already up costs a tenth of that. The viewer and report tests load a dozen pages, so they share one
browser per test process (`tests/conftest.py`, fixture `browser`) instead of starting one per page.

The protocol runs over `--remote-debugging-pipe`: Chromium reads commands on its fd 3 and writes
replies and events on its fd 4, each a JSON object ended by a NUL byte. No websocket, no driver.
A page counts as loaded when a JavaScript condition holds (the viewer sets `data-ready="1"` once a
route has rendered), polled until a deadline: the tests wait on the page, not on the clock.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tbscale_testing.waiting import wait_for

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--mute-audio")


# Copies above fd 10 first, so that neither dup2 overwrites the other end of the pipe.
_ON_FDS_3_AND_4 = ("import fcntl, os, sys\n"
                   "given = [int(fd) for fd in sys.argv[1:3]]\n"
                   "high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in given]\n"
                   "for fd in given: os.close(fd)\n"
                   "os.dup2(high[0], 3); os.dup2(high[1], 4)\n"
                   "os.execv(sys.argv[3], sys.argv[3:])\n")


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class BrowserError(RuntimeError):
    pass


class Browser:
    """A headless Chromium and one tab in it. `dom` and `screenshot` load a URL as a new document
    (never a same-document hash change, so every page starts from nothing, as a fresh browser's)."""

    def __init__(self, executable: str | None = None, timeout: float = 120.0) -> None:
        executable = executable or chromium_path()
        if executable is None:
            raise BrowserError("headless Chromium is not installed (apt-get install chromium)")
        self.timeout = timeout
        self._profile = tempfile.mkdtemp(prefix="tbscale-chromium-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        # Chromium wants the pipe on its fds 3 (input) and 4 (output). A one-line Python puts them
        # there and execs Chromium (a `preexec_fn` would run in a forked copy of a threaded process).
        self._proc = subprocess.Popen(
            [sys.executable, "-I", "-c", _ON_FDS_3_AND_4, str(to_chrome_r), str(from_chrome_w),
             executable, *FLAGS, f"--user-data-dir={self._profile}", "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(to_chrome_r, from_chrome_w))
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._next_id = 0
        try:
            target = self.call("Target.createTarget", url="about:blank")["targetId"]
            self._session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            self.call("Page.enable", session=True)
        except BaseException:
            self._proc.kill()  # it did not answer: no point asking it to close
            self.close()
            raise

    # ---- the protocol ----------------------------------------------------------------------------
    def call(self, method: str, session: bool = False, **params: Any) -> dict[str, Any]:
        """Send one command and return its result; events that arrive meanwhile are dropped."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self._session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") != self._next_id:
                continue
            if "error" in reply:
                raise BrowserError(f"{method}: {reply['error'].get('message', reply['error'])}")
            return reply.get("result", {})

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            # select, so that a Chromium that hangs without closing its pipe still meets the deadline
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_chrome], [], [], left)[0]:
                raise BrowserError(f"Chromium did not answer within {self.timeout:.0f} s")
            chunk = os.read(self._from_chrome, 1 << 16)
            if not chunk:
                raise BrowserError(f"Chromium closed its pipe (exit code {self._proc.poll()})")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(line)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails'].get('text', 'exception')}")
        return result.get("result", {}).get("value")

    # ---- pages -----------------------------------------------------------------------------------
    def load(self, url: str, ready: str = "true", width: int = 1400,
             height: int = 900) -> None:
        """Load `url` as a new document in a `width` x `height` window; return once it has loaded
        and `ready` (a JavaScript expression: the page's own sign that it has rendered) holds."""
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=width, height=height,
                  deviceScaleFactor=1, mobile=False)
        # about:blank first: a URL that differs from the current one only after `#` would be a
        # same-document navigation, and the old page's state would carry over.
        self.call("Page.navigate", session=True, url="about:blank")
        self._wait(lambda: self.evaluate("location.href") == "about:blank", "about:blank to load")
        self.call("Page.navigate", session=True, url=url)
        condition = f"document.readyState === 'complete' && location.href === {json.dumps(url)} && !!({ready})"
        self._wait(lambda: self.evaluate(condition), f"{url} to be ready")

    def _wait(self, predicate, what: str) -> None:
        if not wait_for(predicate, timeout=self.timeout, every=0.02):
            raise BrowserError(f"waited {self.timeout:.0f} s for {what}")

    def dom(self, url: str, ready: str = "true") -> str:
        """The page's DOM as HTML once `ready` holds (what `chromium --dump-dom` prints)."""
        self.load(url, ready)
        return self.evaluate("document.documentElement.outerHTML")

    def screenshot(self, url: str, out: Path, width: int, height: int,
                   ready: str = "true") -> Path:
        """A PNG of the `width` x `height` window once `ready` holds."""
        self.load(url, ready, width=width, height=height)
        data = self.call("Page.captureScreenshot", session=True, format="png")["data"]
        out.write_bytes(base64.b64decode(data))
        return out

    def close(self) -> None:
        """Ask Chromium to close (it takes its renderers down with it), then end it if it will not."""
        if self._proc.poll() is None:
            try:
                os.write(self._to_chrome, json.dumps({"id": 0, "method": "Browser.close", "params": {}}).encode() + b"\0")
                self._proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait()
        for fd in (self._to_chrome, self._from_chrome):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
