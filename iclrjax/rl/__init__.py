"""Reinforcement-learning components."""
