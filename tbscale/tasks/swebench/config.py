"""The `tasks: {swebench: {...}}` block of an experiment config, validated here.

tbscale's config keeps this block a free mapping (TaskSource.swebench); its schema lives with the
code that reads it. Unknown keys are errors that name the key, like everywhere else.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from tbscale.errors import TbscaleError

DEFAULT_PATCH_EXCLUDE = [
    "**/__pycache__/**", "**/*.pyc", "**/*.pyo", ".pytest_cache/**", "**/.pytest_cache/**",
    "**/*.orig", "**/*.rej",
]


class SWEbenchSource(BaseModel):
    """Where SWE-bench instances come from, which image each runs in, and how it is graded."""

    model_config = ConfigDict(extra="forbid")

    # -- instances ---------------------------------------------------------------------------
    dataset: str | None = Field(
        None, description="a Hugging Face dataset name (e.g. SWE-bench/SWE-bench_Verified), or a local "
                          ".json / .jsonl / .parquet file, or a folder holding <split>.parquet|jsonl|json "
                          "or a datasets.save_to_disk copy")
    split: str = "test"
    task_repo: str | None = Field(
        None, description="a local swebench task repo (sweb.yaml, tasks/<instance_id>/...): the instances "
                          "when `dataset` is not given, and the Dockerfiles for `build`")
    instance_ids: list[str] | None = Field(None, description="only these instances, in the dataset's order")
    filter: str | None = Field(None, description="regular expression an instance_id must match (re.search)")
    slice: str | None = Field(None, description="python slice of the filtered instances, e.g. '0:50' or '::10'")
    cache_dir: str | None = Field(None, description="datasets cache folder (default: datasets' own)")

    # -- environments ------------------------------------------------------------------------
    image: str | None = Field(
        None, description="image-name template overriding the instance's `image`; fields: {instance_id}, "
                          "{instance_id_lower}, {docker_id}, {repo}, {repo_slug}, {version}, {arch}")
    namespace: str | None = Field(
        "swebench", description="for instances without `image`: the namespace of swebench's derived name "
                                "(swebench = the public prebuilt evaluation images; null = a local name)")
    tag: str = Field("latest", description="tag of the derived name")
    arch: Literal["x86_64", "arm64"] = "x86_64"
    build: Literal["none", "docker", "swebench"] = Field(
        "none", description="none: use the image if present, else pull it; docker: build the task repo's "
                            "Dockerfile with the Docker engine's classic builder; swebench: build with "
                            "swebench.image_builder (docker buildx)")
    build_workers: int = Field(4, gt=0)
    build_timeout_sec: float = Field(3600.0, gt=0)
    repo_dir: str = Field("/testbed", description="where the repository is inside the image")

    # -- the agent's task --------------------------------------------------------------------
    instruction_template: str | None = Field(
        None, description="replaces tbscale's instruction; fields: {problem_statement}, {hints}, {repo}, "
                          "{repo_dir}, {instance_id}, {base_commit}. A path to a file is read.")
    include_hints: bool = Field(False, description="append the instance's hints_text (SWE-bench runs leave it out)")
    agent_timeout_sec: float = Field(3600.0, gt=0)
    cpus: float = Field(2.0, gt=0)
    memory_mb: int = Field(4096, gt=0)
    allow_internet: bool = False

    # -- grading -----------------------------------------------------------------------------
    eval_timeout_sec: float = Field(1800.0, gt=0, description="the eval script's time limit (swebench's default)")
    grading_container: Literal["fresh", "same"] = Field(
        "fresh", description="fresh: apply the extracted patch in a new container from the image, as "
                             "swebench.harness.run_evaluation does; same: reset the agent's container to the "
                             "base commit and apply it there")
    evaluate_empty_patch: bool = Field(
        False, description="run the tests for an empty patch too (swebench does not: it counts it unresolved)")
    patch_exclude: list[str] = Field(
        default_factory=lambda: list(DEFAULT_PATCH_EXCLUDE),
        description="git glob pathspecs left out of the extracted patch (binary files always are)")
    patch_max_bytes: int = Field(5_000_000, gt=0, description="a larger extracted patch is graded as empty")

    @field_validator("filter")
    @classmethod
    def _regex(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                re.compile(v)
            except re.error as e:
                raise ValueError(f"not a regular expression ({e})") from None
        return v

    @field_validator("slice")
    @classmethod
    def _slice(cls, v: str | None) -> str | None:
        if v is not None:
            parse_slice(v)
        return v

    @model_validator(mode="after")
    def _sources(self) -> "SWEbenchSource":
        if self.dataset is None and self.task_repo is None:
            raise ValueError("give `dataset` (a hub name or a local file) or `task_repo`")
        if self.build != "none" and self.task_repo is None:
            raise ValueError(f"build: {self.build} needs `task_repo` (the Dockerfiles come from it)")
        return self


def parse_slice(text: str) -> slice:
    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise ValueError(f"{text!r} is not a slice like '0:50' or '::10'")
    try:
        nums = [int(p) if p.strip() else None for p in parts]
    except ValueError:
        raise ValueError(f"{text!r} is not a slice like '0:50' or '::10'") from None
    if len(nums) == 3 and nums[2] == 0:
        raise ValueError("slice step cannot be zero")
    return slice(*nums)


def parse_source(raw: dict[str, Any] | SWEbenchSource) -> SWEbenchSource:
    """Validate the block; a problem is one TbscaleError line naming the key."""
    if isinstance(raw, SWEbenchSource):
        return raw
    if not isinstance(raw, dict):
        raise TbscaleError("tasks.swebench: must be a mapping of keys (see docs/swebench.md)")
    try:
        return SWEbenchSource.model_validate(raw)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        msg = "unknown key" if first["type"] == "extra_forbidden" else first["msg"].removeprefix("Value error, ")
        more = f" (and {len(e.errors()) - 1} more)" if len(e.errors()) > 1 else ""
        where = f"tasks.swebench.{loc}" if loc else "tasks.swebench"
        raise TbscaleError(f"{where}: {msg}{more}") from None
