"""Post-hoc LLM pipelines over finished runs: the rubric and reward-hacking judge (`tbscale
judge`) and behavioural self-rewarding (`tbscale rewards`), sharing one model resolver, one
judgement call, one resumable store and one manifest format (pipeline.py)."""
