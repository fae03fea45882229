"""Statistical-learning methods (weak-to-strong generalization, ...)."""
