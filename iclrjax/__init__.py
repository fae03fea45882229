"""iclrjax: pure-functional JAX reimplementations of ICLR 2026 methods.

Importing any iclrjax module does no JAX work (no arrays, no backend start),
so a launcher can call `jax.distributed.initialize()` after its imports.
"""
