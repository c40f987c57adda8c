"""Grading a SWE-bench attempt with the swebench package's own code.

Right after the agent's attempt ends (any ending), in the attempt's container:
1. the patch: `git add -A` and `git diff --cached <base_commit>` (patch.py); it goes into the
   verifier's details as `model_patch`, so it is stored with the trial's trajectory.
2. the grading container: by default a fresh container from the same image, where the patch is
   applied with swebench's own chain of apply commands (run_evaluation.GIT_APPLY_CMDS), as
   `python -m swebench.harness.run_evaluation` does with a predictions file; with
   `grading_container: same`, the agent's container as it stands.
3. the review: what the patch changes that the tests read besides the solution (a conftest.py,
   pytest's settings, test files the eval script does not reset: swebench_review.py), as tampering
   entries in `details.patch_tampering`; the verdict stays swebench's, the attempt is `tampered`.
4. the evaluation: swebench's TestSpec from the instance (make_test_spec: the instance's
   eval_script, which applies the test patch, runs the tests between swebench's markers and
   records their exit code), run as /eval.sh under the eval time limit.
5. the verdict: swebench's get_eval_report on that test log (its log parser, its FAIL_TO_PASS /
   PASS_TO_PASS rules, resolved = RESOLVED_FULL). Reward 1.0 when resolved, else 0.0.
   Infrastructure failures (swebench's environment-tier log signatures, a container that cannot
   start, an exec that fails) carry error "sandbox_error"; an eval past its time limit carries
   "verifier_timeout"; these are harness failures, not wrong submissions.

An empty patch is unresolved without running the tests, as swebench counts it (evaluate_empty_patch
runs them anyway).
"""

from __future__ import annotations

import base64
import io
import logging
import shlex
import tarfile
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from dataclasses import replace

from tbscale.environments import Environment
from tbscale.errors import SandboxError
from tbscale.tasks.swebench.row import SWEbenchRow
from tbscale.verifiers.result import VerifierContext, VerifierResult
from tbscale.verifiers.swebench_patch import extract_patch
from tbscale.verifiers.swebench_review import review_patch

MODEL_NAME = "tbscale"


def swebench_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("swebench")
    except metadata.PackageNotFoundError:  # pragma: no cover
        return "not installed"


def make_spec(instance: SWEbenchRow):
    """swebench's TestSpec for an instance row (its eval script gains the exit-code record)."""
    from swebench.harness.utils import make_test_spec

    return make_test_spec(instance)


def grade_log(instance: SWEbenchRow, model_patch: str | None, test_log: str) -> dict[str, Any]:
    """swebench's report for one instance from a test log: get_eval_report with tests status."""
    from swebench.harness.grading import get_eval_report

    spec = make_spec(instance)
    with tempfile.TemporaryDirectory(prefix="tbscale-swebench-") as d:
        path = Path(d) / "test_output.txt"
        path.write_text(test_log, encoding="utf-8")
        report = get_eval_report(test_spec=spec, test_log_path=str(path), include_tests_status=True,
                                 prediction={"instance_id": spec.instance_id, "model_name_or_path": MODEL_NAME,
                                             "model_patch": model_patch})
    return report[spec.instance_id]


def _summary(tests_status: dict[str, Any] | None) -> dict[str, str]:
    out = {}
    for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        part = (tests_status or {}).get(key) or {}
        ok, bad = len(part.get("success", [])), len(part.get("failure", []))
        out[key] = f"{ok}/{ok + bad}"
    return out


def apply_patch(box: Environment, patch: str, repo_dir: str) -> tuple[bool, str, str | None]:
    """Apply a patch as swebench's run_instance does: each command of GIT_APPLY_CMDS in turn from
    a pristine tree, then the already-applied check. Returns (applied, log, command used)."""
    from swebench.harness.constants import CONTAINER_PATCH_FILE
    from swebench.harness.run_evaluation import GIT_APPLY_CMDS

    parent, name = CONTAINER_PATCH_FILE.rsplit("/", 1)
    box.put_archive({name: patch.encode()}, parent or "/")
    log = []
    for i, cmd in enumerate(GIT_APPLY_CMDS):
        if i:
            box.exec("git checkout -- . ; git clean -fd", 120, workdir=repo_dir)
        res = box.exec(f"{cmd} {CONTAINER_PATCH_FILE}", 300, workdir=repo_dir)
        log.append(f"$ {cmd} {CONTAINER_PATCH_FILE}\n{res.output}")
        if res.exit_code == 0:
            return True, "\n".join(log), cmd
    res = box.exec(f"git apply --check --reverse {CONTAINER_PATCH_FILE}", 120, workdir=repo_dir)
    if res.exit_code == 0:
        return True, "\n".join(log) + "\n(already applied)", "already applied"
    return False, "\n".join(log), None


def read_at_base_and_now(box: Environment, repo_dir: str, base_commit: str,
                         paths: list[str]) -> dict[str, tuple[str | None, str | None]]:
    """Each file's text at the base commit and as it is now (None: absent), in one exec."""
    git = f"git -C {shlex.quote(repo_dir)} -c safe.directory='*'"
    lines = [f'if {git} cat-file -e {shlex.quote(f"{base_commit}:{p}")} 2>/dev/null; '
             f'then {git} show {shlex.quote(f"{base_commit}:{p}")} | base64 -w0; else printf -; fi; echo; '
             f'if [ -f {shlex.quote(p)} ]; then base64 -w0 < {shlex.quote(p)}; else printf -; fi; echo'
             for p in paths]
    res = box.exec("; ".join(lines), 120, workdir=repo_dir)
    got = res.output.split("\n")
    if res.exit_code != 0 or len(got) < 2 * len(paths):
        raise SandboxError(f"reading {', '.join(paths)} at the base commit failed (exit {res.exit_code})")

    def text(b64: str) -> str | None:
        return None if b64.strip() == "-" else base64.b64decode(b64.strip()).decode("utf-8", errors="replace")

    return {p: (text(got[2 * i]), text(got[2 * i + 1])) for i, p in enumerate(paths)}


class _AsSdkContainer:
    """The two calls swebench's asset staging makes on a docker SDK container (`exec_run`, and
    `put_archive` of a tar as docker_utils.copy_to_container makes it), made through the
    Environment protocol, so the assets reach any backend's environment."""

    def __init__(self, box: Environment):
        self.box = box

    def exec_run(self, cmd: str, user: str | None = None, **_: Any) -> SimpleNamespace:
        res = self.box.exec(cmd, 120, user=user or "")  # no user: the environment's own, as the SDK does
        return SimpleNamespace(exit_code=res.exit_code, output=res.output.encode())

    def put_archive(self, path: str, data: bytes) -> bool:
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
        self.box.put_archive(files, path)
        return True


def _stage_assets(box: Environment, spec, task_repo: str | None, eval_script: str) -> str:
    """Binary test assets a text patch cannot carry (SWE-bench Multimodal), by swebench's code."""
    if not spec.image_assets:
        return eval_script
    from swebench.harness.run_evaluation import _inject_asset_restore, _stage_image_assets

    logger = logging.getLogger(f"tbscale.swebench.assets.{spec.instance_id}")
    with tempfile.TemporaryDirectory(prefix="tbscale-assets-") as d:
        restore = _stage_image_assets(_AsSdkContainer(box), spec, Path(d), logger, task_repo)
    return _inject_asset_restore(eval_script, restore)


def verify_swebench(ctx: VerifierContext) -> VerifierResult:
    """The swebench verifier. A failure of the grading code itself (not of the attempt) comes back
    as error "reward_missing", status grading_error, so one broken instance cannot end a run."""
    inst, g = ctx.task.extra["instance"], ctx.task.extra["grading"]
    details: dict[str, Any] = {"instance_id": inst["instance_id"], "image": inst["image"],
                               "swebench_version": swebench_version(), "grading_container": g["grading_container"],
                               "timing": {}}
    try:
        return _verify(ctx, details)
    except Exception as e:  # noqa: BLE001 - reported in the result, with the traceback
        import traceback

        details.update(status="grading_error", resolved=False, error=f"{type(e).__name__}: {e}")
        return VerifierResult(None, False, traceback.format_exc()[-5000:], "reward_missing", details)


def _verify(ctx: VerifierContext, details: dict[str, Any]) -> VerifierResult:
    task, box, timeout_sec = ctx.task, ctx.env, ctx.timeout_sec
    inst, g = task.extra["instance"], task.extra["grading"]
    repo_dir = g["repo_dir"]
    timing: dict[str, float] = details["timing"]

    def took(name: str, since: float) -> None:
        timing[name] = round(time.monotonic() - since, 3)

    def done(reward, passed, output, error, status, **more) -> VerifierResult:
        details.update(status=status, resolved=bool(passed), **more)
        return VerifierResult(reward, passed, output, error, details)

    t = time.monotonic()
    try:
        extracted = extract_patch(box, repo_dir, inst["base_commit"], g["patch_exclude"], g["patch_max_bytes"])
    except SandboxError as e:
        return done(None, False, "", "sandbox_error", "infra_failure", infra_failure_reason=str(e), model_patch=None)
    took("extract_patch", t)
    details.update(extracted.as_details())
    patch = extracted.patch
    if not patch.strip() and not g["evaluate_empty_patch"]:
        return done(0.0, False, "", None, "empty_patch")

    grader, fresh = box, g["grading_container"] == "fresh"
    try:
        if fresh:
            t = time.monotonic()
            grader = ctx.start(replace(ctx.spec, image=inst["image"], network="none", workdir=repo_dir,
                                       labels={**ctx.spec.labels, "org.tbscale.role": "swebench-grading"}))
            took("grading_container", t)
            if patch.strip():
                t = time.monotonic()
                applied, apply_log, how = apply_patch(grader, patch, repo_dir)
                took("apply_patch", t)
                details.update(apply_command=how, apply_log=apply_log[-5000:])
                if not applied:
                    return done(0.0, False, apply_log, None, "patch_failed")
        spec = make_spec(inst)
        if patch.strip():
            t = time.monotonic()
            review = review_patch(patch, spec.eval_script, lambda paths: read_at_base_and_now(
                grader, repo_dir, inst["base_commit"], paths))
            details.update(review.as_details())
            took("review_patch", t)
        t = time.monotonic()
        script = _stage_assets(grader, spec, g.get("task_repo"), spec.eval_script)
        grader.put_archive({"eval.sh": script.encode()}, "/")
        res = grader.exec("/bin/bash /eval.sh", timeout_sec)
        took("eval", t)
        details["eval_exit_code"] = res.exit_code
        if res.timed_out:
            return done(None, False, res.output + f"\n\nTimeout error: {timeout_sec:.0f} seconds exceeded.",
                        "verifier_timeout", "eval_timeout")
    except SandboxError as e:
        return done(None, False, "", "sandbox_error", "infra_failure", infra_failure_reason=str(e))
    finally:
        if fresh and grader is not box:
            t = time.monotonic()
            grader.stop()
            took("grading_remove", t)

    t = time.monotonic()
    report = grade_log(inst, patch, res.output)
    took("grade", t)
    more = {"report": {k: v for k, v in report.items() if k != "tests_status"},
            "tests_status": report.get("tests_status"), "tests": _summary(report.get("tests_status"))}
    if report.get("resolved"):
        return done(1.0, True, res.output, None, "resolved", **more)
    if report.get("infra_failure"):
        return done(None, False, res.output, "sandbox_error", "infra_failure",
                    infra_failure_reason=report.get("infra_failure_reason"), **more)
    if not report.get("patch_successfully_applied"):
        return done(0.0, False, res.output, None, "no_test_results",
                    failure_reason=report.get("infra_failure_reason"), **more)
    return done(0.0, False, res.output, None, "unresolved", **more)
