"""The LLM judge over finished trajectories: behaviour rubrics and reward hacking (turn-bon
Section 4.2, Appendices F and G). rubrics.py holds what the judge reads and how its replies are
checked; run.py runs it over a run folder. The report section is tbscale.analysis.judge_report."""

from tbscale.posthoc.judge.rubrics import (RH_CATEGORIES, RH_TITLES, RUBRIC_BY_KEY, RUBRIC_SETS, RUBRICS,
                                           SOURCE_TITLES, Rendered, Rubric, evidence_supported,
                                           parse_reward_hacking_reply, parse_rubric_reply, render_trajectory,
                                           reward_hacking_messages, rubric_messages)
from tbscale.posthoc.judge.run import (JudgeConfig, JudgeStats, judge_key, load_judge_config, resolve_model,
                                       run_judge, select_trials, task_context)

__all__ = ["JudgeConfig", "JudgeStats", "RH_CATEGORIES", "RH_TITLES", "RUBRICS", "RUBRIC_BY_KEY", "RUBRIC_SETS",
           "Rendered", "Rubric", "SOURCE_TITLES", "evidence_supported", "judge_key", "load_judge_config",
           "parse_reward_hacking_reply", "parse_rubric_reply", "render_trajectory", "resolve_model",
           "reward_hacking_messages", "rubric_messages", "run_judge", "select_trials", "task_context"]
