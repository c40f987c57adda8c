"""The `tbscale` Typer app, its command groups, and what every command shares: the consoles, the
one-line error exit, and SIGTERM handled like Ctrl-C.

Expected errors end in one line and exit 2 in one place, `OneLineErrors`, around every command:
a TbscaleError (bad input, named by file and key), an OSError on a path the user gave (a folder
that cannot be made or written, a file that cannot be read), and the command line's own usage
errors. Anything else is a bug and keeps its traceback.

Kept light at import time: heavy modules (litellm, docker, pandas, matplotlib) are imported
inside the commands that need them, so `tbscale --help` answers at once.
"""

from __future__ import annotations

import inspect
import logging
import signal
import sys

import typer
from rich.console import Console
from rich.text import Text
from rich.markup import escape
from typer.core import TyperGroup

from tbscale.errors import TbscaleError

# The command line's usage errors, from the click that typer uses (newer typers carry their own copy).
UsageError = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
NoArgsIsHelpError = getattr(sys.modules[UsageError.__module__], "NoArgsIsHelpError", ())

console = Console(stderr=True)
# Not a terminal (CI logs, pipes): wide enough that tables stay readable.
out = Console(width=None if sys.stdout.isatty() else 200)


class WarningLines(logging.Handler):
    """tbscale's warnings (skipped lines, unknown prices, ...) as `warning: ...` lines on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        console.print(f"[yellow]warning:[/] {escape(record.getMessage())}", highlight=False, soft_wrap=True)


_log = logging.getLogger("tbscale")
if not any(isinstance(h, WarningLines) for h in _log.handlers):
    _log.addHandler(WarningLines(logging.WARNING))


def one_line(message: str) -> str:
    return "; ".join(part.strip() for part in str(message).strip().splitlines() if part.strip())


def print_error(message: str) -> None:
    console.print(f"[bold red]error:[/] {escape(one_line(message))}", highlight=False, soft_wrap=True)


def os_error_message(e: OSError) -> str:
    """`<path>: <what the system said>` for an OSError on a path."""
    where = str(e.filename) + (f" -> {e.filename2}" if e.filename2 is not None else "")
    return f"{where}: {e.strerror or type(e).__name__}"


def reflowed(text: str) -> str:
    """A help text with each paragraph on one line (a paragraph that starts with click's `\b`
    keeps its lines). Typer's rich help keeps a docstring's line breaks where click would reflow
    them, so that its text broke mid-sentence at the docstring's width."""
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(p if p.startswith("\b") else " ".join(p.split()) for p in paragraphs)


class OneLineHelp(TyperGroup):
    """A command group whose commands' help texts are reflowed (`reflowed`): in the list of
    commands and on each command's own help page."""

    def get_command(self, ctx, cmd_name: str):
        command = super().get_command(ctx, cmd_name)
        if command is not None and command.help:  # reflowing again changes nothing
            command.help = reflowed(command.help)
            command.short_help = command.short_help or command.help.split("\n\n")[0]
        return command


class OneLineErrors(OneLineHelp):
    """The top-level command group: turns expected errors, from any command, into one line on
    stderr and exit code 2 (see the module doc)."""

    def _expected(self, fn, ctx):
        try:
            return fn(ctx)
        except TbscaleError as e:
            print_error(str(e))
        except OSError as e:
            if e.filename is None:  # not a path the user gave (a socket, a broken pipe): a bug or the system
                raise
            print_error(os_error_message(e))
        except NoArgsIsHelpError:
            raise
        except UsageError as e:
            where = e.ctx.command_path if e.ctx is not None else "tbscale"
            print_error(f"{where}: {e.format_message()} (see `{where} --help`)")
        raise typer.Exit(2)

    def invoke(self, ctx):
        return self._expected(super().invoke, ctx)

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        return self._expected(lambda c: super(OneLineErrors, self).parse_args(c, args), ctx)


app = typer.Typer(cls=OneLineErrors, add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Run LLM agents on terminal and coding tasks under test-time-scaling strategies, "
                       "and measure what the extra compute buys.")
tasks_app = typer.Typer(cls=OneLineHelp, no_args_is_help=True, help="Inspect and check task directories.")
models_app = typer.Typer(cls=OneLineHelp, no_args_is_help=True, help="Check the models a config uses before spending on a run.")
export_app = typer.Typer(cls=OneLineHelp, no_args_is_help=True, help="Export data from finished runs (training sets, predictions).")
swebench_app = typer.Typer(cls=OneLineHelp, no_args_is_help=True, help="SWE-bench instances: list a config's selection.")
app.add_typer(tasks_app, name="tasks")
app.add_typer(models_app, name="models")
app.add_typer(export_app, name="export")
app.add_typer(swebench_app, name="swebench")

def labelled(label: str, style: str, text: str) -> Text:
    """`label` in `style`, then `text` exactly as it is: task files, ids and messages print verbatim
    (`[environment]` or `[/tests]` in them is text, never rich markup)."""
    return Text.assemble((label, style), " ", text)


def say(text: str, style: str | None = None, to: Console | None = None) -> None:
    """Print `text` verbatim (no markup, no highlighting), whole lines (no wrapping mid-word)."""
    (to or console).print(Text(text, style=style or ""), highlight=False, soft_wrap=True)


def fail(message: str, code: int = 2) -> None:
    """One line on stderr and a non-zero exit: how every bad input ends."""
    print_error(message)
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
