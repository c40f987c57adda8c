"""One SWE-bench instance as its dataset holds it (the columns of SWE-bench/SWE-bench_Verified on
the hub, of a local json / jsonl / parquet copy, or of a swebench task repo).

A row stays the plain dict the dataset gave: swebench's own grading code (make_test_spec,
get_eval_report) takes it as such. `dataset.check_columns` refuses a row without the columns the
agent and the grading need before anything runs; the rest are optional.
"""

from __future__ import annotations

from typing_extensions import Required, TypedDict


class SWEbenchRow(TypedDict, total=False):
    # what the agent needs (dataset.REQUIRED_FOR_AGENT)
    instance_id: Required[str]
    repo: str
    base_commit: str
    problem_statement: str
    # what swebench>=5 grades with (dataset.REQUIRED_FOR_GRADING)
    version: str
    FAIL_TO_PASS: str | list[str]  # JSON text on the hub, a list in some copies
    PASS_TO_PASS: str | list[str]
    eval_script: str
    log_parser: str  # a key of swebench's PARSER_REGISTRY
    eval_type: str  # pass_and_fail | fail_only
    image: str  # the instance's image reference (a template's fields may fill it)
    # optional
    hints_text: str
    patch: str  # the reference solution
    test_patch: str
    environment_setup_commit: str
    created_at: str
    split: str  # a task repo's rows carry their split
