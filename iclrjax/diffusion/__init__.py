"""Diffusion and flow models: schedules, networks, samplers, likelihoods, and
the papers built on them (QDPM, BWCache, ...)."""
