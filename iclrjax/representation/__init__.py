"""Representation learning: intervention (delta) embeddings."""
