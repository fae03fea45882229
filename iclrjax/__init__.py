"""iclrjax: pure-functional JAX reimplementations of ICLR 2026 methods."""

import os as _os

import jax as _jax

# jaxlib 0.10.2's CPU client occasionally never completes a dispatched
# program (seen in about 1 run in 8 of the scan-compiled PPO loop on a
# 2-core machine: the caller waits on a buffer forever at 0% CPU). Running
# CPU computations inline instead of through async dispatch avoids it. The
# training loops dispatch whole chunks of steps, so the cost is negligible.
# An explicit JAX_CPU_ENABLE_ASYNC_DISPATCH in the environment wins.
if 'JAX_CPU_ENABLE_ASYNC_DISPATCH' not in _os.environ:
  try:
    _jax.config.update('jax_cpu_enable_async_dispatch', False)
  except Exception:  # pylint: disable=broad-except  # option renamed/removed
    pass
