"""Model access through litellm: the LLM adapter (samples, retries, usage), prices, failure
classification with a per-model circuit breaker, JSON replies, and provider plugins."""
