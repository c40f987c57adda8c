"""The `tbscale` command line. Each module adds its commands to the app; plugins add theirs
through the `tbscale.commands` entry-point group (a callable taking the app)."""

from __future__ import annotations

import sys
from importlib import metadata

from tbscale.cli import datasets, export, posthoc, run, sweeps, tasks, view  # noqa: F401  (each adds its commands)
from tbscale.cli.app import app, console, fail, out

for _ep in metadata.entry_points(group="tbscale.commands"):
    _ep.load()(app)


def main() -> None:  # pragma: no cover - console entry point
    app()


__all__ = ["app", "console", "fail", "main", "out"]

if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
