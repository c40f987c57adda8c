"""A run whose output is not a terminal (a CI log, a nightly sweep's file) says where it is as it
goes, in plain lines: a live view would print nothing until the run ends."""

from __future__ import annotations

import asyncio
import importlib
import io
import time
from collections import Counter

import pytest
from rich.console import Console

from tbscale.errors import TbscaleError

# The modules (`tbscale.cli.app` as an attribute is the Typer app the package exports).
cli_app = importlib.import_module("tbscale.cli.app")
cli_run = importlib.import_module("tbscale.cli.run")


class Counters:
    def __init__(self, total: int):
        self.total, self.done, self.skipped, self.running, self.errors, self.crashed, self.passed = total, 0, 0, 0, 0, 0, 0
        self.retries: Counter[str] = Counter()
        self.started_at = time.monotonic()


class SteppedRunner:
    """Finishes its trials one at a time, each only once a progress line has shown it running."""

    def __init__(self, log: io.StringIO, total: int = 3):
        self.log, self.counters = log, Counters(total)

    def claim_folder(self) -> None:
        pass

    def notice(self) -> list[str]:
        return []

    async def run(self) -> None:
        c = self.counters
        for i in range(c.total):
            c.running = 1
            deadline = time.monotonic() + 120  # a condition, not a timing: under load it just takes longer
            while f"{i}/{c.total} done, 1 running" not in self.log.getvalue():
                assert time.monotonic() < deadline, self.log.getvalue()
                await asyncio.sleep(0.01)
            c.running, c.done, c.passed = 0, c.done + 1, c.passed + (i % 2 == 0)


@pytest.fixture
def plain_console(monkeypatch) -> io.StringIO:
    log = io.StringIO()
    console = Console(file=log, width=300, force_terminal=False)
    monkeypatch.setattr(cli_run, "console", console)
    monkeypatch.setattr(cli_app, "console", console)
    return log


def test_a_run_not_on_a_terminal_prints_a_line_as_its_counts_change(plain_console) -> None:
    runner = SteppedRunner(plain_console)
    cli_run.run_with_progress(runner, "demo", every=0.05)
    lines = plain_console.getvalue().splitlines()
    assert plain_console.getvalue().endswith("\n") and "\x1b" not in plain_console.getvalue()
    shown = [next(i for i, x in enumerate(lines) if f"demo: {k}/3 done, 1 running" in x) for k in range(3)]
    assert shown == sorted(shown)  # in order, each state once it happened
    assert lines[-1].startswith("demo: 3/3 done, 0 running, 0 resumed, 0 infra errors, pass 67%, ")


def test_the_interval_must_be_a_positive_number_of_seconds(monkeypatch) -> None:
    monkeypatch.setenv("TBSCALE_PROGRESS_EVERY_SEC", "soon")
    with pytest.raises(TbscaleError, match="TBSCALE_PROGRESS_EVERY_SEC: a number of seconds, got 'soon'"):
        cli_run.progress_every_sec()
    monkeypatch.setenv("TBSCALE_PROGRESS_EVERY_SEC", "0")
    with pytest.raises(TbscaleError, match="more than 0 seconds"):
        cli_run.progress_every_sec()
    monkeypatch.setenv("TBSCALE_PROGRESS_EVERY_SEC", "2.5")
    assert cli_run.progress_every_sec() == 2.5


def test_the_time_left_is_the_pace_of_the_trials_finished_so_far() -> None:
    c = Counters(40)
    assert cli_run.time_left(c) is None  # nothing finished yet: no pace
    c.done, c.started_at = 10, time.monotonic() - 100  # 10 trials in 100 s, 30 to go
    assert cli_run.time_left(c) == "about 5 min left"
    c.done, c.skipped = 5, 30  # resumed trials are not left, and not the pace either: 5 left, 20 s each
    assert cli_run.time_left(c) == "about 100 s left"
    c.done, c.skipped, c.started_at = 1, 0, time.monotonic() - 1000
    assert cli_run.time_left(c) == "about 10.8 h left"
    c.done = 40
    assert cli_run.time_left(c) is None
    assert "(about" not in cli_run.progress_line("demo", c)
