"""`tbscale view RUN`: build the static trajectory viewer (and optionally serve it). Imports only
the standard library, typer and rich, so the command starts at once."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tbscale.cli.app import app, labelled, say

# Builds writing at least this many trial files show a progress bar.
PROGRESS_FROM = 200


@app.command("view")
def view(run: Path = typer.Argument(..., help="a run folder (holding trials.jsonl)"),
         out: Optional[Path] = typer.Option(None, "--out", help="write the viewer here (default: RUN/view)"),
         serve: bool = typer.Option(False, "--serve", help="then serve it on http://127.0.0.1:PORT until Ctrl-C"),
         port: int = typer.Option(8000, "--port", help="port for --serve (0: any free port)"),
         force: bool = typer.Option(False, "--force", help="rewrite every trial file, changed or not")):
    """A static trajectory viewer of RUN: every trial turn by turn (candidates side by side, the
    pick, the selector's rationale, verifier scores and votes, RTV brackets), filters, and two
    settings compared on paired seeds. Opens from the file system; rerunning rebuilds only what
    changed."""
    from rich.console import Console

    from tbscale.viewer.build import build_viewer

    err = Console(stderr=True)
    stdout = Console(highlight=False)
    result = _build(run, out, force, err, build_viewer)  # not a run (NotARun): one line, exit 2, by the app
    parts = [f"{result.trials} trials", f"{result.written} trial files written", f"{result.unchanged} unchanged"]
    if result.removed:
        parts.append(f"{result.removed} removed")
    if result.warnings:
        parts.append(f"{len(result.warnings)} warnings")
    err.print("viewer: " + ", ".join(parts), highlight=False)
    index = result.index_html.resolve()
    say(f"{index}  ({index.as_uri()})", to=stdout)
    if serve:
        from tbscale.viewer.serve import serve_dir

        try:
            serve_dir(result.out_dir, port, announce=lambda url: stdout.print(f"serving {url}  (Ctrl-C to stop)",
                                                                             soft_wrap=True))
        except OSError as e:
            err.print(f"[bold red]error:[/] cannot serve on 127.0.0.1:{port}: {e.strerror or e}", highlight=False)
            raise typer.Exit(2)


def _build(run, out, force, err, build_viewer):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    warned = [0]

    def warn(msg: str) -> None:
        warned[0] += 1
        if warned[0] <= 20:
            err.print(labelled("warning:", "yellow", str(msg)), highlight=False, soft_wrap=True)
        elif warned[0] == 21:
            err.print("[yellow]warning:[/] more warnings not shown", highlight=False)

    bar: list[Progress] = []

    def progress(total: int):
        if total < PROGRESS_FROM:
            return None
        p = Progress(TextColumn("[bold]building viewer"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                     console=err, transient=True)
        p.start()
        bar.append(p)
        task = p.add_task("trials", total=total)
        return lambda n: p.advance(task, n)

    try:
        return build_viewer(run, out, force=force, warn=warn, progress=progress)
    finally:
        for p in bar:
            p.stop()
