"""Recursive Tournament Voting (pdr-rtv.txt Section 2.3).

Candidates (finished attempts, seen only through their summaries) are split into groups of size
G; a judge votes V times for the best member of each group; the member with most votes advances
(ties broken by a seeded coin); rounds repeat until `target` candidates remain (1 for the final
pick, K for Select-K). The round that would overshoot `target` only runs as many groups as it
needs and gives the rest a bye, so exactly `target` survive.

The bracket (`plan_groups`) and the vote count (`majority`) are pure functions; `run_rtv` runs a
tournament with any vote function (an LLM judge over summaries, or a scripted one in tests) and
records every round, group and vote. Selection never reads a verifier result.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Literal

from pydantic import Field

from tbscale.models.replies import ask_json, parse_json_reply
from tbscale.seeds import derive_rng, derive_seed
from tbscale.strategies.base import Params
from tbscale.strategies.calls import log_call, read_prompt
from tbscale.strategies.stage_records import GroupRecord, RoundRecord, TournamentRecord, VoteRecord
from tbscale.types.messages import ChatMessage


class RTVParams(Params):
    """Tournament parameters (shared by best_of_n and pdr). Paper defaults: G=2, V=8."""

    group_size: int = Field(2, ge=2, le=64, description="G: candidates compared at once")
    votes: int = Field(8, ge=1, le=256, description="V: judge votes per group")
    judge: str | None = Field(None, description="key of `models`; default: the generator")
    judge_tries: int = Field(2, ge=1, le=20, description="calls per vote until a usable reply")
    vote_mode: Literal["permute", "sample"] = Field(
        "permute", description="permute: each vote a separate call with the group in a seeded random order; "
                               "sample: one call with n=V samples, group in a fixed order")
    shuffle_groups: bool = Field(True, description="seeded shuffle of the bracket before each round")
    judge_system_prompt: str | None = Field(None, description="path to a file replacing ours")

    def model_refs(self):
        return {"judge": self.judge}


# ---- pure parts ------------------------------------------------------------------------------------
def plan_groups(entrants: list[int], group_size: int, target: int, rng: random.Random | None = None) -> list[list[int]]:
    """One round's groups. Each group of g members eliminates g-1, so groups are formed until the
    round has eliminated `len(entrants) - target` (never more); whoever is left gets a bye (a group
    of one). With `rng`, the entrants are shuffled first."""
    order = list(entrants)
    if rng is not None:
        rng.shuffle(order)
    need = len(order) - max(1, target)
    groups, i = [], 0
    while need > 0 and len(order) - i >= 2:
        g = min(group_size, need + 1, len(order) - i)
        groups.append(order[i:i + g])
        i += g
        need -= g - 1
    return groups + [[x] for x in order[i:]]


def majority(votes: list[int | None], members: list[int], rng: random.Random) -> tuple[int, dict[int, int], bool]:
    """(winner, vote counts, whether a tie was broken). Votes for non-members or None (a reply
    that could not be used) count for nobody; ties, including no valid vote at all, are broken by
    `rng` among the tied (in a fixed order, so a seed gives one answer)."""
    counts = {m: 0 for m in members}
    for v in votes:
        if v in counts:
            counts[v] += 1
    top = max(counts.values())
    tied = sorted(m for m in members if counts[m] == top)
    if len(tied) == 1:
        return tied[0], counts, False
    return rng.choice(tied), counts, True


@dataclass
class Vote:
    choice: int | None  # the member voted for, or None
    order: list[int] = field(default_factory=list)  # the order the members were shown in
    error: str | None = None

    def record(self) -> VoteRecord:
        return {"choice": self.choice, "order": self.order, **({"error": self.error} if self.error else {})}


VoteFn = Callable[[list[int], int, int], Awaitable[list[Vote]]]


@dataclass
class RTVResult:
    survivors: list[int]
    record: TournamentRecord


async def run_rtv(candidates: list[int], *, target: int, group_size: int, vote: VoteFn, seed: Any, tag: str,
                  shuffle: bool = True, method: str = "rtv") -> RTVResult:
    """Run a tournament down to `target` survivors; `vote(members, round, group)` returns the
    votes of one group. Groups of a round are judged concurrently."""
    target = max(1, target)
    survivors = list(candidates)
    rounds: list[RoundRecord] = []
    r = 0
    while len(survivors) > target:
        r += 1
        groups = plan_groups(survivors, group_size, target, derive_rng(seed, tag, "bracket", r) if shuffle else None)

        async def judge(g: int, members: list[int]) -> GroupRecord:
            if len(members) == 1:
                return {"members": members, "bye": True, "winner": members[0]}
            votes = await vote(members, r, g)
            winner, counts, tie = majority([v.choice for v in votes], members, derive_rng(seed, tag, "tie", r, g))
            return {"members": members, "bye": False, "votes": [v.record() for v in votes],
                    "counts": {str(k): c for k, c in counts.items()}, "winner": winner, "tie_broken": tie,
                    "invalid_votes": sum(v.choice not in members for v in votes)}

        results = await asyncio.gather(*(judge(g, m) for g, m in enumerate(groups)))
        entrants, survivors = survivors, [res["winner"] for res in results]
        rounds.append({"round": r, "entrants": entrants, "groups": list(results), "survivors": survivors})
    return RTVResult(survivors, {"method": method, "target": target, "group_size": group_size,
                                 "entrants": list(candidates), "rounds": rounds, "survivors": survivors})


# ---- the LLM judge over summaries ---------------------------------------------------------------------
def judge_messages(instruction: str, shown: list[str], system_prompt: str) -> list[ChatMessage]:
    blocks = "\n\n".join(f'<summary id="{k + 1}">\n{text}\n</summary>' for k, text in enumerate(shown))
    user = (f"<judge_attempts>\n<task>\n{instruction}\n</task>\n\n"
            f"{len(shown)} independent attempts at this task, each as a structured summary:\n\n{blocks}\n\n"
            f'Respond with JSON: {{"rationale": string, "best": integer id in [1, {len(shown)}]}}\n</judge_attempts>')
    return [{"role": "system", "content": system_prompt}, {"role": "user", "content": user}]


def parse_vote(text: str, n: int) -> int | None:
    """The 1-based id a judge reply names, as a 0-based position (None if unusable)."""
    obj = parse_json_reply(text)
    if not obj:
        return None
    best = obj.get("best", obj.get("selected", obj.get("id")))
    if isinstance(best, str) and best.strip().isdigit():
        best = int(best.strip())
    if isinstance(best, bool) or not isinstance(best, int) or not 1 <= best <= n:
        return None
    return best - 1


class SummaryJudge:
    """Votes over summaries with an LLM (or, with no model, abstains: every group is then decided
    by the seeded tie-break, i.e. at random)."""

    def __init__(self, params: RTVParams, models, *, instruction: str, seed: int, log_calls: str = "full"):
        self.p, self.instruction, self.seed, self.log_calls = params, instruction, seed, log_calls
        self.llm = models(params.judge, "judge") if models is not None else None
        self.system_prompt = read_prompt(params.judge_system_prompt, "judge_system.txt")

    def vote_fn(self, summaries: dict[int, str], *, sink, tag: str, votes: int | None = None) -> VoteFn:
        n_votes = votes or self.p.votes

        async def vote(members: list[int], r: int, g: int) -> list[Vote]:
            if self.llm is None:
                return [Vote(None, list(members), "no judge model") for _ in range(n_votes)]
            if self.p.vote_mode == "sample":
                return await self._sampled(members, summaries, sink, tag, r, g, n_votes)

            async def one(v: int) -> Vote:
                order = list(members)
                derive_rng(self.seed, tag, "order", r, g, v).shuffle(order)
                prompt = judge_messages(self.instruction, [summaries[m] for m in order], self.system_prompt)
                pos, reply, problem, calls = await ask_json(
                    self.llm, prompt, lambda t: parse_vote(t, len(order)),
                    seed=derive_seed(self.seed, tag, "vote", r, g, v), sink=sink, tries=self.p.judge_tries)
                choice = order[pos] if pos is not None else None
                log_call(sink, role="judge", method=tag, model=self.llm.name, messages=prompt, response=reply,
                         parsed={"best": choice, "order": order}, mode=self.log_calls, round=r, group=g, vote=v,
                         error=problem, calls=calls)
                return Vote(choice, order, problem)

            return list(await asyncio.gather(*(one(v) for v in range(n_votes))))

        return vote

    async def _sampled(self, members, summaries, sink, tag, r, g, n_votes) -> list[Vote]:
        from tbscale.errors import ContextWindowExceeded, ModelCallError

        order = list(members)
        prompt = judge_messages(self.instruction, [summaries[m] for m in order], self.system_prompt)
        try:
            res = await self.llm.complete(prompt, n=n_votes, seed=derive_seed(self.seed, tag, "vote", r, g), sink=sink)
        except (ModelCallError, ContextWindowExceeded) as e:
            return [Vote(None, order, f"{type(e).__name__}: {e}") for _ in range(n_votes)]
        out = []
        for v, c in enumerate(res.completions[:n_votes]):
            pos = parse_vote(c.text, len(order))
            choice = order[pos] if pos is not None else None
            log_call(sink, role="judge", method=tag, model=self.llm.name, messages=prompt, response=c.text,
                     parsed={"best": choice, "order": order}, mode=self.log_calls, round=r, group=g, vote=v)
            out.append(Vote(choice, order, None if pos is not None else "unusable reply"))
        return out + [Vote(None, order, "missing sample")] * (n_votes - len(out))


async def select(method: str, candidates: list[int], *, target: int, judge: SummaryJudge | None,
                 summaries: dict[int, str], params: RTVParams, seed: Any, tag: str, sink,
                 passed: Callable[[int], bool] | None = None) -> RTVResult:
    """Pick `target` of `candidates` by `method`:
    - `rtv`: the tournament (groups of G, V votes each);
    - `judge`: one flat LLM judgement over all candidates at once (V votes, majority);
    - `random`: a seeded sample;
    - `oracle`: for analysis only, passing attempts first (by the verifier; never a real strategy)."""
    target = max(1, min(target, len(candidates)))
    if method in ("rtv", "judge"):
        assert judge is not None
        size = params.group_size if method == "rtv" else max(2, len(candidates))
        if method == "judge" and target > 1:
            # A flat judge keeps the candidates its votes favour most; ties by the seeded coin.
            vote = judge.vote_fn(summaries, sink=sink, tag=tag)
            votes = await vote(list(candidates), 1, 0) if len(candidates) > target else []
            counts = {c: sum(v.choice == c for v in votes) for c in candidates}
            rng = derive_rng(seed, tag, "flat")
            ranked = sorted(candidates, key=lambda c: (-counts[c], rng.random()))
            kept = ranked[:target]
            return RTVResult(kept, {"method": "judge", "target": target, "entrants": list(candidates),
                                    "rounds": [{"round": 1, "entrants": list(candidates),
                                                "groups": [{"members": list(candidates), "bye": False,
                                                            "votes": [v.record() for v in votes],
                                                            "counts": {str(k): c for k, c in counts.items()},
                                                            "winners": kept}],
                                                "survivors": kept}] if votes else [],
                                    "survivors": kept})
        return await run_rtv(candidates, target=target, group_size=size, vote=judge.vote_fn(summaries, sink=sink, tag=tag),
                             seed=seed, tag=tag, shuffle=params.shuffle_groups, method=method)
    rng = derive_rng(seed, tag, method)
    if method == "random":
        kept = sorted(rng.sample(list(candidates), target), key=list(candidates).index)
    elif method == "oracle":
        if passed is None:
            raise ValueError("the oracle selector needs verifier results")
        ranked = sorted(candidates, key=lambda c: (not passed(c), rng.random()))
        kept = ranked[:target]
    else:
        raise ValueError(f"unknown selection method {method!r}")
    return RTVResult(kept, {"method": method, "target": target, "entrants": list(candidates), "rounds": [],
                            "survivors": kept})
