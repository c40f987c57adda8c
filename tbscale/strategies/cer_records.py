"""What a CER trial's `strategy_record` holds (strategies/cer.py writes it; the report's CER
section, analysis/cer_report.py, reads it): the search's rounds with each group's rubric and
scores, every candidate prefix, the tie-breaks, and tokens per stage.

A record is written and read as the plain dict these TypedDicts describe (the trial line keeps
each strategy's record as the strategy wrote it); no strategy is loaded to read one.
"""

from __future__ import annotations

from typing_extensions import NotRequired, TypedDict

from tbscale.types.completion import UsageJSON


class CriterionRecord(TypedDict):
    """One rubric criterion the judge wrote."""

    id: str
    text: str
    weight: float
    polarity: str  # positive | negative


class CriterionScores(TypedDict):
    """One prefix's scores under a rubric: criterion id -> score, and the judge's evidence."""

    criteria: dict[str, float]
    evidence: dict[str, str]


class CerCandidate(TypedDict):
    """A candidate prefix: the attempt that grew it, from which parent and in which round, how far
    it went, its CER score and what it was scored under."""

    attempt: int
    parent: int | None
    round: int
    turns: int
    finished: bool
    broken: bool
    stop_reason: str
    score: float | None
    restored: str | None
    parent_score: float | None
    criteria: dict[str, float]
    rubric_set: str | None
    regressed: bool
    tied: bool
    tie_score: float | None
    tie_rubric_set: str | None


class CerGroup(TypedDict):
    """The children of one parent, judged under one rubric set."""

    parent: int | None
    members: list[int]
    rubric_set: str
    criteria: list[CriterionRecord]
    parent_score: float | None
    scores: dict[str, float | None]
    top_tie: bool
    top_tied: list[int]
    error: str | None
    broken: list[int]


class CerTieBreak(TypedDict):
    """Extra rubrics built from tied candidates only, and their scores under them."""

    members: list[int]
    rubric_set: str
    criteria: list[CriterionRecord]
    scores: dict[str, float | None]
    still_tied: bool
    error: str | None


class CerRound(TypedDict):
    """One round of the search: the parents grown and how many children each got, the groups
    judged, the new candidates, and the beam and selection it left (a round where every child
    regressed keeps the previous ones: `all_regressed`)."""

    round: int
    parents: list[int | None]
    allocation: list[int]
    groups: list[CerGroup]
    candidates: list[int]
    regressed: list[int]
    carried: list[int]
    beam: NotRequired[list[int]]
    selected: NotRequired[int | None]
    all_regressed: NotRequired[bool]
    ranked: NotRequired[list[int]]
    top_tied: NotRequired[list[int]]
    tie_break: NotRequired[CerTieBreak | None]


class CerParamsRecord(TypedDict):
    m: int
    beam: int
    segment_turns: int
    rounds: int
    budget_steps: int | None
    regression_stop: bool
    tie_break_rubrics: bool
    prefix_restore: str


class CerRecord(TypedDict):
    kind: str  # "cer"
    params: CerParamsRecord
    prefix_restores: dict[str, int]  # how continuations got their prefix: fork | replay -> count
    rounds: list[CerRound]
    candidates: dict[str, CerCandidate]  # attempt index -> candidate
    selected: int | None
    final: int
    completed_by_policy: bool
    completions: dict[str, int]  # candidate -> the attempt that completed it
    analysis_complete_all: bool
    judge_usage: dict[str, dict[str, UsageJSON]]  # stage -> role -> usage of the judge's calls
    rubric_sets: int
    stage_usage: NotRequired[dict[str, dict[str, UsageJSON]]]
