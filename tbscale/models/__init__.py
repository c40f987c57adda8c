"""Model access: litellm wrapper and the embedded simulated provider."""
