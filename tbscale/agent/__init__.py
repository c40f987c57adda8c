"""The bash agent: prompts, one action per turn, observations, limits."""
