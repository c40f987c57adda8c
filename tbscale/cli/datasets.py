"""`tbscale datasets list|pull`: datasets by name from a registry (Harbor's public one by default,
or any URL, file or file:// URL), fetched at their pinned commits into the cache."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tbscale.cli.app import OneLineHelp, app, console, out, say

datasets_app = typer.Typer(cls=OneLineHelp, no_args_is_help=True, help="Datasets by name from a registry: list them, pull one.")
app.add_typer(datasets_app, name="datasets")

REGISTRY_HELP = "a registry: URL, registry.json file or file:// URL (default: Harbor's public registry)"


@datasets_app.command("list")
def datasets_list(registry: Optional[str] = typer.Option(None, help=REGISTRY_HELP)):
    """The datasets a registry lists: name@version, format, tasks, description."""
    from rich.table import Table
    from rich.text import Text

    from tbscale.tasks.registry import DEFAULT_REGISTRY, read_registry

    datasets = read_registry(registry)
    table = Table(title=Text(f"{len(datasets)} datasets in {registry or DEFAULT_REGISTRY}"))
    for col in ("dataset", "format", "tasks", "description"):
        table.add_column(col)
    for d in datasets:
        count = str(len(d.subset)) if d.subset else ("all in " + d.tasks[0].path if d.format == "terminal-bench"
                                                      else str(len(d.tasks)))
        table.add_row(*map(Text, (d.label, d.format, count, d.description.splitlines()[0][:80] if d.description else "")))
    out.print(table)


@datasets_app.command("pull")
def datasets_pull(dataset: str = typer.Argument(..., metavar="NAME@VERSION", help="the dataset (NAME alone: its "
                                                                                    "head, else its newest version)"),
                  registry: Optional[str] = typer.Option(None, help=REGISTRY_HELP),
                  cache: Optional[Path] = typer.Option(None, help="the datasets cache (default: $TBSCALE_DATASETS, "
                                                                  "else ~/.cache/tbscale/datasets)"),
                  force: bool = typer.Option(False, help="fetch every task again, even when cached")):
    """Fetch every task of a dataset at its pinned commit into the cache (sparse, shallow), check
    each commit, and print the folder to give `tbscale tasks list|check` or a config's `tasks.path`."""
    from tbscale.tasks.registry import pull_by_name

    pulled = pull_by_name(dataset, registry, cache=cache, force=force, log=lambda m: say(m, to=console))
    commits = sorted({c for c in pulled.commits.values() if c})
    say(f"{pulled.dataset.label}: {len(pulled.commits)} tasks ({pulled.fetched} fetched, {pulled.reused} from the "
        f"cache) at {len(commits)} commit(s){': ' + commits[0][:12] if len(commits) == 1 else ''}", to=console)
    say(str(pulled.path), to=out)
