"""The vocabulary every layer shares: model completions and usage, the one bash action of a turn,
trajectory events and trial results. Nothing here imports another tbscale package."""

from tbscale.types.actions import BASH_TOOL, FINISH_MARKER, Action, ends_attempt, parse_action
from tbscale.types.completion import CallResult, CallSink, Completion, Usage, sum_usage

__all__ = ["Action", "BASH_TOOL", "CallResult", "CallSink", "Completion", "FINISH_MARKER", "Usage", "ends_attempt",
           "parse_action", "sum_usage"]
