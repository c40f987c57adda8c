"""The `tbscale` command line. Each module adds its commands to the app; plugins add theirs
through the `tbscale.commands` entry-point group (a callable taking the app)."""

from __future__ import annotations

import sys
from importlib import metadata

# Each module adds its commands, in this order (`tbscale --help` lists them so).
from tbscale.cli import run, report, clean, datasets, export, posthoc, sweeps, tasks, view  # noqa: F401, E402
from tbscale.cli.app import app, console, fail, out

for _ep in metadata.entry_points(group="tbscale.commands"):
    _ep.load()(app)


def main() -> None:  # pragma: no cover - console entry point
    app()


__all__ = ["app", "console", "fail", "main", "out"]

if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
