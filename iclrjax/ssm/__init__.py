"""Diagonal state-space models and their state-tracking tasks."""
