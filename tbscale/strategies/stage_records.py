"""The staged record (RECORD_STAGED: best_of_n, pdr, and any strategy built on StagedStrategy),
read back: the names its stages get and the labels and order the report shows them in, and the
tournaments of its selection stages as the viewer draws them.

`iter<t>` holds the attempts of iteration t; `select_k` (after iteration 0) and
`select_k_after_iter<t>` keep K of an iteration's attempts as the next one's context; `final`
returns one attempt. A stage named otherwise is shown by its name, after these.

Plain dicts and `json` only: the viewer imports this without loading any strategy, and draws the
brackets of any record of this shape, a run made with a strategy not installed here included. The
TypedDicts below say what a staged record holds (docs/formats.md, "strategy_record"); a record is
written and read as the plain dict they describe.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from typing_extensions import NotRequired, Required, TypedDict

from tbscale.types.completion import UsageJSON


class VoteReply(TypedDict, total=False):
    """What the judge answered for one vote (from its `verifier_call` event)."""

    response: Required[str | None]
    error: str
    calls: int
    model: str


class VoteRecord(TypedDict):
    """One judge vote: the member it chose (None: unusable) and the order members were shown in."""

    choice: int | None
    order: list[int] | None
    error: NotRequired[str]
    reply: NotRequired[VoteReply]  # added when the viewer draws the bracket


class GroupRecord(TypedDict, total=False):
    """One group of a tournament round: its members, its votes and counts, its winner (a bye
    when it has one member). A flat judge keeping several lists them as `winners`."""

    members: Required[list[int]]
    bye: Required[bool]
    votes: list[VoteRecord]
    counts: dict[str, int]
    winner: int | None
    winners: list[int]
    tie_broken: bool
    invalid_votes: int


class RoundRecord(TypedDict):
    round: int | None
    entrants: NotRequired[list[int]]
    groups: list[GroupRecord]
    survivors: list[int]


class TournamentRecord(TypedDict, total=False):
    """A selection (rtv.select): its method, how many it keeps, who entered and who survived,
    and the rounds a tournament or judge ran (none for random and oracle)."""

    method: Required[str]
    target: Required[int]
    group_size: int
    entrants: Required[list[int]]
    rounds: Required[list[RoundRecord]]
    survivors: Required[list[int]]


# `from` is a Python keyword: these two are spelled the functional way.
StageRecord = TypedDict("StageRecord", {
    "stage": Required[str],
    "kind": Required[str],  # iteration | select
    "attempts": list[int],  # iteration: the attempts it ran
    "summarized": bool,
    "method": str,  # select: how it selected, from whom, whom it kept, with its tournament
    "target": int,
    "from": list[int],
    "selected": list[int],
    "tournament": TournamentRecord,
    "after_iteration": int,
}, total=False)
"""One stage of a staged record: an iteration's attempts, or a selection among them."""

Bracket = TypedDict("Bracket", {
    "stage": Any,
    "method": str | None,
    "target": int | None,
    "group_size": NotRequired[int | None],
    "from": list[int],
    "selected": list[int],
    "rounds": list[RoundRecord],
    "source": str,
})
"""A selection stage's tournament as the viewer draws it (`tournaments`)."""


class SummaryNote(TypedDict):
    source: str  # llm | fallback
    chars: int
    error: NotRequired[str]


class StagedRecord(TypedDict, total=False):
    """A staged strategy's `strategy_record`: its kind and parameters, the stages in order, the
    final attempt, each summary's source and length, and tokens per stage and role."""

    kind: Required[str]
    stages: Required[list[StageRecord]]
    final: Required[int]
    summaries: dict[str, SummaryNote]
    stage_usage: dict[str, dict[str, UsageJSON]]
    n: int
    selector: str
    group_size: int
    votes: int
    iterations: int
    k: int
    context: str
    select: str
    final_method: str


def stage_name(kind: str, t: int) -> str:
    """The name of iteration t (`kind` "iter") or of the selection after it (any other kind)."""
    if kind == "iter":
        return f"iter{t}"
    return "select_k" if t == 0 else f"select_k_after_iter{t}"


@functools.lru_cache(maxsize=256)
def stage_label(stage: str) -> str:
    if stage.startswith("iter"):
        return f"Iter {stage[4:]}"
    if stage == "select_k":
        return "Select-K"
    if stage.startswith("select_k_after_iter"):
        return f"Select-K (iter {stage.rsplit('iter', 1)[1]})"
    return {"final": "Final"}.get(stage, stage)


def stage_order(stage: str) -> tuple[int, int]:
    """Sort key: iteration t, then the selection after it; Final last."""
    if stage == "final":
        return (10**6, 0)
    if stage.startswith("iter") and stage[4:].isdigit():
        return (int(stage[4:]), 0)
    if stage == "select_k":
        return (0, 1)
    if stage.startswith("select_k_after_iter"):
        return (int(stage.rsplit("iter", 1)[1]), 1)
    return (10**5, 0)


def tournaments(record: Any, judge_calls: list[dict[str, Any]]) -> list[Bracket]:
    """Every selection stage with its bracket: from the trial's strategy_record when it has one,
    else rebuilt from the judge's `verifier_call` events (round, group, vote). Each vote carries
    the judge's reply (rationale) when the event is there."""
    calls: dict[tuple, dict[str, Any]] = {}
    for c in judge_calls:
        if c.get("role") == "judge" and c.get("round") is not None:
            calls[(c.get("stage") or c.get("method"), c.get("round"), c.get("group"), c.get("vote"))] = c
    out: list[Bracket] = []
    stages = record.get("stages") if isinstance(record, dict) else None
    for st in stages or []:
        if not isinstance(st, dict) or st.get("kind") != "select":
            continue
        tour = st.get("tournament") if isinstance(st.get("tournament"), dict) else {}
        rounds = json.loads(json.dumps(tour.get("rounds") or []))  # a copy to annotate
        for rd in rounds:
            for g, grp in enumerate(rd.get("groups") or []):
                for v, vote in enumerate(grp.get("votes") or []):
                    c = calls.get((st.get("stage"), rd.get("round"), g, v))
                    if c is not None and isinstance(vote, dict):
                        vote["reply"] = _vote_reply(c)
        out.append({"stage": st.get("stage"), "method": st.get("method") or tour.get("method"),
                    "target": st.get("target", tour.get("target")), "group_size": tour.get("group_size"),
                    "from": st.get("from") or tour.get("entrants") or [], "selected": st.get("selected") or
                    tour.get("survivors") or [], "rounds": rounds, "source": "strategy_record"})
    if out or not calls:
        return out
    # No record: rebuild the brackets from the judge calls.
    by_stage: dict[Any, dict[Any, dict[Any, list]]] = {}
    for (stage, r, g, v), c in calls.items():  # stages in the order the judge was first asked
        by_stage.setdefault(stage, {}).setdefault(r, {}).setdefault(g, []).append(c)
    for stage, rounds_d in by_stage.items():
        rounds = []
        for r in sorted(rounds_d, key=lambda x: (x is None, x)):
            groups = []
            for g in sorted(rounds_d[r], key=lambda x: (x is None, x)):
                votes = sorted(rounds_d[r][g], key=lambda c: c.get("vote") or 0)
                members: list[Any] = []
                for c in votes:
                    parsed = c.get("parsed") if isinstance(c.get("parsed"), dict) else {}
                    for m in parsed.get("order") or []:
                        if m not in members:
                            members.append(m)
                counts = {str(m): 0 for m in members}
                vrec = []
                for c in votes:
                    parsed = c.get("parsed") if isinstance(c.get("parsed"), dict) else {}
                    choice = parsed.get("best")
                    if str(choice) in counts:
                        counts[str(choice)] += 1
                    vrec.append({"choice": choice, "order": parsed.get("order"), "reply": _vote_reply(c)})
                top = max(counts.values()) if counts else 0
                leaders = [m for m in members if counts[str(m)] == top]
                groups.append({"members": members, "bye": False, "votes": vrec, "counts": counts,
                               "winner": leaders[0] if len(leaders) == 1 else None, "tie_broken": len(leaders) > 1})
            rounds.append({"round": r, "groups": groups,
                           "survivors": [g["winner"] for g in groups if g["winner"] is not None]})
        entrants = [m for g in (rounds[0]["groups"] if rounds else []) for m in g["members"]]
        out.append({"stage": stage, "method": "rtv", "target": None, "from": entrants,
                    "selected": rounds[-1]["survivors"] if rounds else [], "rounds": rounds,
                    "source": "verifier_call events (no strategy_record: byes and broken ties are not known)"})
    return out


def _vote_reply(c: dict[str, Any]) -> VoteReply:
    reply: VoteReply = {"response": c.get("response")}
    for k in ("error", "calls", "model"):
        if c.get(k) is not None:
            reply[k] = c[k]  # type: ignore[literal-required]
    return reply
