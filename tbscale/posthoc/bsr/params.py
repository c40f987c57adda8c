"""The parameters of behavioural self-rewarding, and its outcome buckets."""

from __future__ import annotations

from dataclasses import dataclass

FAIL, PASS = 0, 1
BUCKET_NAMES = {FAIL: "fail", PASS: "pass"}


@dataclass
class BsrParams:
    """Every constant of the method; defaults are the paper's main setting (Section 4)."""

    a0: float = 0.15  # amplitude of the failure bucket's auxiliary rewards
    a1: float = 0.0  # amplitude of the success bucket's auxiliary rewards
    delta: float = 0.5  # deadzone half-width, in standard deviations of the normalized scores
    tau: float = 0.5  # softness of the deadzone (0: hard deadzone)
    buckets: tuple[str, ...] = ("fail",)  # which outcome buckets are judged
    bt_l2: float = 0.1  # L2 regularization of the Bradley-Terry scores
    margin: float = 0.01  # share of the pass/fail reward gap kept free when amplitudes must shrink
    group_by: str = "setting"  # "setting": task x setting; "task": task across settings and runs
    random_control: bool = False
    seed: int = 0
    judge_tries: int = 2  # calls per pair until a reply parses
    concurrency: int = 8
    # trajectory summaries
    short_obs_chars: int = 1200
    error_obs_chars: int = 4000
    head_tail_chars: int = 500
    max_summary_chars: int = 30000
    conversion_window: int = 5  # steps after a search in which an edit counts as its conversion

    def amplitude(self, bucket: int) -> float:
        return self.a1 if bucket == PASS else self.a0
