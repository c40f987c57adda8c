"""`tbscale swebench demo`, added to the CLI by this package (entry point `tbscale.commands`):
a tiny SWE-bench-format benchmark made offline, for trying the SWE-bench path without the hub."""

from __future__ import annotations

from pathlib import Path

import typer

from tbscale.errors import TbscaleError


def swebench_demo(out: Path = typer.Argument(..., help="folder to create"),
                  build: bool = typer.Option(True, help="build the demo image (Docker's classic builder)")):
    """Make a tiny SWE-bench-format benchmark offline: a git repository with a real bug, a swebench
    task repo, the dataset as parquet and jsonl (see configs/swebench_local_demo.yaml)."""
    from tbscale.cli.app import fail
    from tbscale.environments.swebench_images import prepare_images
    from tbscale.tasks.swebench import load_swebench_tasks
    from tbscale_testing.swebench_demo import make_demo

    if out.exists() and any(out.iterdir()):
        fail(f"{out}: exists and is not empty")
    try:
        demo = make_demo(out)
        if build:
            src, rows, built = load_swebench_tasks({"dataset": str(demo.dataset_jsonl), "task_repo": str(demo.task_repo),
                                                    "build": "docker"})
            prepare_images(rows, {t.id: t.image for t in built}, src)
    except TbscaleError as e:
        fail(str(e))
    print(f"task repo: {demo.task_repo}\ndataset:   {demo.dataset_parquet}\n           {demo.dataset_jsonl}\n"
          f"image:     {demo.image}{'' if build else ' (not built)'}")


def register(app: typer.Typer) -> None:
    """Add `demo` to the app's `swebench` group (called by tbscale.cli for the entry point)."""
    group = next(g.typer_instance for g in app.registered_groups if g.name == "swebench")
    if not any(c.name == "demo" for c in group.registered_commands):
        group.command("demo")(swebench_demo)
