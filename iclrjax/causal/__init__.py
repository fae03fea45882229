"""Causal-effect estimators (front-door learners)."""
