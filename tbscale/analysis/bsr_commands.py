"""`tbscale rewards`: behavioral self-rewarding (BSR) over finished runs (see docs/bsr.md).

Registered by tbscale.cli through `register(app)`; heavy imports stay inside the command.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer


def register(app: typer.Typer) -> None:
    app.command("rewards")(rewards)


def _fail(message: str, code: int = 2) -> None:
    from rich.console import Console

    Console(stderr=True).print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def resolve_judge_model(model: str, config: Path | None, api_base: str | None, api_key_env: str | None,
                        run_dir: Path):
    """The judge's ModelConfig, like `tbscale judge`: a key of --config's `models:` or of the run's
    models, a YAML holding one model mapping (`model:`, `api_base:`, `sim:` ...; optionally under
    `judge:`), or a litellm model string. --api-base / --api-key-env override what was found."""
    import json

    from pydantic import ValidationError

    from tbscale.config import ModelConfig
    from tbscale.errors import TbscaleError

    raw: dict[str, Any] = {}
    if config is not None:
        from tbscale.config import read_yaml_mapping

        raw = read_yaml_mapping(config)
        raw = raw.get("judge", raw)
    models = dict(raw.get("models") or {})
    manifest = run_dir / "manifest.json"
    if manifest.is_file():
        run_models = json.loads(manifest.read_text()).get("experiment", {}).get("models", {}) or {}
        models = {**run_models, **models}
    try:
        if model in models:
            cfg = ModelConfig.model_validate(models[model])
        elif config is not None and raw.get("model") and "models" not in raw:
            cfg = ModelConfig.model_validate({**raw, "model": model if model != "sim/bsr_judge" else raw["model"]})
        elif "/" in model:
            cfg = ModelConfig(model=model)
        else:
            raise TbscaleError(f"judge model {model!r}: not a key of the config's or the run's models, and not a "
                               "litellm model string (provider/model)")
    except ValidationError as e:
        first = e.errors()[0]
        raise TbscaleError(f"{config or 'judge model'}: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    updates = {k: v for k, v in {"api_base": api_base, "api_key_env": api_key_env}.items() if v}
    return cfg.model_copy(update=updates) if updates else cfg


def rewards(runs: list[Path] = typer.Argument(..., help="run folder(s) holding trials.jsonl"),
            judge_model: str = typer.Option("sim/bsr_judge", "--judge-model", "--model",
                                            help="judge: a model key (run or --config) or litellm model string"),
            config: Optional[Path] = typer.Option(None, help="judge YAML: one model mapping, or models: + model:"),
            api_base: Optional[str] = typer.Option(None, help="judge endpoint (OpenAI-compatible servers)"),
            api_key_env: Optional[str] = typer.Option(None, help="environment variable holding the judge's key"),
            seed: int = typer.Option(0, help="seed of presentation order, schedule ties and the random control"),
            random_control: bool = typer.Option(False, help="random auxiliary rewards of the same amplitude, "
                                                            "no judge calls"),
            group_by: str = typer.Option("setting", help="setting: task x setting groups; task: pool settings/runs"),
            buckets: str = typer.Option("fail", help="buckets to judge: fail, pass or fail,pass"),
            a0: float = typer.Option(0.15, help="amplitude of failure-bucket auxiliary rewards"),
            a1: float = typer.Option(0.0, help="amplitude of success-bucket auxiliary rewards"),
            delta: float = typer.Option(0.5, help="deadzone half-width (normalized score units)"),
            tau: float = typer.Option(0.5, help="deadzone softness (0: hard deadzone)"),
            bt_l2: float = typer.Option(0.1, help="L2 regularization of the Bradley-Terry fit"),
            concurrency: int = typer.Option(8, help="judge calls at once"),
            output: Optional[Path] = typer.Option(None, help="output folder (default: FIRST_RUN/rewards)"),
            top: int = typer.Option(3, help="top/bottom trajectories to list")):
    """Behavioral self-rewarding: judge same-outcome trajectories of each task pairwise, fit
    Bradley-Terry scores and write refined rewards (reward + bounded auxiliary reward, every pass
    above every fail) to RUN/rewards/: bsr.jsonl, comparisons.jsonl, stats.csv, manifest.json."""
    import asyncio

    from rich.console import Console
    from rich.table import Table

    from tbscale.analysis import bsr, tables
    from tbscale.errors import TbscaleError

    console = Console()
    err = Console(stderr=True)
    params = bsr.BsrParams(a0=a0, a1=a1, delta=delta, tau=tau, bt_l2=bt_l2, group_by=group_by, seed=seed,
                           buckets=tuple(b.strip() for b in buckets.split(",") if b.strip()),
                           random_control=random_control, concurrency=concurrency)
    try:
        run_dirs = tables.find_run_dirs(runs)
        df = tables.load_trials(run_dirs)
        model_cfg, judge = None, None
        if not random_control:
            model_cfg = resolve_judge_model(judge_model, config, api_base, api_key_env, run_dirs[0])
            if model_cfg.is_simulated:
                err.print("[yellow]Simulated judge (sim/...): a rule-based stand-in with noise; its preferences "
                          "exercise the pipeline and measure nothing.[/]")
            judge = bsr.llm_judge(model_cfg)
        result = asyncio.run(bsr.refine(df, params, judge))
        out_dir = output or (run_dirs[0] / "rewards")
        paths = bsr.write_outputs(out_dir, result, params, model_cfg.model if model_cfg else None,
                                  bool(model_cfg and model_cfg.is_simulated), run_dirs)
    except TbscaleError as e:
        _fail(str(e))
        return

    mode = "random control" if random_control else f"judge {model_cfg.model}"
    console.print(f"[bold]BSR rewards[/] ({mode}, seed {seed}, group by {group_by}): {len(result.trajectories)} "
                  f"trajectories, {len(result.comparisons)} judge calls, {result.errors} failed", highlight=False)
    t = Table(title="buckets")
    for col in ("group", "bucket", "n", "schedule", "comparisons", "score spread", "aux range"):
        t.add_column(col)
    for b in result.buckets:
        t.add_row(b["group"], b["bucket"], str(b["n"]), b["schedule"], str(b["comparisons"]),
                  f"{b['score_spread']:.3f}", f"[{b['aux_min']:+.3f}, {b['aux_max']:+.3f}]")
    console.print(t)
    rows = bsr.reward_rows(result)
    passes = [r["refined_reward"] for r in rows if r["passed"]]
    fails = [r["refined_reward"] for r in rows if not r["passed"]]
    if passes and fails:
        console.print(f"ordering guarantee: lowest pass {min(passes):.4f} > highest fail {max(fails):.4f} "
                      f"({'holds' if result.ordering_ok else 'BROKEN'}); amplitudes a0={result.a0:.4f} "
                      f"a1={result.a1:.4f} (scale {result.scale:.3f})", highlight=False)
    else:
        console.print(f"ordering guarantee: trivially holds (only {'passes' if passes else 'failures'})",
                      highlight=False)
    ranked = sorted(rows, key=lambda r: r["refined_reward"], reverse=True)
    for title, part in (("top", ranked[:top]), ("bottom", ranked[-top:][::-1])):
        tt = Table(title=f"{title} trajectories")
        for col in ("trial_key", "task", "setting", "passed", "bt_score", "aux", "refined"):
            tt.add_column(col)
        for r in part:
            tt.add_row(r["trial_key"], r["task_id"], r["setting"], str(r["passed"]), f"{r['bt_score']:+.3f}",
                       f"{r['aux_reward']:+.4f}", f"{r['refined_reward']:.4f}")
        console.print(tt)
    console.print(f"wrote {paths['rewards']}, {paths['comparisons']}, {paths['stats']}, {paths['manifest']}",
                  highlight=False, soft_wrap=True)
    if result.errors:
        raise typer.Exit(1)
