"""Contextual Early Reward (CER, cer-early-reward.txt): score UNFINISHED prefixes, and search with it.

Scoring (`CERScorer`). For a group of sibling continuations of the same parent prefix, one judge
call builds a shared weighted rubric set from the whole group (criteria with weights, and a
polarity: a negative criterion penalizes what it describes); a second call scores every member
under that set, criterion by criterion, each score with the evidence it rests on. A prefix's CER
score is the weighted mean of its normalized criterion scores (Eq. 1; a negative criterion
contributes 1 - q). The parent itself is scored in the same call under the same set ("id 0"), so
the regression check compares child and parent under one rubric set (the paper's Appendix E.3
asks the judge to compare each continuation with its parent; this is our version of it).

Search (`CER`, registered as trajectory strategy "cer"; Algorithm 1 / Appendix D):
- round 1 samples `m` continuations of the empty prefix; round r > 1 samples `m` continuations
  split evenly over the beam parents that can still grow (remainder to the better-ranked), each
  extended by `segment_turns` agent steps (`max_new_turns`, unverified);
- each parent's children are scored as one group (above); a child scoring below its parent is a
  regression: never expanded and never selected (`regression_stop`);
- the round's eligible candidates are ranked by score; when several share the top score and
  `tie_break_rubrics` is set, extra rubrics are built from the tied candidates only and they are
  re-ranked under them (any tie left is broken by a seeded coin);
- the best `beam` become next round's parents; a candidate that submitted cannot grow and keeps
  its place (and score) in the beam; a round where every child regressed keeps the previous beam
  and selection;
- after the last round (`rounds`, or `budget_steps` k: CER@k = ceil(k / segment_turns) rounds)
  the top candidate is completed by the policy with no turn cap and verified (`complete`).

`analysis_complete_all` also completes and verifies every scored unfinished candidate, so that
RM@k, Random, Best-of-N and pairwise accuracy can be measured (tbscale/analysis/cer_report.py).
It is expensive (one full completion per candidate) and is not part of what CER costs.

Selection never reads a verifier result: candidates that submitted during search were verified by
the runner (every submission is), but only the analysis report looks at those rewards.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field

from tbscale.models.replies import ask_json, parse_json_reply
from tbscale.seeds import derive_rng, derive_seed
from tbscale.strategies.registry import RECORD_CER, register_trajectory
from tbscale.strategies.base import (
    AttemptResult,
    Params,
    Prefix,
    StartAttempt,
    TrajectoryOutcome,
)
from tbscale.strategies.calls import log_call
from tbscale.strategies.cer_records import (CerCandidate, CerGroup, CerRecord, CerRound, CerTieBreak, CriterionRecord,
                                             CriterionScores)
from tbscale.strategies.render import command_of_message
from tbscale.strategies.summaries import StageMeter, stage_usage_json
from tbscale.types.completion import Usage, sum_usage
from tbscale.types.messages import ChatMessage

SCALE = 4  # criterion scores are integers 0..SCALE (anchored in the prompt)
EPS = 1e-9


class CERParams(Params):
    """Paper defaults (cer-early-reward.txt Appendix D): m=8, segment_turns=20, CER@20/40/60 (1-3
    rounds); beam parents, regression stopping and tie-breaking on."""

    m: int = Field(8, ge=1, le=64, description="continuations per round, split across the beam parents")
    beam: int = Field(2, ge=1, le=64, description="parents kept for the next round")
    segment_turns: int = Field(20, ge=1, le=10_000, description="agent steps per extension")
    rounds: int = Field(3, ge=1, le=1_000, description="search rounds (ignored when budget_steps is set)")
    budget_steps: int | None = Field(None, ge=1, le=1_000_000, description="CER@k: k agent steps, i.e. ceil(k / segment_turns) rounds")
    regression_stop: bool = Field(True, description="stop expanding (and never select) a child scoring below its parent")
    tie_break_rubrics: bool = Field(True, description="extra rubrics built only from the tied top candidates")
    judge: str | None = Field(None, description="key of `models`; default: the generator")
    judge_tries: int = Field(2, ge=1, le=20, description="calls per judgement until a usable reply")
    max_criteria: int = Field(6, ge=1, le=20, description="criteria a rubric set may hold (more are dropped)")
    max_candidate_chars: int = Field(12_000, ge=1_000, description="per prefix shown to the judge (head and tail)")
    max_observation_chars: int = Field(1_500, ge=100, description="per command output shown to the judge")
    complete: bool = Field(True, description="complete the selected prefix with no turn cap and verify it")
    analysis_complete_all: bool = Field(
        False, description="EXPENSIVE, analysis only: complete and verify every scored candidate (RM@k, Acc_pair)")
    log_calls: Literal["full", "parsed", "off"] = "full"
    prefix_restore: Literal["auto", "fork", "replay"] = Field(
        "auto", description="how a continuation gets its prefix's environment: fork a snapshot taken at the prefix's "
                            "last turn, or replay its commands in a fresh one; auto: fork when the backend can")

    def model_refs(self):
        return {"judge": self.judge}

    def keep_snapshot(self) -> str:
        """What start_attempt is asked to keep of a paused segment."""
        return {"auto": "if_able", "fork": "required", "replay": "no"}[self.prefix_restore]

    def n_rounds(self) -> int:
        return math.ceil(self.budget_steps / self.segment_turns) if self.budget_steps else self.rounds


# ---- pure parts --------------------------------------------------------------------------------------
@dataclass
class Criterion:
    id: str
    text: str
    weight: float
    polarity: str = "positive"  # or "negative"

    def record(self) -> CriterionRecord:
        return {"id": self.id, "text": self.text, "weight": self.weight, "polarity": self.polarity}


def parse_rubrics(obj: dict[str, Any] | None, max_criteria: int = 20) -> list[Criterion] | None:
    """A rubric set from the judge's JSON ({"criteria": [{id, criterion, weight, polarity}]});
    None when no usable criterion. Weights must be positive numbers; ids are made unique."""
    if not isinstance(obj, dict) or not isinstance(obj.get("criteria"), list):
        return None
    out, seen = [], set()
    for k, c in enumerate(obj["criteria"]):
        if not isinstance(c, dict):
            continue
        w = c.get("weight", 1)
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w <= 0:
            continue
        cid = str(c.get("id") or f"c{k + 1}")
        while cid in seen:
            cid += "_"
        seen.add(cid)
        pol = "negative" if str(c.get("polarity", "positive")).lower().startswith("neg") else "positive"
        out.append(Criterion(cid, str(c.get("criterion") or c.get("text") or c.get("name") or cid), float(w), pol))
        if len(out) >= max_criteria:
            break
    return out or None


def aggregate(criteria: list[Criterion], scores: dict[str, float]) -> float | None:
    """Eq. 1: the weighted mean of normalized criterion scores q in [0, 1] (a negative criterion
    contributes 1 - q). Criteria without a score are left out and the weights renormalized;
    None when no criterion was scored."""
    num = den = 0.0
    for c in criteria:
        s = scores.get(c.id)
        if s is None:
            continue
        q = min(1.0, max(0.0, float(s) / SCALE))
        num += c.weight * (1.0 - q if c.polarity == "negative" else q)
        den += c.weight
    return num / den if den > 0 else None


def parse_scores(obj: dict[str, Any] | None, ids: list[int], criteria: list[Criterion]) -> dict[int, CriterionScores] | None:
    """Per prefix id: {"criteria": {criterion id: score}, "evidence": {criterion id: text}} from
    {"candidates": [{"id": 1, "scores": [{"criterion": "c1", "score": 3, "evidence": "..."}]}]}.
    None when no requested id got a usable score."""
    if not isinstance(obj, dict) or not isinstance(obj.get("candidates"), list):
        return None
    known = {c.id for c in criteria}
    out: dict[int, CriterionScores] = {}
    for cand in obj["candidates"]:
        if not isinstance(cand, dict):
            continue
        cid = cand.get("id")
        if isinstance(cid, str) and cid.strip().isdigit():
            cid = int(cid.strip())
        if cid not in ids or isinstance(cid, bool):
            continue
        crit, ev = {}, {}
        for s in cand.get("scores") or []:
            if not isinstance(s, dict) or str(s.get("criterion")) not in known:
                continue
            v = s.get("score")
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                continue
            crit[str(s["criterion"])] = float(min(SCALE, max(0, v)))
            ev[str(s["criterion"])] = str(s.get("evidence") or "")[:500]
        if crit:
            out[cid] = {"criteria": crit, "evidence": ev}
    return out or None


def top_tied(scores: dict[Any, float | None]) -> list[Any]:
    """The keys sharing the highest (non-None) score, in the given order."""
    valid = {k: s for k, s in scores.items() if s is not None}
    if not valid:
        return []
    top = max(valid.values())
    return [k for k, s in valid.items() if abs(s - top) <= EPS]


def regressed(child: float | None, parent: float | None) -> bool:
    """A child regresses when it scores strictly below its parent (under the same rubric set). An
    unscored child counts as regressed; with no parent score there is nothing to regress from."""
    if parent is None:
        return False
    return child is None or child < parent - EPS


def rank(scores: dict[Any, float | None], rng, tie_scores: dict[Any, float | None] | None = None) -> list[Any]:
    """Keys best first: by score, then (among equal scores) by the tie-break score, then a seeded
    coin. Unscored keys come last."""
    tie_scores = tie_scores or {}
    coin = {k: rng.random() for k in scores}
    return sorted(scores, key=lambda k: (scores[k] is None, -(scores[k] or 0.0),
                                         tie_scores.get(k) is None, -(tie_scores.get(k) or 0.0), coin[k]))


def allocate(m: int, parents: int) -> list[int]:
    """Split m continuations over the parents (best-ranked first): even, remainder to the best."""
    if parents <= 0:
        return []
    base, extra = divmod(m, parents)
    return [base + (1 if i < extra else 0) for i in range(parents)]


def select_beam(ranked: list[Any], beam: int) -> list[Any]:
    return list(ranked[:max(1, beam)])


# ---- rendering -----------------------------------------------------------------------------------------
def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + "\n...[middle truncated]...\n" + text[-half:]


def render_turns(messages: list[ChatMessage], first_turn: int, obs_chars: int) -> str:
    """Assistant commands (no reasoning) and what came back, numbered from `first_turn`."""
    parts, turn = [], first_turn - 1
    for m in messages:
        if m.get("role") == "assistant":
            turn += 1
            cmd = command_of_message(m)
            shown = f"```bash\n{cmd}\n```" if cmd else "[response with no runnable command]"
            parts.append(f'<action turn="{turn}">\n{shown}\n</action>')
        elif m.get("role") in ("user", "tool") and turn >= first_turn:
            parts.append(f'<observation turn="{turn}">\n{_clip(str(m.get("content") or ""), obs_chars)}\n</observation>')
    return "\n\n".join(parts)


def split_history(transcript: list[ChatMessage], shared_len: int) -> tuple[list[ChatMessage], list[ChatMessage]]:
    """(shared turns after the system prompt and task prompt, the continuation's own messages)."""
    return transcript[2:shared_len], transcript[max(2, shared_len):]


def _turns_in(messages: list[ChatMessage]) -> int:
    return sum(m.get("role") == "assistant" for m in messages)


def common_prefix_len(transcripts: list[list[ChatMessage]]) -> int:
    if not transcripts:
        return 2
    n = min(len(t) for t in transcripts)
    k = 0
    while k < n and all(t[k] == transcripts[0][k] for t in transcripts[1:]):
        k += 1
    # never cut between a command and its observation
    while k > 2 and transcripts[0][k - 1].get("role") == "assistant":
        k -= 1
    return max(2, k)


def group_prompt(kind: str, instruction: str, shared: list[ChatMessage], members: list[tuple[int, list[ChatMessage], str]],
                 params: CERParams, *, criteria: list[Criterion] | None = None, score_parent: bool = False,
                 purpose: str = "group") -> list[ChatMessage]:
    """A rubric-building (kind="cer_rubrics") or scoring (kind="cer_score") prompt over a group:
    the shared history once, then each member's continuation. `members`: (id, own messages, how
    it stopped)."""
    first = _turns_in(shared) + 1
    shared_text = render_turns(shared, 1, params.max_observation_chars) if shared else "(none: the agent has just started)"
    blocks = []
    for cid, own, stopped in members:
        body = _clip(render_turns(own, first, params.max_observation_chars) or "(no new steps)", params.max_candidate_chars)
        blocks.append(f'<continuation id="{cid}" stopped="{stopped}">\n{body}\n</continuation>')
    head = (f'<{kind} purpose="{purpose}">\n<task>\n{instruction}\n</task>\n\n'
            f"<shared_prefix>\n{shared_text}\n</shared_prefix>\n\n"
            f"{len(members)} unfinished continuations of the shared prefix by a coding agent "
            f"(none has been checked by tests):\n\n" + "\n\n".join(blocks) + "\n\n")
    if kind == "cer_rubrics":
        ask = ("Build ONE shared weighted rubric set that predicts which continuation will end up solving the task. "
               "Use the differences you see between these continuations (reproducing the problem, validating edits, "
               "recovering from errors; penalize unsupported edits, repeated commands, no self-testing). "
               + ("These continuations currently tie: write criteria that discriminate between them. " if purpose == "tie_break" else "")
               + f"At most {params.max_criteria} criteria. Respond with JSON: "
               '{"criteria": [{"id": "c1", "criterion": string, "weight": positive number, '
               '"polarity": "positive" or "negative"}]}')
    else:
        rubric = "\n".join(f'- id "{c.id}" (weight {c.weight:g}, {c.polarity}): {c.text}' for c in criteria or [])
        ids = ([0] if score_parent else []) + [cid for cid, _, _ in members]
        parent = ('Also score id 0: the shared prefix alone, before any continuation. ' if score_parent else "")
        ask = (f"<rubrics>\n{rubric}\n</rubrics>\n\nScore every continuation under every criterion with an integer "
               f"from 0 (not at all) to {SCALE} (fully), quoting the visible evidence. A negative criterion is scored by "
               f"how much of the bad behaviour it names is present. {parent}Respond with JSON: "
               '{"candidates": [{"id": integer, "scores": [{"criterion": id, "score": integer, "evidence": string}]}]} '
               f"with ids {ids}.")
    return [{"role": "system", "content": "You are a careful judge of coding-agent trajectories. You predict, "
             "from unfinished work, whether the agent will solve its task."},
            {"role": "user", "content": head + ask + f"\n</{kind}>"}]


# ---- the judge -----------------------------------------------------------------------------------------
@dataclass
class GroupScore:
    rubric_set: str
    criteria: list[Criterion]
    scores: dict[int, float | None]  # attempt index -> CER score
    detail: dict[int, CriterionScores] = field(default_factory=dict)  # attempt index -> criteria, evidence
    error: str | None = None
    parent_score: float | None = None  # the parent (the shared prefix alone), when asked


class CERScorer:
    """One rubric call + one scoring call per group, both logged as `verifier_call` events."""

    def __init__(self, params: CERParams, llm, *, instruction: str, seed: int, sink):
        self.p, self.llm, self.instruction, self.seed, self.sink = params, llm, instruction, seed, sink
        self.n_sets = 0

    async def score_group(self, tag: str, shared: list[ChatMessage], members: list[tuple[int, list[ChatMessage], str]],
                          *, score_parent: bool = False, purpose: str = "group") -> GroupScore:
        """`members`: (attempt index, own messages, how it stopped). The judge sees them as ids
        1..n in the given order (and the parent as id 0); scores come back by attempt index."""
        self.n_sets += 1
        set_id = f"{tag}:{purpose}"
        if not members:
            return GroupScore(set_id, [], {}, error="nothing to judge")
        index_of = {k + 1: idx for k, (idx, _, _) in enumerate(members)}
        shown = [(k + 1, own, stopped) for k, (_, own, stopped) in enumerate(members)]
        if self.llm is None:
            return GroupScore(set_id, [], {idx: None for idx in index_of.values()}, error="no judge model")
        prompt = group_prompt("cer_rubrics", self.instruction, shared, shown, self.p, purpose=purpose)
        criteria, reply, problem, calls = await ask_json(
            self.llm, prompt, lambda t: parse_rubrics(parse_json_reply(t), self.p.max_criteria),
            seed=derive_seed(self.seed, set_id, "rubrics"), sink=self.sink, tries=self.p.judge_tries)
        log_call(self.sink, role="judge", method="cer_rubrics", model=self.llm.name, messages=prompt, response=reply,
                 parsed={"criteria": [c.record() for c in criteria or []]}, mode=self.p.log_calls, rubric_set=set_id,
                 purpose=purpose, members=list(index_of.values()), error=problem, calls=calls)
        if not criteria:
            return GroupScore(set_id, [], {idx: None for idx in index_of.values()}, error=problem)
        ids = ([0] if score_parent else []) + list(index_of)
        prompt = group_prompt("cer_score", self.instruction, shared, shown, self.p, criteria=criteria,
                              score_parent=score_parent, purpose=purpose)
        parsed, reply, problem, calls = await ask_json(
            self.llm, prompt, lambda t: parse_scores(parse_json_reply(t), ids, criteria),
            seed=derive_seed(self.seed, set_id, "score"), sink=self.sink, tries=self.p.judge_tries)
        parsed = parsed or {}
        by_id = {i: aggregate(criteria, parsed[i]["criteria"]) if i in parsed else None for i in ids}
        scores = {idx: by_id[k] for k, idx in index_of.items()}
        detail = {index_of[k]: d for k, d in parsed.items() if k in index_of}
        parent_score = by_id.get(0) if score_parent else None
        log_call(self.sink, role="judge", method="cer_score", model=self.llm.name, messages=prompt, response=reply,
                 parsed={"ids": {str(k): idx for k, idx in index_of.items()}, "parent_score": parent_score,
                         "scores": {str(i): s for i, s in scores.items()},
                         "criteria": {str(i): d["criteria"] for i, d in detail.items()},
                         "evidence": {str(i): d["evidence"] for i, d in detail.items()}},
                 mode=self.p.log_calls, rubric_set=set_id, purpose=purpose, error=problem, calls=calls)
        return GroupScore(set_id, criteria, scores, detail, problem, parent_score)


# ---- the search ------------------------------------------------------------------------------------------
@dataclass
class Cand:
    attempt: AttemptResult
    parent: int | None  # attempt index of the parent prefix (None: the empty prefix)
    round: int
    score: float | None = None
    parent_score: float | None = None
    criteria: dict[str, float] = field(default_factory=dict)
    rubric_set: str | None = None
    regressed: bool = False
    tied: bool = False
    tie_score: float | None = None
    tie_rubric_set: str | None = None

    @property
    def broken(self) -> bool:
        return self.attempt.stop_reason == "sandbox_error" or self.attempt.ending == "sandbox_error"

    @property
    def finished(self) -> bool:
        return self.attempt.stop_reason != "paused"

    def record(self) -> CerCandidate:
        a = self.attempt
        return {"attempt": a.index, "parent": self.parent, "round": self.round, "turns": a.turns,
                "finished": self.finished, "broken": self.broken, "stop_reason": a.stop_reason, "score": self.score,
                "restored": a.prefix_restore,
                "parent_score": self.parent_score, "criteria": self.criteria, "rubric_set": self.rubric_set,
                "regressed": self.regressed, "tied": self.tied, "tie_score": self.tie_score,
                "tie_rubric_set": self.tie_rubric_set}


@register_trajectory("cer", CERParams, record=RECORD_CER)
class CER:
    kind = "cer"

    def __init__(self, params: CERParams, *, models, seed: int, **_):
        self.p, self.models, self.seed = params, models, seed

    async def run(self, task, start_attempt: StartAttempt, rec) -> TrajectoryOutcome:
        p = self.p
        meter = StageMeter(rec)
        llm = self.models(p.judge, "judge") if self.models is not None else None
        self.attempts: dict[int, AttemptResult] = {}
        cands: dict[int, Cand] = {}
        rounds: list[CerRound] = []
        beam: list[int] = []  # attempt indices; empty = the empty prefix
        selected: int | None = None
        for r in range(1, p.n_rounds() + 1):
            stage = f"round{r}"
            scorer = CERScorer(p, llm, instruction=task.instruction, seed=self.seed, sink=meter.sink(stage))
            growable = [b for b in beam if not cands[b].finished] if beam else [None]
            if not growable:
                break
            counts = allocate(p.m, len(growable))

            async def extend(parent: int | None, k: int) -> AttemptResult:
                prefix = Prefix.of(cands[parent].attempt, restore=p.prefix_restore) if parent is not None else None
                a = await start_attempt(stage, None, [], prefix=prefix, max_new_turns=p.segment_turns, verify=False,
                                        keep_snapshot=p.keep_snapshot())
                self.attempts[a.index] = a
                return a

            jobs = [(par, k) for par, c in zip(growable, counts) for k in range(c)]
            results = await asyncio.gather(*(extend(par, k) for par, k in jobs))
            groups: dict[int | None, list[AttemptResult]] = {}
            for (par, _), a in zip(jobs, results):
                groups.setdefault(par, []).append(a)
                cands[a.index] = Cand(a, par, r)

            async def judge_group(par: int | None, kids: list[AttemptResult]) -> CerGroup:
                shared_len = len(cands[par].attempt.transcript) if par is not None else 2
                shared = cands[par].attempt.transcript[2:] if par is not None else []
                ok = [a for a in kids if not cands[a.index].broken]  # a dead sandbox has nothing to judge
                members = [(a.index, split_history(a.transcript, shared_len)[1], a.stop_reason) for a in ok]
                score_parent = par is not None and p.regression_stop
                gs = await scorer.score_group(f"{stage}:p{par if par is not None else 'root'}", shared, members,
                                              score_parent=score_parent)
                parent_score = gs.parent_score
                for a in kids:
                    c = cands[a.index]
                    c.score, c.rubric_set, c.parent_score = gs.scores.get(a.index), gs.rubric_set, parent_score
                    c.criteria = gs.detail.get(a.index, {}).get("criteria", {})
                    c.regressed = p.regression_stop and regressed(c.score, parent_score) and not c.broken
                tied = top_tied({a.index: gs.scores.get(a.index) for a in kids})
                return {"parent": par, "members": [a.index for a in kids], "rubric_set": gs.rubric_set,
                        "criteria": [c.record() for c in gs.criteria], "parent_score": parent_score,
                        "scores": {str(a.index): gs.scores.get(a.index) for a in kids},
                        "top_tie": len(tied) > 1, "top_tied": tied if len(tied) > 1 else [], "error": gs.error,
                        "broken": [a.index for a in kids if cands[a.index].broken]}

            group_recs = list(await asyncio.gather(*(judge_group(par, kids) for par, kids in groups.items())))
            new = [a.index for a in results]
            eligible = [i for i in new if not cands[i].regressed and not cands[i].broken]
            # beam members that submitted cannot grow: they keep their place and score
            carried = [b for b in beam if cands[b].finished]
            pool = eligible + carried
            rnd: CerRound = {"round": r, "parents": growable, "allocation": counts, "groups": group_recs,
                                   "candidates": new, "regressed": [i for i in new if cands[i].regressed],
                                   "carried": carried}
            if not eligible:  # a fully regressed round keeps the previous beam and selection
                rnd.update(beam=beam, selected=selected, all_regressed=True)
                rounds.append(rnd)
                await self._release(cands, keep=set(beam))
                continue
            scores = {i: cands[i].score for i in pool}
            tied = top_tied(scores)
            tie_rec = None
            if len(tied) > 1:
                for i in tied:
                    cands[i].tied = True
                if p.tie_break_rubrics and llm is not None:
                    tie_rec = await self._tie_break(scorer, f"{stage}", tied, cands)
            ranked = rank(scores, derive_rng(self.seed, stage, "rank"),
                          {i: cands[i].tie_score for i in tied} if len(tied) > 1 else None)
            beam = select_beam(ranked, p.beam)
            selected = ranked[0]
            rnd.update(ranked=ranked, beam=beam, selected=selected, top_tied=tied if len(tied) > 1 else [],
                       tie_break=tie_rec)
            rounds.append(rnd)
            await self._release(cands, keep=set(beam))

        if selected is None:  # nothing could be judged (e.g. every sandbox died): the first live candidate
            selected = next((i for i in sorted(cands) if not cands[i].broken), next(iter(sorted(cands)), None))
        final, completions = await self._finish(start_attempt, cands, selected)
        await self._release(cands, keep=set())
        record: CerRecord = {"kind": self.kind, "params": {"m": p.m, "beam": p.beam, "segment_turns": p.segment_turns,
                                                "rounds": p.n_rounds(), "budget_steps": p.budget_steps,
                                                "regression_stop": p.regression_stop,
                                                "tie_break_rubrics": p.tie_break_rubrics,
                                                "prefix_restore": p.prefix_restore},
                  "prefix_restores": dict(sorted(Counter(a.prefix_restore for a in self.attempts.values()
                                                         if a.prefix_restore).items())),
                  "rounds": rounds, "candidates": {str(i): c.record() for i, c in sorted(cands.items())},
                  "selected": selected, "final": final.index, "completed_by_policy": final.index != selected,
                  "completions": {str(k): v for k, v in completions.items()},
                  "analysis_complete_all": p.analysis_complete_all,
                  "judge_usage": meter.as_dict(), "rubric_sets": sum(len(rd["groups"]) for rd in rounds)}
        attempts = [self.attempts[i] for i in sorted(self.attempts)]
        record["stage_usage"] = stage_usage_json(self._stage_usage(attempts, meter))
        return TrajectoryOutcome(final=final, attempts=attempts, record=record)

    async def _tie_break(self, scorer: CERScorer, stage: str, tied: list[int], cands: dict[int, Cand]) -> CerTieBreak:
        """Extra rubrics built from the tied candidates only; they are scored under them."""
        transcripts = [cands[i].attempt.transcript for i in tied]
        shared_len = common_prefix_len(transcripts)
        shared = transcripts[0][2:shared_len]
        members = [(i, split_history(cands[i].attempt.transcript, shared_len)[1], cands[i].attempt.stop_reason)
                   for i in tied]
        gs = await scorer.score_group(stage, shared, members, purpose="tie_break")
        for i in tied:
            cands[i].tie_score, cands[i].tie_rubric_set = gs.scores.get(i), gs.rubric_set
        still = top_tied({i: gs.scores.get(i) for i in tied})
        return {"members": tied, "rubric_set": gs.rubric_set, "criteria": [c.record() for c in gs.criteria],
                "scores": {str(i): gs.scores.get(i) for i in tied}, "still_tied": len(still) > 1 or not still,
                "error": gs.error}

    async def _finish(self, start_attempt: StartAttempt, cands: dict[int, Cand],
                      selected: int | None) -> tuple[AttemptResult, dict[int, int]]:
        """Complete the selected prefix (and, for analysis, every other unfinished candidate).
        Returns the final attempt and {candidate: attempt that completed it}."""
        p = self.p

        async def complete(i: int, stage: str) -> tuple[int, AttemptResult]:
            a = await start_attempt(stage, None, [], prefix=Prefix.of(cands[i].attempt, restore=p.prefix_restore),
                                    verify=True)
            self.attempts[a.index] = a
            return i, a

        todo: list[tuple[int, str]] = []
        if selected is not None and p.complete and not cands[selected].finished:
            todo.append((selected, "final"))
        if p.analysis_complete_all:
            todo += [(i, "analysis") for i, c in sorted(cands.items())
                     if not c.finished and not (i == selected and p.complete)]
        done = dict(await asyncio.gather(*(complete(i, s) for i, s in todo)))
        completions = {i: a.index for i, a in done.items()}
        if selected is None:
            raise RuntimeError("CER produced no candidate")
        if p.complete and selected in done:
            final = done[selected]
        else:  # it submitted during the search (already verified), or completion is off
            final = cands[selected].attempt
        return final, completions

    async def _release(self, cands: dict[int, Cand], keep: set[int]) -> None:
        """Remove the snapshots no continuation will start from: those outside the beam (with
        `analysis_complete_all`, every unfinished candidate is completed at the end, so all stay)."""
        if self.p.analysis_complete_all and keep:
            return
        for i, c in cands.items():
            if i not in keep and c.attempt.snapshot is not None and not c.attempt.snapshot.released:
                await asyncio.to_thread(c.attempt.release_snapshot)

    def _stage_usage(self, attempts: list[AttemptResult], meter: StageMeter) -> dict[str, dict[str, Usage]]:
        by: dict[str, list[dict[str, Usage]]] = {}
        for a in attempts:
            by.setdefault(a.stage, []).append(a.usage)
        out = {stage: sum_usage(*parts) for stage, parts in by.items()}
        for stage, roles in meter.by_stage().items():
            out[stage] = sum_usage(out.get(stage, {}), roles)
        return out
