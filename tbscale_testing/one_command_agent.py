"""An agent for tests that runs one fixed command in the attempt's environment and submits, with no
model: what a test needs to put a given action through the runner (tests/test_swebench.py,
tests/test_repository_history_docker.py)."""

from __future__ import annotations

from tbscale.agent.agents import register_agent


def register_one_command_agent(name: str, command: str, timeout_sec: float = 60) -> None:
    """Register `name` as an agent that runs `command` as its one turn and submits."""

    class OneCommandAgent:
        uses_model = False

        def __init__(self, **_):
            pass

        async def run(self, run):
            from tbscale.agent.loop import AttemptOutcome, run_command

            run.rec.turn = 1
            run.rec.event("action", command=command, selected_index=0, n_candidates=1)
            await run_command(run.env, command, timeout_sec, run.limits, run.rec)
            return AttemptOutcome("submitted", 1, 0, actions=[command])

    OneCommandAgent.__name__ = OneCommandAgent.__qualname__ = f"OneCommandAgent[{name}]"
    register_agent(name)(OneCommandAgent)
