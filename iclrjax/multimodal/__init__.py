"""Multimodal fusion methods."""
