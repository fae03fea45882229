"""Multi-user GP bandits on a user graph (Laplacian Kernelized Bandit)."""
