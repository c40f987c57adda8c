"""`tbscale` as a user runs it, from a test: to the end (`tbscale(...)`), or started in the
background (`Started`) so the test can watch the engine, interrupt it as a user would (Ctrl-C is
SIGINT; kill -9 is what a crash or an OOM killer does) and is sure it never outlives the test.

Both run `python -m tbscale.cli` with this interpreter, so they test the checkout, not whatever
`tbscale` is first on PATH, with no input (a question the command asks is answered by end of file). Their bounds are generous (ten times a loaded run or more): a test
waits on a condition, and a bound only stops a hung test.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType

from tbscale_testing.waiting import wait_for

ARGV = [sys.executable, "-m", "tbscale.cli"]


def tbscale(*args: str | Path, env: Mapping[str, str] | None = None, timeout: float = 900,
            cwd: Path | str | None = None) -> subprocess.CompletedProcess[str]:
    """Run `tbscale ARGS...` to its end; stdout and stderr are captured as text."""
    return subprocess.run([*ARGV, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env=None if env is None else dict(env), cwd=cwd, stdin=subprocess.DEVNULL)


class Started:
    """`tbscale ARGS...` in its own process for the length of a `with` block.

        with Started("run", cfg, "--no-report") as run:
            run.wait_until(lambda: containers(..., under=tmp_path), "no container started")
            err = run.interrupt()
        assert run.returncode == 130, err

    Leaving the block stops the process if it is still running (the test failed before it stopped
    it) as a user would, with Ctrl-C, so it removes its own containers; one that does not stop
    within 90 s is killed. A failed test never leaves a run behind.
    """

    def __init__(self, *args: str | Path, env: Mapping[str, str] | None = None, capture: bool = True) -> None:
        self.argv = [*ARGV, *map(str, args)]
        self.env = None if env is None else dict(env)
        self.capture = capture
        self.proc: subprocess.Popen[str] | None = None
        self.stdout = self.stderr = ""

    def __enter__(self) -> Started:
        out = subprocess.PIPE if self.capture else subprocess.DEVNULL
        self.proc = subprocess.Popen(self.argv, stdout=out, stderr=out, text=True, env=self.env,
                                     stdin=subprocess.DEVNULL)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        proc = self._proc()
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.communicate(timeout=90)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate(timeout=60)

    @property
    def pid(self) -> int:
        return self._proc().pid

    @property
    def returncode(self) -> int | None:
        return self._proc().poll()

    def wait_until(self, predicate: Callable[[], object], why: str, timeout: float = 600) -> None:
        """Wait until `predicate()` holds; fail with `why` (and the run's exit code and output, if it
        has already ended) when it does not within `timeout` seconds."""
        if wait_for(lambda: predicate() or self._proc().poll() is not None, timeout) and predicate():
            return
        raise AssertionError(why + self._ended())

    def finish(self, timeout: float = 900) -> str:
        """Wait for the run to end by itself; its stderr."""
        self.stdout, self.stderr = self._proc().communicate(timeout=timeout)
        return self.stderr or ""

    def interrupt(self, timeout: float = 300) -> str:
        """Ctrl-C: SIGINT, then wait for the run to stop; its stderr."""
        self._proc().send_signal(signal.SIGINT)
        return self.finish(timeout)

    def kill_9(self, timeout: float = 60) -> None:
        """kill -9: the run gets no chance to clean up after itself."""
        os.kill(self._proc().pid, signal.SIGKILL)
        self._proc().wait(timeout=timeout)

    def _ended(self) -> str:
        proc = self._proc()
        if proc.poll() is None:
            return ""
        self.finish(timeout=60)
        return f" (the run had ended with exit code {proc.returncode}: {(self.stderr or '')[-2000:]})"

    def _proc(self) -> subprocess.Popen[str]:
        if self.proc is None:
            raise RuntimeError("Started is used in a `with` block")
        return self.proc
