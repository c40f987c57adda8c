"""CLI commands of the strategies: `tbscale export verifier-data`.

`export_app` is the `tbscale export` command group; other modules add their exporters to it
(`from tbscale.strategies.commands import export_app`). Heavy imports stay inside the commands.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

export_app = typer.Typer(no_args_is_help=True, help="Export data from finished runs (training sets, predictions).")


@export_app.command("verifier-data")
def verifier_data(
        runs: list[Path] = typer.Argument(..., help="run folders, or a folder of runs"),
        out: Path = typer.Option(..., "-o", "--out", help="JSONL file to write"),
        role: Optional[list[str]] = typer.Option(None, "--role", help="verifier, judge, summarizer (repeatable; default all)"),
        method: Optional[list[str]] = typer.Option(None, "--method", help="pointwise, pairwise, listwise, ... (repeatable)"),
        setting: Optional[list[str]] = typer.Option(None, "--setting", help="only these settings (repeatable)"),
        include_failed: bool = typer.Option(False, help="keep calls whose reply could not be parsed"),
        include_simulated: bool = typer.Option(False, help="keep calls made by simulated models (sim/...)")):
    """Every verifier, judge and summarizer call of RUNS as a distillation set: messages, response,
    parsed scores or preference, and the attempt's outcome (JSONL)."""
    from tbscale.analysis.export_verifier import export_verifier_data
    from tbscale.cli import console, fail, out as stdout
    from tbscale.errors import TbscaleError

    try:
        counts = export_verifier_data(runs, out, roles=role, methods=method, settings=setting,
                                      include_failed=include_failed, include_simulated=include_simulated)
    except TbscaleError as e:
        fail(str(e))
    detail = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if k not in ("written", "calls"))
    stdout.print(f"wrote {counts['written']} of {counts['calls']} calls to {out}" + (f" ({detail})" if detail else ""))
    if counts["skipped_simulated"] and not counts["written"]:
        console.print("[yellow]every call came from simulated models; pass --include-simulated to export them anyway[/]")


def _export_groups(app: typer.Typer) -> list[typer.Typer]:
    out = []
    for info in app.registered_groups:
        inst = info.typer_instance
        if inst is not None and (info.name or inst.info.name) == "export":
            out.append(inst)
    return out


def register(app: typer.Typer) -> None:
    """Add `export_app` as `tbscale export` (once, even if another module already added it); if
    some other `export` group is there already, our command joins that one instead."""
    groups = _export_groups(app)
    if any(g is export_app for g in groups):
        return
    if groups:
        if not any((c.name or "") == "verifier-data" for c in groups[0].registered_commands):
            groups[0].command("verifier-data")(verifier_data)
        return
    app.add_typer(export_app, name="export")
