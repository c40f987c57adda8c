"""An attempt's artifacts/manifest.json, written and read through one model (CollectedArtifact).

The runner writes it when it copies an attempt's artifacts out of its environment
(tbscale/runner/artifacts.py), one entry per artifact the task asked for and for the /logs/artifacts
convention folder, and reads its entries back to put the artifacts into a separate verifier's
environment; readers of a finished run read the file through `runfiles.read_artifact_manifest`.
docs/formats.md lists the fields; a test checks the list against this model.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, TypeAdapter


class CollectedArtifact(BaseModel):
    """One entry: what was asked for (`source` as the task wrote it, `destination` under the
    attempt's folder, the `service` it came from), how copying it out went (`status`) and, when it
    went, what it was. Written with only the fields that apply (`exclude_unset`). The runner writes
    every entry itself, so an unknown key is refused: a file that has one was not written by it."""

    model_config = ConfigDict(extra="forbid")

    source: str
    destination: str
    service: str
    status: Literal["ok", "empty", "missing", "skipped", "failed"]
    type: Literal["file", "directory"] | None = None  # status ok or empty
    container_path: str | None = None  # the absolute path it was copied from (status ok)
    error: str | None = None  # why it failed or was skipped


artifact_manifest_adapter = TypeAdapter(list[CollectedArtifact])
