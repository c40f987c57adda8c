"""`tbscale tasks list` and `tbscale tasks check`: what is under a folder of tasks, and whether each
task is honest (its reference solution passes, doing nothing fails)."""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Optional

import typer

from tbscale.cli.app import console, fail, out, sigterm_as_interrupt, split_list, tasks_app


@tasks_app.command("list")
def tasks_list(path: Path = typer.Argument(Path("tasks"), help="a task directory or a folder of them")):
    """List the tasks under PATH; broken ones are listed with what is wrong."""
    from rich.table import Table

    from tbscale.tasks import load_tasks

    tasks, problems = load_tasks(path, on_error="collect")
    table = Table(title=f"{len(tasks)} tasks in {path}")
    for col in ("id", "format", "difficulty", "category", "steps", "agent timeout", "instruction"):
        table.add_column(col)
    for t in tasks:
        table.add_row(t.id, t.format, str(t.metadata.get("difficulty", "")), str(t.metadata.get("category", "")),
                      str(len(t.solution_steps())), f"{t.agent_timeout_sec:.0f} s",
                      t.instruction.splitlines()[0][:60] if t.instruction else "")
    out.print(table)
    for p, msg in problems:
        console.print(f"[red]broken:[/] {msg}", highlight=False, soft_wrap=True)
    if problems:
        raise typer.Exit(1)


# What a test or a solution prints when it needs the internet and has none: name resolution,
# connections, and the download tools' own messages (pip, uv, curl, wget, apt, git, npm).
NEEDS_INTERNET = re.compile("|".join([
    r"Temporary failure in name resolution", r"Could not resolve host", r"Name or service not known",
    r"nodename nor servname", r"getaddrinfo (?:ENOTFOUND|EAI_AGAIN)", r"No address associated with hostname",
    r"Failed to establish a new connection", r"Network is unreachable", r"Could not connect to server",
    r"curl: \((?:5|6|7|28|35)\)", r"wget: unable to resolve", r"unable to resolve host address",
    r"Failed to fetch https?://", r"Could not find a version that satisfies", r"No matching distribution found",
    r"error sending request for url", r"Failed to download", r"dns error", r"Connection timed out",
    r"fatal: unable to access 'https?://", r"npm ERR! (?:code )?E(?:AI_AGAIN|NOTFOUND)",
    r"astral\.sh/uv/.*(?:not found|No such file)", r"uv(?:x)?: (?:command )?not found",
    r"dial tcp: lookup \S+", r"is not present and cannot be pulled", r"pull access denied",
]), re.IGNORECASE)
INFRA_ENVIRONMENT = {"sandbox_error", "image_build_error", "healthcheck_failed"}


def _trial_text(run_dir: Path, row: dict) -> str:
    """Everything a trial printed (observations, verifier output) and its error, for the reasons."""
    parts = [((row.get("error") or {}).get("message") or "")]
    path = run_dir / (row.get("trajectory_path") or "")
    if row.get("trajectory_path") and path.is_file():
        parts.append(path.read_text(encoding="utf-8", errors="replace")[-2_000_000:])
    return "\n".join(parts)


def check_reasons(rows: list[dict], tasks: list, run_dir: Path, network: str = "task") -> dict[str, tuple[str, str]]:
    """task id -> (category, detail) for `tbscale tasks check`: "ok", "refused", "needs internet",
    "needs BuildKit", "no solution", "oracle failed", "nop passed", "verifier error" or
    "environment error". A failure whose output
    shows a failed download or name lookup is "needs internet", told apart from a real failure."""
    by_task: dict[str, dict[str, dict]] = {}
    for r in rows:
        by_task.setdefault(r["task_id"], {})[r["setting"]] = r
    policies = {t.id: t for t in tasks}
    out: dict[str, tuple[str, str]] = {}
    for task_id in sorted(by_task):
        got = by_task[task_id]
        oracle, nop = got.get("oracle"), got.get("nop")
        refused = [r for r in (oracle, nop) if r and r.get("stop_reason") == "task_refused"]
        if refused:
            out[task_id] = ("refused", ((refused[0].get("error") or {}).get("message") or "")[:200])
            continue
        bad = [r for r in (oracle, nop) if r and ((r["setting"] == "oracle") != bool(r["passed"]))]
        if not bad and oracle and nop:
            out[task_id] = ("ok", "")
            continue
        r = bad[0] if bad else (oracle or nop)
        text = _trial_text(run_dir, r) if r["setting"] == "oracle" or r.get("infra_error") else ""
        m = NEEDS_INTERNET.search(text)
        message = ((r.get("error") or {}).get("message") or "")
        if m and (r["setting"] == "oracle" or r.get("infra_error")):
            task = policies.get(task_id)
            offline = network == "no-network" or (network == "task" and task is not None and not (
                task.verifier.network.internet and task.agent.network.internet))
            pull = re.search(r"registry|pull|ghcr\.io|docker\.io", m.group(0) + text[m.start():m.start() + 200])
            if pull:
                where = "a base image that is not on this engine and cannot be pulled"
            elif r.get("stop_reason") == "image_build_error":
                where = "the image build (a download)"
            else:
                where = "its test or solution"
            note = " (it runs with no internet: --network no-network)" if network == "no-network" else \
                " (its own policy gives it no internet)" if offline and not pull else ""
            line = re.split(r'\\n|\n|"', text[m.start():m.start() + 300])[0]
            out[task_id] = ("needs internet", f"{where} needs the internet{note}: {line[:120]}")
        elif "requires BuildKit" in message or "must be a directory and end with a /" in message:
            out[task_id] = ("needs BuildKit", "its Dockerfile uses BuildKit-only syntax (e.g. RUN --mount, heredocs) "
                                              "that the classic builder, which the docker SDK drives, refuses")
        elif r["setting"] == "oracle" and "has no reference solution" in message:
            out[task_id] = ("no solution", message[:160])
        elif r.get("stop_reason") in INFRA_ENVIRONMENT:
            out[task_id] = ("environment error", f"{r['stop_reason']}: {message[:160]}")
        elif r.get("ending") == "verifier_error":
            out[task_id] = ("verifier error", f"{r.get('stop_reason')}: {message[:160]}")
        elif r["setting"] == "oracle":
            out[task_id] = ("oracle failed", f"reward {r.get('reward')}, {r.get('ending')} {message[:120]}".strip())
        else:
            out[task_id] = ("nop passed", f"reward {r.get('reward')}")
    return out


@tasks_app.command("check")
def tasks_check(path: Path = typer.Argument(Path("tasks")),
                concurrency: int = typer.Option(4, min=1, help="containers at once"),
                include: Optional[list[str]] = typer.Option(None, help="task ids to check: comma-separated or repeated"),
                exclude: Optional[list[str]] = typer.Option(None, help="task ids to skip: comma-separated or repeated"),
                network: str = typer.Option("task", help="every task's network policy, in every phase: task "
                                                         "(as each task says), public or no-network"),
                storage_limit: str = typer.Option("enforce", help="storage_mb on an engine that cannot enforce it: "
                                                                  "enforce (refuse the task) or ignore (run without it)"),
                keep: Optional[Path] = typer.Option(None, help="keep the check's run folder here")):
    """Run the oracle and the nop agent on every task: every oracle must pass and every nop fail.
    The table gives each other task's reason: refused, needs internet, oracle failed, nop passed,
    verifier error, environment error."""
    from rich.markup import escape
    from rich.table import Table

    from tbscale.cli.run import run_with_progress
    from tbscale.config import Experiment
    from tbscale.environments import get_backend
    from tbscale.runner import Runner, load_rows
    from tbscale.tasks import load_tasks

    from tbscale.config import bounds

    if (problem := bounds.over_limit("concurrency", concurrency)):
        fail(f"--concurrency: {problem}")
    networks = {"task": "task", "public": "bridge", "no-network": "none"}
    if network not in networks:
        fail(f"--network: one of task, public, no-network, got {network!r}")
    if storage_limit not in ("enforce", "ignore"):
        fail(f"--storage-limit: enforce or ignore, got {storage_limit!r}")
    tasks, problems = load_tasks(path, include=split_list(include), exclude=split_list(exclude),
                                 on_error="collect")
    get_backend("docker").check()
    for p, msg in problems:
        console.print(f"[red]broken:[/] {escape(msg)}", highlight=False, soft_wrap=True)
    exp = Experiment.model_validate({
        "name": "tasks-check", "tasks": {"path": str(path)}, "trials": 1, "concurrency": concurrency,
        "environment": {"network": networks[network], "storage_limit": storage_limit},
        "settings": [{"name": "oracle", "agent": "oracle"}, {"name": "nop", "agent": "nop"}]})
    run_dir = keep or Path(tempfile.mkdtemp(prefix="tbscale-check-")) / "tasks-check"
    runner = Runner(exp, tasks, run_dir)
    sigterm_as_interrupt()
    t0 = time.monotonic()
    try:
        run_with_progress(runner, "tasks check")
    except KeyboardInterrupt:
        raise typer.Exit(130)
    wall = time.monotonic() - t0
    rows = load_rows(run_dir)
    reasons = check_reasons(rows, tasks, run_dir, network)
    offenders = {t: r for t, r in reasons.items() if r[0] != "ok"}
    (run_dir / "check.json").write_text(json.dumps(
        {"path": str(path), "network": network, "wall_sec": round(wall, 1), "tasks": len(tasks),
         "broken": [{"path": str(p), "error": m} for p, m in problems],
         "reasons": {t: {"category": c, "detail": d} for t, (c, d) in sorted(reasons.items())}}, indent=2))
    if offenders or problems:
        table = Table(title="tasks that are not ok")
        for col in ("task", "reason", "detail"):
            table.add_column(col)
        for task_id, (category, detail) in sorted(offenders.items(), key=lambda x: (x[1][0], x[0])):
            table.add_row(escape(task_id), category, escape(detail))
        for p, msg in problems:
            table.add_row(escape(p.name), "broken", escape(msg[:200]))
        out.print(table)
        counts = Counter(c for c, _ in reasons.values())
        counts.update({"broken": len(problems)} if problems else {})
        summary = ", ".join(f"{n} {c}" for c, n in sorted(counts.items(), key=lambda x: (x[0] != "ok", x[0])))
        console.print(f"[red]{len(offenders) + len(problems)} problems[/] ({summary}; {wall:.0f} s; trajectories in "
                      f"{run_dir})", highlight=False)
        raise typer.Exit(1)
    out.print(f"[green]all {len(tasks)} tasks ok[/]: every oracle passes, every nop fails ({wall:.0f} s)")
