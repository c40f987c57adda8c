"""What a run checks before its first environment starts, so that bad input costs no work: the run
folder (a name that stays inside the results folder, a place that can be written), every file the
config names (prompt templates rendered once with sample values), every task (an id that is a safe
path, nothing its backend would refuse, such as an image reference), every model string, and the
size of the plan. Every problem is one line naming the file, key or task."""

from __future__ import annotations

from pathlib import Path

from tbscale.config import Experiment
from tbscale.config import bounds
from tbscale.environments import Backend, backend_name
from tbscale.errors import TbscaleError
from tbscale.names import check_name, inside, writable_folder
from tbscale.tasks import Task


def run_folder(output_dir: Path | str, run_name: str, where: str = "--run-name",
               made: list[Path] | None = None) -> Path:
    """output_dir/run_name, made and known to be writable; the name follows the rule of the YAML
    `name:` and the folder is not a link out of output_dir. `made` gets the folders made for it
    (`writable_folder`)."""
    check_name(run_name, where)
    output_dir = Path(output_dir)
    run_dir = output_dir / run_name
    writable_folder(output_dir, "output_dir", made)
    if run_dir.is_symlink() or (run_dir.exists() and not inside(run_dir, output_dir)):
        raise TbscaleError(f"{run_dir}: is a link out of {output_dir}; a run folder must be a folder of its own")
    if run_dir.exists() and not run_dir.is_dir():
        raise TbscaleError(f"{run_dir}: is a file, not a run folder")
    writable_folder(run_dir, "run folder", made)
    return run_dir


def task_problem(task: Task, backend: Backend | None = None) -> str | None:
    """Why `task` cannot run here: an id that is no safe path, or something the backend would
    refuse (an image reference, say)."""
    parts = task.id.split("/")
    if (not task.id or any(p in ("", ".", "..") for p in parts) or "\\" in task.id
            or any(ord(c) < 32 for c in task.id) or any(len(p.encode()) > 200 for p in parts)):
        return f"task id {task.id!r} cannot name a folder (it must not be empty, hold '..', '\\\\' or control characters)"
    return backend.task_problem(task) if backend is not None else None


def check_tasks(tasks: list[Task], backend: Backend | None = None) -> None:
    for task in tasks:
        problem = task_problem(task, backend)
        if problem:
            raise TbscaleError(f"{task.path}: {problem}")


def check_prompts(exp: Experiment, config: Path | str) -> None:
    """Every prompt file the config names: a known template, a readable UTF-8 file, and a Jinja
    template that compiles and renders with the values the agent gives it; and the strategies'
    own prompt files (plain text)."""
    from tbscale.agent.templates import TEMPLATE_NAMES, template_problem
    from tbscale.strategies import entry

    for name, path in exp.prompts.items():
        where = f"{config}: prompts.{name}"
        if name not in TEMPLATE_NAMES:
            raise TbscaleError(f"{where}: unknown template (known: {', '.join(TEMPLATE_NAMES)})")
        problem = template_problem(name, Path(path))
        if problem:
            raise TbscaleError(f"{where}: {path}: {problem}")
    for i, s in enumerate(exp.settings):
        for kind in ("policy", "trajectory"):
            spec = getattr(s, kind)
            params = entry(kind, spec.name).params.model_validate(spec.params())
            for field, path in sorted(params.file_refs().items()):
                problem = text_file_problem(Path(path))
                if problem:
                    raise TbscaleError(f"{config}: settings[{i}].{kind}.{field}: {path}: {problem}")


def text_file_problem(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return "no such file"
    except IsADirectoryError:
        return "is a folder, not a file"
    except UnicodeDecodeError as e:
        return f"not UTF-8 text (byte {e.start})"
    except OSError as e:
        return f"cannot be read ({e.strerror or type(e).__name__})"
    return None if text.strip() else "is empty"


def check_models(exp: Experiment, config: Path | str) -> None:
    """Every model string a setting uses names a provider: `sim/...`, a plugin's, or one litellm
    knows (litellm is imported only when a real model is named)."""
    from tbscale.models import providers
    from tbscale.runner.resolve import referenced_models

    real = {k: m for k, m in referenced_models(exp).items()
            if not m.is_simulated and providers.plugin(providers.provider_of(m.model)) is None}
    if not real:
        return
    from tbscale.models.llm import litellm_module

    litellm = litellm_module()
    for key, m in sorted(real.items()):
        try:
            litellm.get_llm_provider(m.model, api_base=m.api_base)
        except Exception:  # noqa: BLE001 - litellm's BadRequestError: it cannot tell the provider
            raise TbscaleError(f"{config}: models.{key}.model: litellm cannot tell the provider of {m.model!r}; "
                               "write it as <provider>/<model> (e.g. openai/gpt-4.1, hosted_vllm/<name>)") from None


def check_forks(exp: Experiment, config: Path | str, backend: Backend | None) -> None:
    """A setting whose policy runs candidates in forks of the environment (`lookahead`) needs a
    backend that can take snapshots, and a `fork_concurrency` that lets one turn's forks start
    together (a turn never runs with fewer than its policy asks for)."""
    from tbscale.runner.enforcement import capabilities
    from tbscale.strategies import entry

    caps = None
    for i, s in enumerate(exp.settings):
        pentry = entry("policy", s.policy.name)
        if not pentry.forks:
            continue
        need = pentry.params.model_validate(s.policy.params()).forks_a_turn()
        if exp.fork_concurrency is not None and need > exp.fork_concurrency:
            raise TbscaleError(f"{config}: fork_concurrency: {exp.fork_concurrency} is less than the {need} forks a turn "
                               f"of settings[{i}] ({s.name}, {s.policy.name}) starts at once; raise it, or lower the "
                               f"policy's forks_per_turn or top_k")
        if backend is None:
            continue
        caps = caps or capabilities(backend)
        if not caps.snapshots:
            name = getattr(backend, "name", None) or backend_name(exp.environment)
            why = caps.reason("snapshots", f"the {name} backend cannot take snapshots of an environment")
            raise TbscaleError(f"{config}: settings[{i}].policy: {s.policy.name} runs every candidate in a fork of the "
                               f"environment, and {why}")


def check_file_checks(exp: Experiment, config: Path | str, backend: Backend | None) -> None:
    """`environment.file_checks: outside` needs a backend that lists an environment's changes."""
    from tbscale.runner.enforcement import capabilities

    if exp.environment.file_checks != "outside" or backend is None:
        return
    caps = capabilities(backend)
    if not caps.changes:
        name = getattr(backend, "name", None) or backend_name(exp.environment)
        why = caps.reason("changes", f"the {name} backend cannot list an environment's changes from outside it")
        raise TbscaleError(f"{config}: environment.file_checks: outside takes the changed files from the backend, "
                           f"and {why}; use inside")


def check_plan_size(exp: Experiment, tasks: list[Task], config: Path | str) -> None:
    bounds.check("planned_trials", len(exp.settings) * len(tasks) * exp.trials,
                 f"{config}: {len(exp.settings)} settings x {len(tasks)} tasks x {exp.trials} trials")


def before_first_container(exp: Experiment, tasks: list[Task], config: Path | str,
                           backend: Backend | None = None) -> None:
    """Everything above, in order of cost (litellm's import last)."""
    check_plan_size(exp, tasks, config)
    check_prompts(exp, config)
    check_tasks(tasks, backend)
    check_forks(exp, config, backend)
    check_file_checks(exp, config, backend)
    check_models(exp, config)
