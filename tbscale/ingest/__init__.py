"""Runs made elsewhere, read into tbscale run folders: terminal-bench `tb run` folders and
submissions (terminal_bench.py), mini-swe-agent trajectories and Harbor jobs. docs/analysis.md
describes every format; the format is told by content (runs.detect_format).

`tbscale import PATH... --name NAME` writes ``results/NAME/`` in tbscale's own format
(manifest.json, trials.jsonl, trajectories/<task>/<setting>__t<i>__<key>.jsonl; docs/formats.md),
so ``tbscale report`` (pass@k, consistency, costs, endings, behaviours, Figure 5) and
``tbscale judge`` work on them unchanged, and they can be reported next to tbscale's own runs.
Nothing is rerun. Every imported trial is one attempt of a single-sample agent (policy
``baseline``, N = 1), each response one candidate that was executed.

mini-swe-agent (the bare list of messages, formats ``mini-swe-agent-1`` and ``-1.1``)
    Each PATH is a run (e.g. the output folder of ``mini-extra swebench``); a task's trials are
    numbered in the order the PATHs are given. The task id is ``info.instance_id`` or the file name
    (``<id>.traj.json``). Commands come from ``extra.actions`` (v2) or the single fenced block of the
    reply (v1); outputs and exit codes from the observation messages; tokens from each reply's
    ``extra.response.usage``, cost from ``info.model_stats``. A trajectory holds no verdict, so the
    pass/fail of each task comes from ``--resolved`` (a SWE-bench evaluation report with
    ``resolved_ids``, a JSON list of resolved ids, or a JSON object id -> bool/reward) or from
    ``info.resolved`` / ``info.reward`` when a wrapper stored one. Endings follow turn-bon Table 5:
    only ``Submitted`` can pass; ``LimitsExceeded``/``TimeExceeded`` are ``time_limit``, context
    errors ``out_of_context``, the rest ``agent_error``.

Harbor (job folders: ``<job>/<trial>/result.json``, ``agent/trajectory.json``, ``verifier/``)
    A PATH may be a job folder, a folder of jobs or one trial folder. Settings are (agent, model)
    pairs unless ``--setting`` names one; a task's trials are numbered by start time. Verdicts
    come from ``verifier_result.rewards`` (``reward``, else the mean), endings from
    ``exception_info.exception_type`` by Table 5 (an attempt with an exception never passes).
    Turns come from the ATIF trajectory (agent steps, their tool calls and observations; the
    command is the tool call's ``command``/``cmd``/``keystrokes``), or from
    ``agent/mini-swe-agent.trajectory.json`` when that is all there is; tokens and cost from
    ``agent_result``.
"""

from tbscale.ingest.runs import auto_import, detect_format, import_runs, write_run

__all__ = ["auto_import", "detect_format", "import_runs", "write_run"]
