"""The agent loop's own overhead per step, outside exec and model calls.

Runs the real loop (templates, parsing, event appends to a real JSONL file, observation
formatting) with a policy and a sandbox that answer instantly, and reports milliseconds per step.
Also times one call of the simulated model through litellm, the path the demo takes, so its share
of a demo turn is visible. Writes benchmarks/out/loop_overhead.json.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from tbscale.types.actions import parse_action
from tbscale.agent.loop import run_agent
from tbscale.config import Limits, ModelConfig
from tbscale.environments import ExecResult
from tbscale.logs import AttemptRecorder, EventLog
from tbscale.models.llm import LLM
from tbscale.types import Completion
from tbscale.strategies.base import Decision
from tbscale.tasks.model import Task

OUT = Path(__file__).parent / "out"
STEPS = 300


class InstantBox:
    workdir = "/app"

    def exec(self, command, timeout_sec, **_):
        return ExecResult(0, "line of output\n" * 40, False, 0.0)


class InstantPolicy:
    def __init__(self, steps: int):
        self.left = steps

    async def decide(self, messages, ctx):
        self.left -= 1
        cmd = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" if self.left == 0 else "ls -la /app"
        ctx.rec.event("candidates", candidates=[{"command": cmd}])
        c = Completion(text=f"THOUGHT: look\n\n```bash\n{cmd}\n```", finish_reason="stop")
        return Decision(c, parse_action(c))


class SubmittingBox(InstantBox):
    def exec(self, command, timeout_sec, **_):
        if "COMPLETE_TASK" in command:
            return ExecResult(0, "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n", False, 0.0)
        return super().exec(command, timeout_sec)


async def loop_overhead(tmp: Path) -> float:
    task = Task(id="bench", format="harbor", instruction="Benchmark task.")
    log = EventLog(tmp / "traj.jsonl", trial_key="bench")
    rec = AttemptRecorder(log, 0)
    t = time.perf_counter()
    out = await run_agent(task, SubmittingBox(), InstantPolicy(STEPS), Limits(max_turns=STEPS + 1), rec, seed=0)
    elapsed = time.perf_counter() - t
    log.close()
    assert out.stop_reason == "submitted" and out.turns == STEPS
    return elapsed / STEPS * 1000


async def sim_call_ms(n: int = 40) -> float:
    llm = LLM(ModelConfig(model="sim/policy"), "generator")
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    await llm.complete(msgs, n=4, seed=0)  # import and register litellm first
    times = []
    for i in range(n):
        t = time.perf_counter()
        await llm.complete(msgs, n=4, seed=i)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def main() -> None:
    OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        per_step = [asyncio.run(loop_overhead(Path(tmp))) for _ in range(3)]
    sim_ms = asyncio.run(sim_call_ms())
    result = {"loop_overhead_ms_per_step_median": statistics.median(per_step), "runs": per_step,
              "sim_call_via_litellm_ms_median": sim_ms}
    (OUT / "loop_overhead.json").write_text(json.dumps(result, indent=2))
    print(f"agent loop overhead: {statistics.median(per_step):.2f} ms per step (runs: "
          + ", ".join(f"{x:.2f}" for x in per_step) + ")")
    print(f"simulated model call (n=4) through litellm: {sim_ms:.1f} ms median")


if __name__ == "__main__":
    main()
