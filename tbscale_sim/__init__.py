"""tbscale's simulated model: a litellm provider named `sim`, loaded as a plugin only when a config
names a `sim/...` model (entry point `tbscale.providers: sim`).

It is not a language model and never claims to be one: it knows the bundled tasks' reference
solutions (read from the run's tasks through `prepare`) and errs at a set rate, so the harness,
the strategies' mechanics and the reports run end to end with no API key. Every run and report
that uses it says so. See docs/simulated-model.md.
"""

from __future__ import annotations

from dataclasses import replace

from tbscale_sim import bsr, cer, judge_rubrics, judges  # noqa: F401  (each registers its roles)
from tbscale_sim.provider import register, register_task

# The simulated provider answers `n` samples in one request, like an OpenAI-compatible server.
accepts_n = True
# It costs nothing: its price is known to be $0 (an unknown price would be shown as unknown).
prices = {"input_per_mtok": 0.0, "output_per_mtok": 0.0}


def prepare(tasks) -> None:
    """Learn the reference solutions of the run's tasks (the answer key the simulation plays from)."""
    for t in tasks:
        register_task(t.instruction, t.solution_steps())
        for step in t.steps:  # a multi-step task: each step's instruction and its own solution
            if step.instruction:
                register_task(step.instruction, replace(t, instruction=step.instruction,
                                                        solution_dir=step.solution_dir or t.solution_dir,
                                                        steps=[]).solution_steps())


__all__ = ["accepts_n", "prepare", "prices", "register", "register_task"]
