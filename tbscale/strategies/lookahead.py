"""One-step lookahead (docs/forks-and-lookahead.md, "Lookahead"): Turn-BoN whose selector sees
what each candidate did.

turn-bon.txt (section 2.1) frames Turn-BoN as a sampled policy-improvement step, and notes that
one-step lookahead was studied where restoring earlier states is costly; so its selector judges
commands without seeing their outcome. With forks of the environment that restriction goes:

1. the generator samples N candidates on the same history, as in Turn-BoN (one request with n=N
   where the provider takes it); meanwhile the environment is snapshotted and the turn's forks
   start (`prefork`), so fork latency hides behind the generator's;
2. candidates with the same command (insignificant whitespace and comments aside,
   strategies/agreement.py) share one fork; a response that cannot run gets none;
3. each distinct command runs in its own fork, all at once, under the timeout and output cap the
   loop would give it; at most `forks_per_turn` of them (`top_k` narrows it further), ranked by
   how many candidates proposed the command, then by sampling order; the rest are not run and not
   offered;
4. the selector sees the transcript (as Turn-BoN's does, without reasoning) and, for each
   distinct command run, the command and its outcome: exit code, whether it timed out, its run
   time, its output's size and the head and tail of the output (`observation_chars` each, less
   when the selector's context window needs it). A candidate that submits is shown like the
   others: its output starts with the finish marker. It answers `selected_index`;
5. the pick's fork becomes the attempt's environment and its observation is the turn's (the loop
   does not run it again); the former environment and the other forks are released.
With a single distinct runnable command there is nothing to choose: it runs in a fork as ever
(its observation is still a fork's) and no selector is called. When no candidate can run, the
turn is Turn-BoN's (the format error goes back to the agent) and every fork is released.

The selector's failures fall back as Turn-BoN's do (a seeded random runnable candidate, or the
first), marked `selector_failed`. `adaptive:` (docs/adaptive-turn-bon.md) applies: when the first
candidates (or all N) agree, that command runs in the environment itself, with no fork and no
selector call (and no preforking, so an agreed turn costs no fork).
"""

from __future__ import annotations

import asyncio
import time

from pydantic import Field

from tbscale.errors import SandboxError
from tbscale.models.replies import SEED_STRIDE, ask_json
from tbscale.seeds import derive_rng
from tbscale.strategies.agreement import all_agree, command_key
from tbscale.strategies.base import Decision, TurnContext
from tbscale.strategies.baseline import candidate_record, sample_candidates
from tbscale.strategies.calls import read_prompt
from tbscale.strategies.registry import register_policy
from tbscale.strategies.render import fit_transcript, transcript_budget
from tbscale.strategies.turn_bon import AGREED_ALL, AGREED_FIRST, SELECTED, TurnBoNParams, parse_selection
from tbscale.types.actions import parse_action
from tbscale.types.events import LookaheadRun

SINGLE, NONE_RUNNABLE = "single", "none_runnable"  # further paths of a lookahead turn
MIN_OBSERVATION_CHARS = 200


class LookaheadParams(TurnBoNParams):
    """Turn-BoN's parameters, and what running the candidates may cost."""

    top_k: int | None = Field(None, ge=1, description="run (and offer the selector) only the k distinct commands "
                                                      "most candidates proposed")
    forks_per_turn: int | None = Field(None, ge=1, description="at most this many forks a turn (default: n)")
    observation_chars: int = Field(2000, ge=MIN_OBSERVATION_CHARS,
                                   description="characters of each candidate's output the selector sees (head and "
                                               "tail halves)")
    prefork: bool = Field(True, description="start the forks while the generator samples (not with adaptive:)")

    def forks_at_most(self, n: int) -> int:
        return min(n, self.forks_per_turn or n, self.top_k or n)

    def forks_a_turn(self) -> int:
        return self.forks_at_most(self.n)


def distinct_commands(actions) -> list[list[int]]:
    """Groups of candidate indices sharing one command, most proposed first (ties: sampling order);
    responses that cannot run are in none."""
    groups: dict[str, list[int]] = {}
    for i, a in enumerate(actions):
        key = command_key(a, "normalized")
        if key is not None:
            groups.setdefault(key, []).append(i)
    return sorted(groups.values(), key=lambda g: (-len(g), g[0]))


def render_outcome(result, chars: int) -> str:
    """What the selector is told of one candidate's run."""
    out = result.output or ""
    attrs = (f'exit_code="{result.exit_code}" timed_out="{str(bool(result.timed_out)).lower()}" '
             f'duration_sec="{result.duration_sec:.2f}" output_bytes="{result.output_bytes or len(out.encode())}"')
    if len(out) <= chars:
        body = f"<output>\n{out.removesuffix(chr(10))}\n</output>"
    else:
        half = chars // 2
        body = (f"<output_head>\n{out[:half]}\n</output_head>\n<elided_chars>{len(out) - 2 * half}</elided_chars>\n"
                f"<output_tail>\n{out[-half:]}\n</output_tail>")
    return f"<outcome {attrs}>\n{body}\n</outcome>"


def render_ran(commands: list[str], results: list, chars: int) -> str:
    return "\n\n".join(f'<candidate index="{i}">\n```bash\n{c}\n```\n{render_outcome(r, chars)}\n</candidate>'
                       for i, (c, r) in enumerate(zip(commands, results)))


def lookahead_messages(messages, shown: str, m: int, system_prompt: str, budget: int | None) -> list[dict]:
    user = (f"{fit_transcript(messages, budget)[0]}\n\n"
            f"There are {m} candidate next actions, numbered 0 to {m - 1}. Each was run in its own copy of the "
            "environment, and you see what it did. Only the one you choose is kept: the agent goes on from its "
            f"copy, and the others are dropped.\n\n{shown}\n\n"
            'Respond with JSON: {"rationale": string, "selected_index": integer in [0, ' f"{m - 1}" "]}")
    return [{"role": "system", "content": system_prompt}, {"role": "user", "content": user}]


@register_policy("lookahead", LookaheadParams, adaptive=True, forks=True)
class Lookahead:
    def __init__(self, params: LookaheadParams, *, generator, models, tools=None, **_):
        self.p, self.generator, self.tools = params, generator, tools
        self.selector = models(params.selector, "selector")
        self.system_prompt = read_prompt(params.selector_system_prompt, "selector_lookahead_system.txt")

    async def decide(self, messages, ctx: TurnContext) -> Decision:
        n = self.p.n_at(ctx.turn, self.p.n)
        if n == 1:  # outside the window: the baseline's turn
            comps, actions = await sample_candidates(self.generator, messages, 1, ctx, self.tools)
            return Decision(comps[0], actions[0])
        if ctx.branches is None:
            raise SandboxError("the lookahead policy needs forks of the environment, and this attempt's backend "
                               "cannot take snapshots")
        started = time.monotonic()
        forks_task = None
        if self.p.prefork and self.p.adaptive is None:
            forks_task = asyncio.create_task(ctx.branches.open(self.p.forks_at_most(n)))
        try:
            comps, actions, path = await self._candidates(messages, n, ctx)
        except BaseException:
            await self._drop(forks_task, ctx)
            raise
        sampled = time.monotonic()
        if path in (AGREED_FIRST, AGREED_ALL):
            await self._drop(forks_task, ctx)
            return Decision(comps[0], actions[0], len(comps), 0)
        groups = distinct_commands(actions)[:self.p.forks_at_most(n)]
        if not groups:
            await self._drop(forks_task, ctx)
            ctx.rec.event("lookahead", path=NONE_RUNNABLE, ran=[], turn_sec=round(time.monotonic() - started, 4))
            return Decision(comps[0], actions[0], len(comps), 0)
        try:
            forks = await forks_task if forks_task is not None else await ctx.branches.open(len(groups))
        except BaseException:
            await ctx.branches.discard()
            raise
        forked = time.monotonic()
        try:
            commands = [actions[g[0]].command for g in groups]
            timeout = ctx.command_timeout_sec or 180.0
            results = await asyncio.gather(*(asyncio.to_thread(f.exec, c, timeout, output_limit=ctx.output_limit)
                                             for f, c in zip(forks, commands)))
            ran = time.monotonic()
            pick, failed, rationale, tries = 0, False, "the only distinct runnable command", 0
            if len(groups) > 1:
                pick, failed, rationale, tries = await self._select(messages, commands, results, ctx)
            chosen = groups[pick][0]
            env = await ctx.branches.adopt(forks[pick])
        except BaseException:
            await ctx.branches.discard()
            raise
        done = time.monotonic()
        self._record(ctx, groups, commands, results, pick, timing={
            "sample_sec": sampled - started, "fork_wait_sec": forked - sampled, "exec_sec": ran - forked,
            "select_sec": done - ran, "turn_sec": done - started})
        if len(groups) > 1:
            ctx.rec.event("selection", index=chosen, rationale=rationale, selector_failed=failed, tries=tries,
                          method="lookahead", model=self.selector.name, path=SELECTED)
        return Decision(comps[chosen], actions[chosen], len(comps), chosen, failed, result=results[pick], env=env)

    # ---- sampling (Turn-BoN's, with adaptive agreement) ------------------------------------------
    async def _candidates(self, messages, n: int, ctx: TurnContext):
        a = self.p.adaptive
        if a is None:
            comps, actions = await sample_candidates(self.generator, messages, n, ctx, self.tools)
            return comps, actions, SELECTED
        first = a.first if a.mode == "first" else n
        comps, actions = await self._sample(messages, first, ctx.seed, ctx)
        if all_agree(actions, a.match):
            path = AGREED_FIRST if a.mode == "first" else AGREED_ALL
            self._log_candidates(comps, actions, path, ctx)
            return comps, actions, path
        if first < n:
            more, more_actions = await self._sample(messages, n - first, ctx.seed + first, ctx)
            comps, actions = comps + more, actions + more_actions
        self._log_candidates(comps, actions, SELECTED, ctx)
        return comps, actions, SELECTED

    async def _sample(self, messages, n: int, seed: int, ctx: TurnContext):
        result = await self.generator.complete(messages, n=n, seed=seed, tools=self.tools, sink=ctx.rec)
        comps = result.completions[:n]
        return comps, [parse_action(c) for c in comps]

    @staticmethod
    def _log_candidates(comps, actions, path: str, ctx: TurnContext) -> None:
        ctx.rec.event("candidates", candidates=[candidate_record(c, a) for c, a in zip(comps, actions)], path=path)

    @staticmethod
    async def _drop(forks_task, ctx: TurnContext) -> None:
        """Forks started for a turn that needs none: wait for them to start, then release them."""
        if forks_task is None:
            return
        try:
            await forks_task
        except Exception:  # noqa: BLE001 - their failure does not matter to a turn that needs none
            pass
        await ctx.branches.discard()

    # ---- choosing ------------------------------------------------------------------------------
    def observation_chars(self, m: int) -> int:
        """Each candidate's share of the selector's prompt: `observation_chars`, or less, so that
        the candidates' outputs take at most half of what the selector's context window holds."""
        window = transcript_budget(self.selector, len(self.system_prompt) + 1000)
        chars = self.p.observation_chars
        if window is not None:
            chars = min(chars, max(MIN_OBSERVATION_CHARS, window // 2 // m))
        return chars

    async def _select(self, messages, commands: list[str], results: list, ctx: TurnContext):
        m = len(commands)
        shown = render_ran(commands, results, self.observation_chars(m))
        budget = transcript_budget(self.selector, len(self.system_prompt) + len(shown) + 500)
        prompt = lookahead_messages(messages, shown, m, self.system_prompt, budget)
        parsed, reply, problem, tries = await ask_json(self.selector, prompt, lambda t: parse_selection(t, m),
                                                       seed=ctx.seed + SEED_STRIDE, sink=ctx.rec,
                                                       tries=self.p.selector_tries)
        if parsed is not None:
            return parsed[0], False, parsed[1], tries
        pick = 0 if self.p.fallback == "first" else derive_rng(ctx.seed, "fallback").randrange(m)
        return pick, True, f"fallback ({self.p.fallback}) after selector failures: {problem}", tries

    def _record(self, ctx: TurnContext, groups, commands, results, pick: int, timing: dict[str, float]) -> None:
        """The turn's `lookahead` event: every command run, which candidates proposed it, what it
        did (what the selector was shown of it), and where the turn's time went."""
        chars = self.observation_chars(len(commands))
        ran: list[LookaheadRun] = []
        for i, (g, c, r) in enumerate(zip(groups, commands, results)):
            out = r.output or ""
            shown = out if len(out) <= chars else out[:chars // 2] + "\n[...]\n" + out[-(chars // 2):]
            ran.append(LookaheadRun(candidates=g, command=c, exit_code=r.exit_code, timed_out=r.timed_out,
                                    duration_sec=round(r.duration_sec, 4),
                                    output_bytes=r.output_bytes or len(out.encode()), output=shown, picked=i == pick))
        added = sum(r.duration_sec for i, r in enumerate(results) if i != pick)
        for i, r in enumerate(results):  # the trial line's candidate_execs and the exec time they added
            ctx.rec.note_candidate_exec(0.0 if i == pick else r.duration_sec)
        ctx.rec.event("lookahead", path=SELECTED if len(groups) > 1 else SINGLE, ran=ran, picked=pick,
                      exec_added_sec=round(added, 4), **{k: round(v, 4) for k, v in timing.items()})

