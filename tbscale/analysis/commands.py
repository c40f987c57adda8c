"""Analysis commands added to the CLI: `tbscale judge` and `tbscale import`.

Registered by tbscale.cli through `register(app)`; everything heavy is imported inside the
commands so that `tbscale --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    app.command("judge")(judge)
    app.command("import")(import_runs)


def _fail(message: str, code: int = 2) -> None:
    from rich.console import Console

    Console(stderr=True).print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def judge(run: Path = typer.Argument(..., help="a run folder (holding trials.jsonl)"),
          model: Optional[str] = typer.Option(None, help="judge model: a key of the run's models or of --config, "
                                                        "or a litellm model string (e.g. openai/gpt-4.1)"),
          config: Optional[Path] = typer.Option(None, help="judge YAML (see configs/judge_demo.yaml)"),
          samples: Optional[int] = typer.Option(None, help="judgements per trajectory, averaged (default 2)"),
          settings: Optional[str] = typer.Option(None, help="comma-separated setting names to judge"),
          tasks: Optional[str] = typer.Option(None, help="comma-separated task ids to judge"),
          per_task: Optional[int] = typer.Option(None, help="at most this many trials per setting and task"),
          rubrics: bool = typer.Option(True, help="judge the 28 behaviour rubrics (turn-bon Table 6)"),
          reward_hacking: bool = typer.Option(True, help="check passing attempts for reward hacking (Appendix G)"),
          concurrency: Optional[int] = typer.Option(None, help="judge calls at once")):
    """Judge finished trajectories with an LLM: behaviour rubrics and reward hacking. Results go to
    RUN/judge/ and appear in `tbscale report RUN`; rerunning resumes."""
    import asyncio

    from rich.console import Console

    from tbscale.analysis import judge as J
    from tbscale.errors import TbscaleError

    console = Console(stderr=True)
    split = (lambda s: [x.strip() for x in s.split(",") if x.strip()] if s else None)
    try:
        if not (run / "trials.jsonl").is_file():
            raise TbscaleError(f"{run}: not a run folder (no trials.jsonl)")
        cfg = J.load_judge_config(config, model, samples=samples, settings=split(settings), tasks=split(tasks),
                                  per_task=per_task, concurrency=concurrency,
                                  rubrics=None if rubrics else False,
                                  reward_hacking=None if reward_hacking else False)
        resolved = J.resolve_model(cfg, run)
        if resolved.is_simulated:
            console.print("[yellow]Simulated judge (sim/...): a rule-based stand-in with noise; its flags exercise "
                          "the pipeline and measure nothing.[/]")
        last = {"n": 0}

        def progress(stats):
            n = stats.rubric_calls + stats.rh_calls
            if n - last["n"] >= 50:
                last["n"] = n
                console.print(f"  {n} judgements ({stats.errors} failed)", highlight=False)

        stats = asyncio.run(J.run_judge(run, cfg, progress))
    except TbscaleError as e:
        _fail(str(e))
        return
    console.print(f"judged {run}: {stats.rubric_calls} rubric judgements, {stats.rh_calls} reward-hacking "
                  f"judgements, {stats.skipped} already done, {stats.errors} failed; results in {run / 'judge'}",
                  highlight=False)
    console.print(f"see them with: tbscale report {run}", highlight=False)
    if stats.errors:
        raise typer.Exit(1)


def import_runs(paths: list[Path] = typer.Argument(..., help="mini-swe-agent output folders (*.traj.json), or "
                                                             "Harbor job / trial folders"),
                name: str = typer.Option(..., help="name of the run folder to create"),
                output_dir: Path = typer.Option(Path("results"), help="where the run folder goes"),
                fmt: str = typer.Option("auto", "--format", help="auto, mini-swe-agent or harbor"),
                setting: Optional[str] = typer.Option(None, help="setting name (default: from agent and model)"),
                resolved: Optional[Path] = typer.Option(None, help="mini-swe-agent: verdicts, a SWE-bench "
                                                                    "evaluation report or a JSON {id: bool}"),
                missing_as_failed: bool = typer.Option(False, help="mini-swe-agent: import trajectories without a "
                                                                   "verdict as failures (ending 'unverified')"),
                force: bool = typer.Option(False, help="replace an existing run folder of that name")):
    """Read runs made elsewhere (mini-swe-agent, Harbor) into a tbscale run folder, so `tbscale
    report` (pass@k, costs, endings, behaviours) and `tbscale judge` work on them. Nothing is rerun.
    For mini-swe-agent, each PATH is one trial of every task found in it."""
    from rich.console import Console

    from tbscale.analysis import importers
    from tbscale.errors import TbscaleError

    console = Console(stderr=True)
    try:
        result = importers.import_runs(paths, output_dir / name, fmt=fmt, setting=setting, resolved=resolved,
                                       missing_as_failed=missing_as_failed, force=force)
    except TbscaleError as e:
        _fail(str(e))
        return
    console.print(f"imported {result.trials} trials of {result.tasks} tasks ({result.format}) into {result.run_dir}"
                  + (f"; {len(result.warnings)} warnings" if result.warnings else ""), highlight=False)
    for w in result.warnings[:20]:
        console.print(f"[yellow]warning:[/] {w}", highlight=False, soft_wrap=True)
    console.print(f"report with: tbscale report {result.run_dir}", highlight=False)
