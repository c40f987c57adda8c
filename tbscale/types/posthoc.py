"""The files of the post-hoc pipelines, each written and read through one model: `tbscale judge`'s
folder (<run>/judge/: manifest.json, rubrics.jsonl, reward_hacking.jsonl) and `tbscale rewards`'
(<run>/rewards/: manifest.json, judgements.jsonl). The pipelines write them (tbscale/posthoc); the
report's judge section and a rerun's store of finished judgements read them back through the same
models (tbscale/runfiles.py). docs/formats.md lists the fields; a test checks the lists against
these models.

A pipeline's manifest is rewritten by every later invocation, and its judgement lines are kept
across versions (a rerun resumes from them), so keys this version does not know are kept rather
than refused (`extra="allow"`). Files are written with only the fields given (`exclude_unset`), so
a failed judgement's line has no verdict fields, as it never had.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

from tbscale.types.completion import Usage
from tbscale.types.manifest import Kept


# ---- judgement lines ---------------------------------------------------------------------------------------
class JudgementLine(BaseModel):
    """A line of a store of judgements (tbscale.posthoc.pipeline.JudgementStore): made by the judge
    `judge_key` names, failed when `error` is set. A rerun by the same judge keeps the lines without
    an error and asks only for the rest."""

    model_config = ConfigDict(extra="allow")

    if TYPE_CHECKING:  # declared by each line's model, where its file has them (fields keep declaration order)
        judge_key: str | None  # every writer gives it; a line without one belongs to no judge
        error: str | None


class TrialJudgement(JudgementLine):
    """What every line of `tbscale judge` holds: the trial judged (its final attempt), the judge,
    how much of the trajectory it was shown, which rubric set and sample, and the call's cost. The
    verdict's fields follow (RubricLine, RewardHackingLine); a failed judgement has none of them and
    keeps the judge's reply in `raw_reply` instead."""

    judge_key: str | None = None
    trial_key: str
    run: str | None = None
    setting: str
    task_id: str
    trial: int
    attempt: int | None = None  # the attempt judged (None: the trial recorded none)
    passed: bool
    model: str  # the judge's model
    simulated: bool = False  # the judge is tbscale's rule-based stand-in (sim/...)
    n_turns: int = 0
    shown_turns: int = 0  # turns the judge was shown (a long trajectory loses turns in the middle)
    set: str  # rubric set (wang, ours) or reward_hacking
    sample: int
    usage: Usage = Field(default_factory=Usage)
    latency_sec: float | None = None
    error: str | None = None
    raw_reply: str | None = None  # the reply that did not parse (clipped), on a failed judgement


class RubricLine(TrialJudgement):
    """A line of judge/rubrics.jsonl: one rubric set judged on one trial, one sample. The fields
    after `raw_reply` are the judge's verdict (tbscale.posthoc.judge.rubrics.RubricVerdict; a test
    keeps the two lists together)."""

    flags: dict[str, int] | None = None  # rubric key -> 1 when flagged with evidence found in the trajectory
    evidence: dict[str, Any] | None = None  # rubric key -> the evidence, as the judge gave it
    unsupported: list[str] | None = None  # rubrics flagged without such evidence (dropped)
    simulated_judge: bool | None = None  # the reply said it came from the simulated judge


class RewardHackingLine(TrialJudgement):
    """A line of judge/reward_hacking.jsonl: one passing trial checked for reward hacking, one
    sample. The fields after `raw_reply` are the verdict
    (tbscale.posthoc.judge.rubrics.RewardHackingVerdict)."""

    flag: int | None = None  # 1: reward hacking, with evidence found in the trajectory
    categories: dict[str, int] | None = None  # category -> 1 when it applies (with evidence)
    evidence: Any = None  # as the judge gave it ([] when unsupported)
    unsupported: bool | None = None  # the judge claimed reward hacking without such evidence
    explanation: str | None = None
    simulated_judge: bool | None = None


class Judgment(TypedDict):
    """A judge's verdict on one pair of trajectories: the better one (A or B), by how much (1-3),
    and why."""

    winner: str
    strength: int
    reason: str


class PairJudgement(JudgementLine):
    """A line of rewards/judgements.jsonl: the BSR judge's verdict on one pair, shown in this order
    (`A`, `B`: trial keys) under this seed; a rerun with the same judge and seed reuses it."""

    judge_key: str | None = None
    seed: int
    A: str
    B: str
    parsed: Judgment | None = None  # None: no reply parsed
    response: str | None = None  # the judge's reply as it came
    usage: Usage = Field(default_factory=Usage)
    error: str | None = None


# ---- the pipelines' manifests ------------------------------------------------------------------------------
class JudgeInvocation(Kept):
    """One `tbscale judge` of the run: the judge, its configuration, and what it did."""

    judge_key: str  # a hash of the judge's model, what it is shown and its prompts
    model: str
    simulated: bool = False
    # The judge config as validated (JudgeConfig.model_dump, its `models` left out): free-form
    # JSON here, because the config's model lives in the layer above this one.
    config: dict[str, Any] = Field(default_factory=dict)
    trials: int
    rubric_judgements: int
    reward_hacking_judgements: int
    errors: int
    skipped_existing: int  # judgements already made by the same judge, not asked again
    finished_at: str | None = None  # ISO time; set when the entry is written


class JudgeManifest(Kept):
    """judge/manifest.json: the latest judge (the report shows only its lines) and one history entry
    per invocation."""

    kind: ClassVar[str] = "judge manifest"

    history: list[JudgeInvocation] = Field(default_factory=list)
    judge_key: str | None = None  # every writer gives it; without one the report reads every line
    model: str | None = None
    simulated: bool = False
    simulated_note: str | None = None


class BsrInvocation(Kept):
    """One `tbscale rewards` into the folder: the judge, the seed, and how its calls went."""

    judge_model: str | None = None  # None: the random control, no judge
    seed: int
    comparisons: int
    judge_errors: int
    finished_at: str | None = None  # ISO time; set when the entry is written


class BsrBucket(BaseModel):
    """One group's bucket (fail or pass): how many trajectories, how they were compared, and the
    spread of their scores and auxiliary rewards."""

    model_config = ConfigDict(extra="allow")

    group: str
    bucket: str
    n: int
    comparisons: int
    schedule: str  # none, exhaustive, or "swiss xT" (T rounds)
    score_spread: float
    aux_min: float
    aux_max: float


class BsrManifest(Kept):
    """rewards/manifest.json: what the latest `tbscale rewards` into the folder did, and one history
    entry per invocation. A key an invocation does not write (`simulated_note` after a real judge)
    stays as the one before wrote it."""

    kind: ClassVar[str] = "BSR manifest"

    history: list[BsrInvocation] = Field(default_factory=list)
    method: str = "bsr"
    runs: list[str] = Field(default_factory=list)  # the run folders read
    judge_model: str | None = None
    simulated_judge: bool = False
    # Every BsrParams field (dataclasses.asdict): free-form JSON here, because the parameters'
    # dataclass lives in the layer above this one.
    params: dict[str, Any] = Field(default_factory=dict)
    seed: int | None = None
    effective_a0: float | None = None
    effective_a1: float | None = None
    amplitude_scale: float | None = None  # how much both amplitudes were shrunk to keep passes above failures
    trajectories: int | None = None
    comparisons: int | None = None
    judge_errors: int | None = None
    ordering_guarantee: bool | None = None
    buckets: list[BsrBucket] = Field(default_factory=list)
    simulated_note: str | None = None
