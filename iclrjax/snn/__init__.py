"""Spiking neural networks (LIF, PLIF, ALIF, DGN cells) trained by BPTT."""
