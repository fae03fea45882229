"""Wall-clock timing shared by experiments and benchmarks (never asserted)."""

from __future__ import annotations

import statistics
import time
from typing import Callable


def median_time(fn: Callable[[], object], repeats: int,
                budget_s: float | None = None, *, min_calls: int = 1,
                warmup_s: float = 0.0) -> tuple[float, int]:
  """(median seconds, calls timed) of `fn()`, a call that blocks.

  Warm-up: one call (it compiles), then more until `warmup_s` have passed.
  With `budget_s`, fewer than `repeats` timed calls (at least `min_calls`)
  when the last warm-up call shows they would take longer.
  """
  def timed():
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0

  last, start = timed(), time.perf_counter()
  while time.perf_counter() - start < warmup_s:
    last = timed()
  if budget_s is not None:
    repeats = min(repeats, int(budget_s / max(last, 1e-9)))
  repeats = max(min_calls, 1, repeats)
  return statistics.median(timed() for _ in range(repeats)), repeats
