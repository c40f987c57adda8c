"""`tbscale tasks list` and `tbscale tasks check`: what is under a folder of tasks, and whether each
task is honest (its reference solution passes, doing nothing fails)."""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from tbscale.cli.app import console, fail, labelled, out, say, sigterm_as_interrupt, split_list, tasks_app

if TYPE_CHECKING:
    from tbscale.types.results import TrialResult


def _load(path: Path, strict_keys: bool, **kwargs):
    from tbscale.tasks import load_tasks

    return load_tasks(path, on_error="collect", strict=strict_keys, **kwargs)


def _ignored_keys_notice(tasks: list) -> None:
    """Once: the task-file keys the loaders set aside (an unknown key the reference harness ignores
    too, a legacy compose key carried out another way), with how many tasks have each."""
    counts: dict[tuple[str, str], list[str]] = {}
    for t in tasks:
        for item in t.not_enforced:
            counts.setdefault((item.key, item.why), []).append(t.id)
    for (key, why), ids in sorted(counts.items(), key=lambda x: -len(x[1]))[:10]:
        which = ", ".join(ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")
        say(f"not enforced: {key} ({len(ids)} task{'s' if len(ids) > 1 else ''}: {which}): {why}", "yellow")
    if len(counts) > 10:
        say(f"not enforced: {len(counts) - 10} more keys (`tbscale tasks show TASK` lists a task's)", "yellow")


@tasks_app.command("list")
def tasks_list(path: Path = typer.Argument(Path("tasks"), help="a task directory or a folder of them"),
               strict_keys: bool = typer.Option(False, help="refuse task-file keys the reference harness would "
                                                            "ignore (unknown keys)")):
    """List the tasks under PATH; broken ones are listed with what is wrong."""
    from rich.table import Table
    from rich.text import Text

    tasks, problems = _load(path, strict_keys)
    table = Table(title=Text(f"{len(tasks)} tasks in {path}"))
    for col in ("id", "format", "difficulty", "category", "steps", "agent timeout", "instruction"):
        table.add_column(col)
    for t in tasks:
        first = t.instruction.splitlines()[0][:60] if t.instruction else ""
        table.add_row(*map(Text, (t.id, t.format, str(t.metadata.get("difficulty", "")),
                                  str(t.metadata.get("category", "")), str(len(t.solution_steps())),
                                  f"{t.agent_timeout_sec:.0f} s", first)))
    out.print(table)
    _ignored_keys_notice(tasks)
    for p, msg in problems:
        console.print(labelled("broken:", "red", msg), highlight=False, soft_wrap=True)
    if problems:
        raise typer.Exit(1)


INFRA_ENVIRONMENT = {"sandbox_error", "image_build_error", "healthcheck_failed"}


def _trial_text(run_dir: Path, row: TrialResult) -> str:
    """Everything a trial printed (observations, verifier output) and its error, for the reasons."""
    parts = [row.error.message if row.error else ""]
    path = run_dir / (row.trajectory_path or "")
    if row.trajectory_path and path.is_file():
        parts.append(path.read_text(encoding="utf-8", errors="replace")[-2_000_000:])
    return "\n".join(parts)


def check_reasons(rows: list[TrialResult], tasks: list, run_dir: Path, network: str = "task",
                  crashes: dict[tuple[str, str], str] | None = None) -> dict[str, tuple[str, str]]:
    """task id -> (category, detail) for `tbscale tasks check`: "ok", "refused", "needs internet",
    "needs X" (the backend's builder lacks X: errors.BuilderUnsupported; the docker backend's
    "needs BuildKit"), "no solution", "oracle tampered" (the reference solution's trial carries
    tampering entries), "oracle failed", "nop passed", "verifier error",
    "environment error" or "crashed" (a trial left no result: tbscale itself failed; `crashes`
    maps (setting, task id) to what the runner recorded of it, and crashes.log has the traceback).
    A failure whose output
    shows a failed download or name lookup is "needs internet", told apart from a real failure;
    where the verifier still gave a verdict, the detail says so (the download may not be the cause).
    A task with no reference solution (whole datasets ship without one) is judged by its nop alone:
    "no solution" says the nop failed with a verdict; a nop that passed, or whose image, container
    or verifier failed, gets that category instead, which "no solution" would otherwise hide."""
    from tbscale.environments.network_failures import NEEDS_INTERNET

    by_task: dict[str, dict[str, TrialResult]] = {}
    for r in rows:
        by_task.setdefault(r.task_id, {})[r.setting] = r
    policies = {t.id: t for t in tasks}
    out: dict[str, tuple[str, str]] = {}
    for task_id in sorted(by_task):
        got = by_task[task_id]
        oracle, nop = got.get("oracle"), got.get("nop")
        refused = [r for r in (oracle, nop) if r and r.stop_reason == "task_refused"]
        if refused:
            out[task_id] = ("refused", (refused[0].error.message if refused[0].error else "")[:200])
            continue
        bad = [r for r in (oracle, nop) if r and ((r.setting == "oracle") != r.passed)]
        if not bad and oracle and nop:
            out[task_id] = ("ok", "")
            continue
        unsolved = oracle is not None and oracle.error is not None and "has no reference solution" in oracle.error.message
        if unsolved and nop is not None:
            bad = [nop] if nop.passed or nop.infra_error or nop.ending == "verifier_error" else []
            if not bad:
                out[task_id] = ("no solution", f"{oracle.error.message[:120]}; its nop failed with a verdict "
                                               f"(reward {nop.reward})")
                continue
        r = bad[0] if bad else (oracle or nop)
        if r is oracle and r.tampering:
            # what the reference solution did is recorded as tampering: that, not what followed from it
            # (a verifier it obstructed may then fail a download), is the task's reason
            kinds = ", ".join(dict.fromkeys(e.kind for e in r.tampering))
            # a detail says what it checks, then what it found after the first ": ": the latter
            found = r.tampering[0].detail.split(": ", 1)[-1]
            out[task_id] = ("oracle tampered", f"{kinds}: {found[:200]}")
            continue
        text = _trial_text(run_dir, r) if r.setting == "oracle" or r.infra_error else ""
        m = NEEDS_INTERNET.search(text)
        message = r.error.message if r.error else ""
        if m and (r.setting == "oracle" or r.infra_error):
            task = policies.get(task_id)
            offline = network == "no-network" or (network == "task" and task is not None and not (
                task.verifier.network.internet and task.agent.network.internet))
            pull = re.search(r"registry|pull|ghcr\.io|docker\.io", m.group(0) + text[m.start():m.start() + 200])
            # the build log's last FROM before the failure names the image (the classic builder's
            # "Step 1/9 : FROM ubuntu:22.04"); the script that builds stand-ins takes that name
            base = re.findall(r"Step \d+/\d+ : FROM (?:--platform=\S+ )?(\S+)", text[:m.start() + 300])
            if pull and base:
                where = (f"the base image {base[-1]}, not on this engine and not to be pulled "
                         f"(scripts/ensure_docker.sh {base[-1]} builds a local stand-in),")
            elif pull:
                where = "a base image that is not on this engine and cannot be pulled"
            elif r.stop_reason == "image_build_error":
                where = "the image build (a download)"
            elif r.stop_reason in INFRA_ENVIRONMENT:  # a service of the environment, while it started
                where = "a service of its environment, starting,"
            else:
                where = "its test or solution"
            note = " (it runs with no internet: --network no-network)" if network == "no-network" else \
                " (its own policy gives it no internet)" if offline and not pull else ""
            line = re.split(r'\\n|\n|"', text[m.start():m.start() + 300])[0]
            # the verifier still gave a verdict: its tests ran, and may have failed for their own reason
            # (a failed `curl ... | sh` that the script goes past, then a test that fails)
            verdict = f"; its tests ran and gave reward {r.reward}" if r.ending == "wrong_submission" else ""
            out[task_id] = ("needs internet", f"{where} needs the internet{note}: {line[:120]}{verdict}")
        elif r.error is not None and r.error.type == "BuilderUnsupported":  # errors.py: "needs X: why\n..."
            needs, _, why = message.split("\n", 1)[0].partition(": ")
            out[task_id] = (needs, why)
        elif r is oracle and unsolved:
            out[task_id] = ("no solution", message[:160])
        elif r.stop_reason in INFRA_ENVIRONMENT:
            out[task_id] = ("environment error", f"{r.stop_reason}: {message[:160]}")
        elif r.ending == "verifier_error":
            out[task_id] = ("verifier error", f"{r.stop_reason}: {message[:160]}")
        elif r.setting == "oracle":
            out[task_id] = ("oracle failed", f"reward {r.reward}, {r.ending} {message[:120]}".strip()
                            + _unenforced(r))
        else:
            out[task_id] = ("nop passed", f"reward {r.reward}" + _unenforced(r))
        if unsolved and r is nop:
            category, detail = out[task_id]
            out[task_id] = (category, f"{detail} (and it has no reference solution)")
    # A planned trial with no line crashed (the runner logs it and records nothing, so that a rerun
    # runs it again): whatever its partner's line says, the task is not ok.
    crashes = crashes or {}
    for task in tasks:
        lost = [s for s in ("oracle", "nop") if s not in by_task.get(task.id, {})]
        if lost:
            out[task.id] = ("crashed", "; ".join(
                f"the {s} trial crashed: {crashes[s, task.id][:160]}" if (s, task.id) in crashes
                else f"the {s} trial left no result" for s in lost) + " (tracebacks in crashes.log)")
    return dict(sorted(out.items()))


def _history_exposed(rows: list[TrialResult]) -> dict:
    """task id -> its repositories that kept commits made after their HEAD when an agent started
    (runner/repository_history.py), from its oracle's or nop's line."""
    found: dict = {}
    for r in rows:
        repos = [x for x in r.repositories if x.left_after_head]
        if repos and r.task_id not in found:
            found[r.task_id] = repos
    return dict(sorted(found.items()))


def _unenforced(row: TrialResult) -> str:
    """A wrong verdict may come from a key this run did not carry out (storage_mb without a quota)."""
    keys = [x.key for x in row.not_enforced]
    return f" (not enforced here: {', '.join(keys[:4])})" if keys else ""


@tasks_app.command("check")
def tasks_check(path: Path = typer.Argument(Path("tasks")),
                concurrency: int = typer.Option(4, min=1, help="containers at once"),
                include: Optional[list[str]] = typer.Option(None, help="task ids to check: comma-separated or repeated"),
                exclude: Optional[list[str]] = typer.Option(None, help="task ids to skip: comma-separated or repeated"),
                network: str = typer.Option("task", help="every task's network policy, in every phase: task "
                                                         "(as each task says), public or no-network"),
                storage_limit: str = typer.Option("auto", help="storage_mb on an engine that cannot enforce a quota: "
                                                               "auto (run without it, as Harbor's Docker backend "
                                                               "does, and say so) or enforce (refuse the task)"),
                strict_keys: bool = typer.Option(False, help="refuse task-file keys the reference harness would "
                                                             "ignore (unknown keys)"),
                reward_key: Optional[str] = typer.Option(None, help="the key of a reward.json with several keys "
                                                                    "that is the verdict (default: reward, else the "
                                                                    "only key)"),
                keep: Optional[Path] = typer.Option(None, help="keep the check's run folder (trajectories, "
                                                               "check.json) here")):
    """Run the oracle and the nop agent on every task: every oracle must pass and every nop fail.
    The table gives each other task's reason: refused, needs internet, oracle failed, nop passed,
    verifier error, environment error, crashed. Without --keep nothing is left behind."""
    import shutil

    from rich.table import Table
    from rich.text import Text

    from tbscale.cli.run import run_with_progress
    from tbscale.config import Experiment
    from tbscale.environments import open_backend
    from tbscale.runner import Runner, load_rows
    from tbscale.runner.plan import with_reward_key

    from tbscale.config import bounds

    if (problem := bounds.over_limit("concurrency", concurrency)):
        fail(f"--concurrency: {problem}")
    networks = {"task": "task", "public": "bridge", "no-network": "none"}
    if network not in networks:
        fail(f"--network: one of task, public, no-network, got {network!r}")
    if storage_limit not in ("auto", "enforce", "ignore"):
        fail(f"--storage-limit: auto or enforce, got {storage_limit!r}")
    if reward_key is not None and not reward_key:
        fail("--reward-key: give a key of reward.json")
    tasks, problems = _load(path, strict_keys, include=split_list(include), exclude=split_list(exclude))
    with_reward_key(tasks, reward_key)
    exp = Experiment.model_validate({
        "name": "tasks-check", "tasks": {"path": str(path), "reward_key": reward_key}, "trials": 1,
        "concurrency": concurrency,
        "environment": {"network": networks[network], "storage_limit": storage_limit},
        "settings": [{"name": "oracle", "agent": "oracle"}, {"name": "nop", "agent": "nop"}]})
    open_backend(exp.environment).check()
    for p, msg in problems:
        console.print(labelled("broken:", "red", msg), highlight=False, soft_wrap=True)
    scratch = None if keep else Path(tempfile.mkdtemp(prefix="tbscale-check-"))
    run_dir = keep or scratch / "tasks-check"
    try:
        runner = Runner(exp, tasks, run_dir)
        sigterm_as_interrupt()
        t0 = time.monotonic()
        try:
            run_with_progress(runner, "tasks check")
        except KeyboardInterrupt:
            raise typer.Exit(130)
        wall = time.monotonic() - t0
        rows = load_rows(run_dir)
        crashed = {(spec.setting.name, spec.task.id): said for spec, said in runner.crashes}
        reasons = check_reasons(rows, tasks, run_dir, network, crashed)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    offenders = {t: r for t, r in reasons.items() if r[0] != "ok"}
    exposed = _history_exposed(rows)
    if keep:
        (run_dir / "check.json").write_text(json.dumps(
            {"path": str(path), "network": network, "wall_sec": round(wall, 1), "tasks": len(tasks),
             "broken": [{"path": str(p), "error": m} for p, m in problems],
             "not_enforced": [e.model_dump() for e in runner.not_enforced()],
             "history_exposed": {t: [r.model_dump() for r in repos] for t, repos in exposed.items()},
             "reasons": {t: {"category": c, "detail": d} for t, (c, d) in sorted(reasons.items())}}, indent=2))
    if exposed:
        which = ", ".join(f"{t} ({', '.join(f'{r.path}: {r.left_after_head}' for r in repos)})"
                          for t, repos in list(exposed.items())[:5]) + (f" and {len(exposed) - 5} more" if len(exposed) > 5 else "")
        say(f"history beyond HEAD: in {len(exposed)} task{'s' if len(exposed) > 1 else ''}, the repository given to the "
            f"agent keeps commits made after its HEAD, where a fix may be (commits: {which}); "
            "environment.repository_history: scrub removes them (docs/swebench.md)", "yellow")
    if offenders or problems:
        table = Table(title="tasks that are not ok")
        for col in ("task", "reason", "detail"):
            table.add_column(col)
        for task_id, (category, detail) in sorted(offenders.items(), key=lambda x: (x[1][0], x[0])):
            table.add_row(Text(task_id), Text(category), Text(detail))
        for p, msg in problems:
            table.add_row(Text(p.name), Text("broken"), Text(msg[:200]))
        out.print(table)
        counts = Counter(c for c, _ in reasons.values())
        counts.update({"broken": len(problems)} if problems else {})
        summary = ", ".join(f"{n} {c}" for c, n in sorted(counts.items(), key=lambda x: (x[0] != "ok", x[0])))
        where = f"trajectories in {run_dir}" if keep else "--keep DIR keeps the trajectories"
        console.print(labelled(f"{len(offenders) + len(problems)} problems", "red", f"({summary}; {wall:.0f} s; {where})"),
                      highlight=False, soft_wrap=True)
        raise typer.Exit(1)
    out.print(labelled(f"all {len(tasks)} tasks ok:", "green", f"every oracle passes, every nop fails ({wall:.0f} s)"))


def _find_task(task: str, root: Path, strict_keys: bool):
    """The task `task` names: a task folder (its base task), `<folder>.<key>` for a task.yaml
    variant, or a task id under `root`."""
    from tbscale.tasks import is_task_dir, load_task, load_tasks

    path = Path(task)
    if path.is_dir() and is_task_dir(path):
        return load_task(path, strict=strict_keys)
    stem, dot, _ = path.name.rpartition(".")
    if dot and is_task_dir(path.with_name(stem)):
        return load_task(path.with_name(stem), path.name, strict=strict_keys)
    if not root.exists():  # else the error would name only --path's default, `tasks`
        what = "not a task folder" if path.exists() else "no such task folder"
        fail(f"{task}: {what}; as a task id it is looked up under --path {root}, which does not exist")
    tasks, _ = load_tasks(root, include=[task], strict=strict_keys)
    if len(tasks) != 1:
        fail(f"{task}: {len(tasks)} tasks have this name under {root}: {', '.join(t.id for t in tasks[:5])}")
    return tasks[0]


@tasks_app.command("show")
def tasks_show(task: str = typer.Argument(..., help="a task folder, FOLDER.KEY for a task.yaml variant, or a task "
                                                    "id under --path"),
               path: Path = typer.Option(Path("tasks"), help="where to look a task id up"),
               as_json: bool = typer.Option(False, "--json", help="the same as JSON"),
               storage_limit: str = typer.Option("auto", help="as `tasks check --storage-limit`"),
               strict_keys: bool = typer.Option(False, help="refuse task-file keys the reference harness would "
                                                            "ignore (unknown keys)")):
    """One task as a run gives it: the instruction exactly as the agent receives it, and the
    resolved environment: image, resources, network per phase, users, workdir, verifier mode and
    timeout, artifacts, steps, and what is not enforced on this engine."""
    import json as json_lib
    import sys

    from tbscale.config import Experiment
    from tbscale.environments import open_backend
    from tbscale.runner.describe import as_text, describe
    from tbscale.runner.enforcement import capabilities

    if storage_limit not in ("auto", "enforce", "ignore"):
        fail(f"--storage-limit: auto or enforce, got {storage_limit!r}")
    found = _find_task(task, path, strict_keys)
    exp = Experiment.model_validate({"name": "tasks-show", "tasks": {"path": str(path)},
                                     "environment": {"storage_limit": storage_limit},
                                     "settings": [{"name": "show", "agent": "oracle"}]})
    try:
        caps = capabilities(open_backend(exp.environment))
    except Exception:  # no engine here: say what depends on one
        caps = None
    info = describe(found, exp, caps)
    sys.stdout.write((json_lib.dumps(info, indent=2, default=str) if as_json else as_text(info)) + "\n")
