"""Small decoder LM substrate: model, KV-cached sampling, GRPO, synthetic tasks."""
