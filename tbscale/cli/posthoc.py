"""Post-hoc commands over finished runs: `tbscale judge` (the LLM judge), `tbscale rewards`
(behavioural self-rewarding) and `tbscale import` (runs made by other harnesses)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tbscale.cli.app import app, console, labelled, out, split_list
from tbscale.errors import TbscaleError


@app.command("judge")
def judge(run: Path = typer.Argument(..., help="a run folder (holding trials.jsonl)"),
          model: Optional[str] = typer.Option(None, help="judge model: a key of the run's models or of --config, "
                                                        "or a litellm model string (e.g. openai/gpt-4.1)"),
          config: Optional[Path] = typer.Option(None, help="judge YAML (see configs/judge_demo.yaml)"),
          samples: Optional[int] = typer.Option(None, help="judgements per trajectory, averaged (default 2)"),
          settings: Optional[list[str]] = typer.Option(None, help="setting names to judge: comma-separated or repeated"),
          tasks: Optional[list[str]] = typer.Option(None, help="task ids to judge: comma-separated or repeated"),
          per_task: Optional[int] = typer.Option(None, help="at most this many trials per setting and task"),
          rubrics: bool = typer.Option(True, help="judge the 28 behaviour rubrics (turn-bon Table 6)"),
          reward_hacking: bool = typer.Option(True, help="check passing attempts for reward hacking (Appendix G)"),
          concurrency: Optional[int] = typer.Option(None, help="judge calls at once")):
    """Judge finished trajectories with an LLM: behaviour rubrics and reward hacking. Results go to
    RUN/judge/ and appear in `tbscale report RUN`; rerunning resumes."""
    if not (run / "trials.jsonl").is_file():  # said before the judge's modules (pandas) are imported
        raise TbscaleError(f"{run}: not a run folder (no trials.jsonl)")
    import asyncio

    from tbscale.posthoc.judge import run as J
    from tbscale.posthoc.pipeline import resolve_judge_model

    split = split_list
    cfg = J.load_judge_config(config, model, samples=samples, settings=split(settings), tasks=split(tasks),
                              per_task=per_task, concurrency=concurrency,
                              rubrics=None if rubrics else False,
                              reward_hacking=None if reward_hacking else False)
    resolved = resolve_judge_model(cfg.model, cfg.models, run)
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
    console.print(f"judged {run}: {stats.rubric_calls} rubric judgements, {stats.rh_calls} reward-hacking "
                  f"judgements, {stats.skipped} already done, {stats.errors} failed; results in {run / 'judge'}",
                  highlight=False)
    console.print(f"see them with: tbscale report {run}", highlight=False)
    if stats.errors:
        raise typer.Exit(1)


@app.command("import")
def import_runs(paths: list[Path] = typer.Argument(..., help="terminal-bench `tb run` folders or submissions, "
                                                             "mini-swe-agent output folders or trajectory files, "
                                                             "Harbor job / trial folders or ATIF files"),
                name: str = typer.Option(..., help="name of the run folder to create"),
                output_dir: Path = typer.Option(Path("results"), help="where the run folder goes"),
                fmt: str = typer.Option("auto", "--format", help="auto (told by content), terminal-bench, "
                                                                 "mini-swe-agent or harbor"),
                setting: Optional[str] = typer.Option(None, help="setting name (default: from agent and model)"),
                resolved: Optional[Path] = typer.Option(None, help="mini-swe-agent: verdicts, a SWE-bench "
                                                                    "evaluation report or a JSON {id: bool}"),
                missing_as_failed: bool = typer.Option(False, help="mini-swe-agent: import trajectories without a "
                                                                   "verdict as failures (ending 'unverified')"),
                force: bool = typer.Option(False, help="replace an existing run folder of that name")):
    """Read runs made elsewhere (terminal-bench, mini-swe-agent, Harbor) into a tbscale run folder,
    so `tbscale report` (pass@k, costs, endings, behaviours, the numbers a source published) and
    `tbscale judge` work on them. Nothing is rerun. For mini-swe-agent, each PATH is one trial of
    every task found in it; for terminal-bench, the runs of a submission are trials of its tasks."""
    from tbscale.ingest import import_runs as import_into
    from tbscale.names import check_name

    check_name(name, "--name")
    result = import_into(paths, output_dir / name, fmt=fmt, setting=setting, resolved=resolved,
                         missing_as_failed=missing_as_failed, force=force)
    console.print(f"imported {result.trials} trials of {result.tasks} tasks ({result.format}) into {result.run_dir}"
                  + (f"; {len(result.warnings)} warnings" if result.warnings else ""), highlight=False)
    for w in result.warnings[:20]:
        console.print(labelled("warning:", "yellow", str(w)), highlight=False, soft_wrap=True)
    console.print(f"report with: tbscale report {result.run_dir}", highlight=False)


def judge_model_config(model: str, config: Path | None, api_base: str | None, api_key_env: str | None,
                       run_dir: Path):
    """The judge's ModelConfig: a key of --config's `models:` or of the run's models, a YAML holding
    one model mapping (`model:`, `api_base:`, `sim:` ...; optionally under `judge:`), or a litellm
    model string. --api-base / --api-key-env override what was found."""
    from tbscale.config import ModelConfig, read_yaml_mapping, validate_file
    from tbscale.posthoc.pipeline import resolve_judge_model

    raw: dict = {}
    if config is not None:
        raw = read_yaml_mapping(config)
        raw = raw.get("judge", raw)
    if config is not None and raw.get("model") and "models" not in raw:  # one model mapping
        cfg = validate_file(ModelConfig, {**raw, "model": model if model != "sim/bsr_judge" else raw["model"]}, config)
    else:
        cfg = resolve_judge_model(model, raw.get("models"), run_dir, str(config or "judge model"))
    updates = {k: v for k, v in {"api_base": api_base, "api_key_env": api_key_env}.items() if v is not None}
    # Validated like a config's model (a URL that is one, a variable name that is one).
    return validate_file(ModelConfig, {**cfg.model_dump(exclude_unset=True), **updates},
                         "--api-base/--api-key-env") if updates else cfg


@app.command("rewards")
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
    from tbscale.runfiles import find_run_dirs

    run_dirs = find_run_dirs(runs)  # a folder with no run is named before pandas and the judge are imported
    import asyncio

    from rich.table import Table
    from rich.text import Text

    from tbscale.names import writable_folder
    from tbscale.posthoc import bsr
    from tbscale.rundata import load_trials

    err = console
    params = bsr.BsrParams(a0=a0, a1=a1, delta=delta, tau=tau, bt_l2=bt_l2, group_by=group_by, seed=seed,
                           buckets=tuple(b.strip() for b in buckets.split(",") if b.strip()),
                           random_control=random_control, concurrency=concurrency)
    df = load_trials(run_dirs)
    df = df[~df["infra_error"]]  # a trial the harness failed says nothing about the agent
    model_cfg, judge = None, None
    if not random_control:
        model_cfg = judge_model_config(judge_model, config, api_base, api_key_env, run_dirs[0])
        if model_cfg.is_simulated:
            err.print("[yellow]Simulated judge (sim/...): a rule-based stand-in with noise; its preferences "
                      "exercise the pipeline and measure nothing.[/]")
        judge = bsr.llm_judge(model_cfg)
    out_dir = writable_folder(output or (run_dirs[0] / "rewards"), "rewards folder")  # before any judge call
    store = bsr.judgement_store(out_dir, bsr.bsr_judge_key(model_cfg, params)) if judge is not None else None
    result = asyncio.run(bsr.refine(df, params, judge, store))
    paths = bsr.write_outputs(out_dir, result, params, model_cfg.model if model_cfg else None,
                              bool(model_cfg and model_cfg.is_simulated), run_dirs)

    mode = "random control" if random_control else f"judge {model_cfg.model}"
    out.print(f"[bold]BSR rewards[/] ({mode}, seed {seed}, group by {group_by}): {len(result.trajectories)} "
                  f"trajectories, {len(result.comparisons)} judge calls, {result.errors} failed", highlight=False)
    t = Table(title="buckets")
    for col in ("group", "bucket", "n", "schedule", "comparisons", "score spread", "aux range"):
        t.add_column(col)
    for b in result.buckets:
        t.add_row(Text(b.group), Text(b.bucket), str(b.n), b.schedule, str(b.comparisons), f"{b.score_spread:.3f}",
                  f"[{b.aux_min:+.3f}, {b.aux_max:+.3f}]")
    out.print(t)
    rows = bsr.reward_rows(result)
    passes = [r["refined_reward"] for r in rows if r["passed"]]
    fails = [r["refined_reward"] for r in rows if not r["passed"]]
    if passes and fails:
        out.print(f"ordering guarantee: lowest pass {min(passes):.4f} > highest fail {max(fails):.4f} "
                      f"({'holds' if result.ordering_ok else 'BROKEN'}); amplitudes a0={result.a0:.4f} "
                      f"a1={result.a1:.4f} (scale {result.scale:.3f})", highlight=False)
    else:
        out.print(f"ordering guarantee: trivially holds (only {'passes' if passes else 'failures'})",
                      highlight=False)
    ranked = sorted(rows, key=lambda r: r["refined_reward"], reverse=True)
    for title, part in (("top", ranked[:top]), ("bottom", ranked[-top:][::-1])):
        tt = Table(title=f"{title} trajectories")
        for col in ("trial_key", "task", "setting", "passed", "bt_score", "aux", "refined"):
            tt.add_column(col)
        for r in part:
            tt.add_row(r["trial_key"], Text(r["task_id"]), Text(r["setting"]), str(r["passed"]), f"{r['bt_score']:+.3f}",
                       f"{r['aux_reward']:+.4f}", f"{r['refined_reward']:.4f}")
        out.print(tt)
    out.print(f"wrote {paths['rewards']}, {paths['comparisons']}, {paths['stats']}, {paths['manifest']}",
                  highlight=False, soft_wrap=True)
    if result.errors:
        raise typer.Exit(1)
