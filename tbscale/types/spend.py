"""One line of a run's spend ledger (spend.jsonl), written and read through one model.

A line is written for every model call as it returns, whatever becomes of its trial (crashed,
retried and superseded trials included), so the report can set what was spent beside what its
tables count. docs/formats.md lists the fields; a test checks the list against this model.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import NotRequired, TypedDict

from tbscale.types.completion import Usage


class SpendLine(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ts: float  # unix seconds
    trial_key: str
    setting: str
    task_id: str
    trial: int
    attempt: int | None = None  # -1: a call the trajectory strategy made itself
    turn: int | None = None
    role: str
    model: str
    n: int = 1
    usage: Usage = Field(default_factory=Usage)
    latency_sec: float | None = None
    retries: int = 0
    error: str | None = None
    retry_causes: list[str] = Field(default_factory=list)  # written only when a try failed


class CallRecord(TypedDict):
    """One model call as an attempt's recorder reports it (logs.AttemptRecorder.record_call): a
    spend line without the trial's identity and time, which the run adds when it writes the line
    (a test keeps the two lists of fields together)."""

    attempt: int | None
    turn: int | None
    role: str
    model: str
    n: int
    usage: Usage  # as records hold it (Usage.recorded)
    latency_sec: float
    retries: int
    error: str | None
    retry_causes: NotRequired[list[str]]
