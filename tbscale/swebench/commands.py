"""SWE-bench commands: `tbscale export swebench-preds`, `tbscale swebench list`, `tbscale swebench demo`.

Heavy imports (datasets, swebench, docker) happen inside the commands.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tbscale.errors import TbscaleError


def _fail(message: str, code: int = 2) -> None:
    from tbscale.cli import fail

    fail(message, code)


def find_group(app: typer.Typer, name: str) -> typer.Typer | None:
    """A sub-app already added to `app` under `name` (another module may have made it)."""
    for info in app.registered_groups:
        inst = info.typer_instance
        if (info.name or (inst.info.name if inst is not None else None)) == name:
            return inst
    return None


def group(app: typer.Typer, name: str, help: str) -> typer.Typer:
    """The sub-app `name` of `app`, created if no module made it yet."""
    existing = find_group(app, name)
    if existing is not None:
        return existing
    sub = typer.Typer(no_args_is_help=True, help=help)
    app.add_typer(sub, name=name)
    return sub


def _has_command(app: typer.Typer, name: str) -> bool:
    return any((c.name or getattr(c.callback, "__name__", "")) == name for c in app.registered_commands)


def export_swebench_preds(
        run: Path = typer.Argument(..., help="a run folder (results/<run>)"),
        out: Optional[Path] = typer.Option(None, help="output folder (default: RUN/swebench_predictions)"),
        setting: Optional[list[str]] = typer.Option(None, help="only these settings (repeatable)"),
        model_name: str = typer.Option("{run}__{setting}__t{trial}",
                                       help="model_name_or_path of each file; fields {run} {setting} {trial}")):
    """Predictions JSONL for `python -m swebench.harness.run_evaluation`, one file per (setting, trial index)."""
    from rich.console import Console
    from rich.table import Table

    from tbscale.swebench.export import export_predictions

    try:
        files = export_predictions(run, out, setting, model_name)
    except TbscaleError as e:
        _fail(str(e))
    table = Table(title=f"SWE-bench predictions from {run}")
    for col in ("setting", "trial", "instances", "empty patches", "file"):
        table.add_column(col)
    for f in files:
        table.add_row(f.setting, str(f.trial), str(len(f.predictions)), str(f.empty), str(f.path))
    Console().print(table)
    first = files[0]
    print(f"evaluate one with: python -m swebench.harness.run_evaluation -d <dataset> -s <split> "
          f"-p {first.path} -id {first.predictions[0]['model_name_or_path']}")


def swebench_list(config: Path = typer.Argument(..., help="experiment YAML with tasks: {swebench: ...}")):
    """The instances a config selects, with the image each runs in (nothing is built or pulled)."""
    from rich.console import Console
    from rich.table import Table

    from tbscale.config import load_experiment
    from tbscale.swebench import select_instances
    from tbscale.swebench.images import resolve_image

    try:
        exp = load_experiment(config)
        if exp.tasks.swebench is None:
            raise TbscaleError(f"{config}: tasks has no `swebench` block")
        src, rows = select_instances(exp.tasks.swebench, exp.tasks.include, exp.tasks.exclude)
        images = [resolve_image(r, src) for r in rows]
    except TbscaleError as e:
        _fail(str(e))
    table = Table(title=f"{len(rows)} SWE-bench instances ({src.dataset or src.task_repo}, split {src.split})")
    for col in ("instance_id", "repo", "version", "FAIL_TO_PASS", "image"):
        table.add_column(col)
    import json

    for r, img in zip(rows, images):
        f2p = r["FAIL_TO_PASS"]
        n = len(json.loads(f2p) if isinstance(f2p, str) else f2p)
        table.add_row(r["instance_id"], r["repo"], str(r["version"]), str(n), img)
    Console(width=200).print(table)


def swebench_demo(out: Path = typer.Argument(..., help="folder to create"),
                  build: bool = typer.Option(True, help="build the demo image (Docker's classic builder)")):
    """Make a tiny SWE-bench-format benchmark offline: a git repository with a real bug, a swebench
    task repo, the dataset as parquet and jsonl (see configs/swebench_local_demo.yaml)."""
    from tbscale.swebench import load_swebench_tasks
    from tbscale.swebench.demo import make_demo

    if out.exists() and any(out.iterdir()):
        _fail(f"{out}: exists and is not empty")
    try:
        demo = make_demo(out)
        if build:
            load_swebench_tasks({"dataset": str(demo.dataset_jsonl), "task_repo": str(demo.task_repo),
                                 "build": "docker"})
    except TbscaleError as e:
        _fail(str(e))
    print(f"task repo: {demo.task_repo}\ndataset:   {demo.dataset_parquet}\n           {demo.dataset_jsonl}\n"
          f"image:     {demo.image}{'' if build else ' (not built)'}")


def _shared_export_group() -> typer.Typer | None:
    """The `tbscale export` group of tbscale.strategies.commands, which other modules join."""
    try:
        from tbscale.strategies.commands import export_app
    except ImportError:
        return None
    return export_app if isinstance(export_app, typer.Typer) else None


def register(app: typer.Typer) -> None:
    # `export` is shared: join the group already on the app, and the strategies' export_app (which
    # its module adds to the app itself, possibly after this runs), so that whichever group the
    # CLI ends up with carries this command; with neither, make the group.
    targets = [g for g in (find_group(app, "export"), _shared_export_group()) if g is not None]
    if not targets:
        targets = [group(app, "export", "Export data from finished runs (training sets, predictions).")]
    elif find_group(app, "export") is None:
        app.add_typer(targets[0], name="export")
    for export in {id(t): t for t in targets}.values():
        if not _has_command(export, "swebench-preds"):
            export.command("swebench-preds")(export_swebench_preds)
    sw = group(app, "swebench", "SWE-bench instances: list a config's selection, make the offline demo.")
    if not _has_command(sw, "list"):
        sw.command("list")(swebench_list)
        sw.command("demo")(swebench_demo)
