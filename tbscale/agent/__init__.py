"""Agents: the bash agent loop in the style of mini-swe-agent, its prompts, the action-policy seam
it calls, and the oracle and nop agents."""
