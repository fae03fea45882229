"""median_time: the call count it times and the median it returns."""

import itertools

from experiments import timing


def _fake_clock(monkeypatch, durations):
  """perf_counter advances by the next duration at each fn() call."""
  now = [0.0]
  it = itertools.cycle(durations)

  def fn():
    now[0] += next(it)

  monkeypatch.setattr(timing.time, 'perf_counter', lambda: now[0])
  return fn


def test_median_of_repeats_after_one_compiling_call(monkeypatch):
  # The first (compiling) call takes 100 s and is not timed.
  fn = _fake_clock(monkeypatch, [100.0, 1.0, 3.0, 2.0])
  median, calls = timing.median_time(fn, repeats=3)
  assert calls == 3
  assert median == 2.0


def test_budget_cuts_calls_but_not_below_min_calls(monkeypatch):
  fn = _fake_clock(monkeypatch, [2.0])
  assert timing.median_time(fn, repeats=10, budget_s=5.0)[1] == 2
  assert timing.median_time(fn, repeats=10, budget_s=1.0,
                            min_calls=3)[1] == 3
