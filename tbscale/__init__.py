"""tbscale: run LLM terminal and coding agents under test-time-scaling strategies and measure
what the extra compute buys."""

__version__ = "0.1.0"
SCHEMA_VERSION = 2  # of trials.jsonl lines and trajectory events; bump on breaking changes (1 is still read)
