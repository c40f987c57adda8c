"""The `tbscale` Typer app, its command groups, and what every command shares: the consoles, the
one-line error exit, and SIGTERM handled like Ctrl-C.

Kept light at import time: heavy modules (litellm, docker, pandas, matplotlib) are imported
inside the commands that need them, so `tbscale --help` answers at once.
"""

from __future__ import annotations

import signal
import sys

import typer
from rich.console import Console
from rich.text import Text

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Run LLM agents on terminal and coding tasks under test-time-scaling strategies, "
                       "and measure what the extra compute buys.")
tasks_app = typer.Typer(no_args_is_help=True, help="Inspect and check task directories.")
models_app = typer.Typer(no_args_is_help=True, help="Check the models a config uses before spending on a run.")
export_app = typer.Typer(no_args_is_help=True, help="Export data from finished runs (training sets, predictions).")
swebench_app = typer.Typer(no_args_is_help=True, help="SWE-bench instances: list a config's selection.")
app.add_typer(tasks_app, name="tasks")
app.add_typer(models_app, name="models")
app.add_typer(export_app, name="export")
app.add_typer(swebench_app, name="swebench")

console = Console(stderr=True)
# Not a terminal (CI logs, pipes): wide enough that tables stay readable.
out = Console(width=None if sys.stdout.isatty() else 200)


def labelled(label: str, style: str, text: str) -> Text:
    """`label` in `style`, then `text` exactly as it is: task files, ids and messages print verbatim
    (`[environment]` or `[/tests]` in them is text, never rich markup)."""
    return Text.assemble((label, style), " ", text)


def say(text: str, style: str | None = None, to: Console | None = None) -> None:
    """Print `text` verbatim (no markup, no highlighting), whole lines (no wrapping mid-word)."""
    (to or console).print(Text(text, style=style or ""), highlight=False, soft_wrap=True)


def fail(message: str, code: int = 2) -> None:
    """One line on stderr and a non-zero exit: how every bad input ends."""
    console.print(labelled("error:", "bold red", message), highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def split_list(values: str | list[str] | None) -> list[str] | None:
    """A list option given comma-separated, repeated, or both, as one list (None when not given)."""
    if not values:
        return None
    texts = [values] if isinstance(values, str) else values
    return [x.strip() for text in texts for x in text.split(",") if x.strip()] or None


def sigterm_as_interrupt() -> None:
    # A SIGTERM (CI timeout, `kill`) takes the same path as Ctrl-C: containers are removed and
    # the finished trials stay on disk.
    def handler(_signum, _frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, handler)
