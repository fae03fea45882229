"""Run records: metrics.jsonl, TensorBoard events, progress, CIs.

`metrics.jsonl` holds a row per logged step, each metric a list over seeds:
`{"step": 200, "loss": [0.12, 0.11, 0.13]}`; TensorBoard gets seed means.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
import json
import math
import os
import pathlib
import shutil
import sys
import time
from typing import Any

from absl import logging
import numpy as np
import scipy.special

METRICS_FILE = 'metrics.jsonl'


def mean_ci95(values: Sequence[float] | np.ndarray) -> tuple[float, float]:
  """Mean and half-width of a Student-t 95% confidence interval (0 for one
  value)."""
  x = np.asarray(values, dtype=np.float64).reshape(-1)
  mean = float(np.mean(x))
  if x.size < 2:
    return mean, 0.0
  sem = float(np.std(x, ddof=1) / math.sqrt(x.size))
  return mean, float(scipy.special.stdtrit(x.size - 1, 0.975) * sem)


def summarize(values: Sequence[float] | np.ndarray) -> dict[str, Any]:
  """`{"mean", "ci95", "per_seed"}` as in summary.json's metrics."""
  x = np.asarray(values, dtype=np.float64).reshape(-1)
  mean, ci = mean_ci95(x)
  return {'mean': mean, 'ci95': ci, 'per_seed': [float(v) for v in x]}


def read_metrics(workdir: str | os.PathLike) -> list[dict[str, Any]]:
  """All rows of `workdir/metrics.jsonl` (empty if none)."""
  path = pathlib.Path(workdir) / METRICS_FILE
  if not path.exists():
    return []
  rows = []
  with path.open() as f:
    for line in f:
      line = line.strip()
      if not line:
        continue
      try:
        rows.append(json.loads(line))
      except json.JSONDecodeError:
        # A kill mid-write leaves at most one torn last line; drop it.
        logging.warning('Dropping torn line in %s', path)
  return rows


class MetricWriter:
  """Appends per-seed metrics to metrics.jsonl and mean scalars to TensorBoard."""

  def __init__(self, workdir: str | os.PathLike, *, enabled: bool = True,
               tensorboard: bool = True):
    self.workdir = pathlib.Path(workdir)
    self.path = self.workdir / METRICS_FILE
    self.tb_dir = self.workdir / 'tensorboard'
    self.enabled = enabled
    self._tb = None
    self._use_tb = enabled and tensorboard
    # False until the first truncate has checked what a killed process may
    # have left (rows past its checkpoint, TensorBoard out of step).
    self._synced = False
    if enabled:
      self.workdir.mkdir(parents=True, exist_ok=True)
      if self._use_tb:
        self._open_tb()

  def _open_tb(self) -> None:
    from tensorboardX import SummaryWriter  # pylint: disable=g-import-not-at-top
    self._tb = SummaryWriter(str(self.tb_dir))

  def truncate(self, last_step: int, phase: str | None = None) -> None:
    """Drops rows of `phase` after `last_step` (logged after the checkpoint
    a resumed run restarts from), so the file equals an uninterrupted run's;
    TensorBoard events cannot be cut, so they are rewritten from the rest."""
    synced, self._synced = self._synced, True
    if not self.enabled or not self.path.exists():
      return
    old = read_metrics(self.workdir)
    rows = [r for r in old
            if r['step'] <= last_step or r.get('phase') != phase]
    changed = len(rows) != len(old) or not self.path.read_bytes().endswith(
        b'\n')
    if changed:
      tmp = self.path.with_suffix('.jsonl.tmp')
      tmp.write_text(''.join(json.dumps(r) + '\n' for r in rows))
      os.replace(tmp, self.path)
    if self._use_tb and (changed or not synced):
      self._rewrite_tb(rows)

  def _rewrite_tb(self, rows: Sequence[Mapping[str, Any]]) -> None:
    if self._tb is not None:
      self._tb.close()
    shutil.rmtree(self.tb_dir, ignore_errors=True)
    self._open_tb()
    for r in rows:
      self._tb_scalars(r['step'], {k: v for k, v in r.items()
                                   if k not in ('step', 'phase')})
    self._tb.flush()

  def _tb_scalars(self, step: int, metrics: Mapping[str, Any]) -> None:
    # The mean over the seeds where the metric is finite: NaN marks a value
    # a step does not have (e.g. FGE's explore pick on an iteration without
    # one) and TensorBoard cannot draw +-inf (metrics.jsonl keeps both); a
    # step where no seed has a finite value writes no point.
    for k, v in metrics.items():
      a = np.asarray(v, dtype=np.float64).ravel()
      a = a[np.isfinite(a)]
      if a.size:
        self._tb.add_scalar(k, float(np.mean(a)), int(step))

  def write(self, step: int, metrics: Mapping[str, Any],
            phase: str | None = None) -> None:
    """Writes one row; each value is a scalar or an array over seeds."""
    if not self.enabled:
      return
    row = {'step': int(step), **({} if phase is None else {'phase': phase}),
           **{k: np.asarray(v).tolist() for k, v in metrics.items()}}
    with self.path.open('a') as f:
      f.write(json.dumps(row) + '\n')
    if self._tb is not None:
      self._tb_scalars(step, metrics)

  def write_rows(self, steps: Iterable[int],
                 metrics: Mapping[str, np.ndarray],
                 phase: str | None = None) -> None:
    """Writes rows for `steps` from arrays shaped [num_seeds, len(steps)]."""
    for j, step in enumerate(steps):
      self.write(step, {k: np.asarray(v)[:, j] for k, v in metrics.items()},
                 phase=phase)

  def write_text(self, tag: str, text: str) -> None:
    if self.enabled and self._tb is not None:
      self._tb.add_text(tag, text)

  def flush(self) -> None:
    if self._tb is not None:
      self._tb.flush()

  def close(self) -> None:
    if self._tb is not None:
      self._tb.close()
      self._tb = None


def quiet_default() -> bool:
  """Whether to log lines instead of drawing a progress bar: ICLRJAX_QUIET=1
  (or 0) if set, else quiet under CI and pytest and when stderr is not a
  terminal, but a bar in Jupyter."""
  env = os.environ.get('ICLRJAX_QUIET', '')
  if env:
    return env != '0'
  if os.environ.get('CI') or 'PYTEST_CURRENT_TEST' in os.environ:
    return True
  return 'ipykernel' not in sys.modules and not sys.stderr.isatty()


class Progress:
  """A tqdm bar with steps/s and ETA; when quiet (CI, pytest, redirected
  output) a log line at most every `log_every_s` seconds instead."""

  def __init__(self, total: int, initial: int = 0, *, desc: str = '',
               quiet: bool | None = None, log_every_s: float = 30.0):
    self.total, self.n, self.desc = total, initial, desc
    self._start, self._t0 = initial, time.perf_counter()
    self._last, self._every = self._t0, log_every_s
    self._bar = None
    if not (quiet_default() if quiet is None else quiet):
      from tqdm import auto as tqdm  # pylint: disable=g-import-not-at-top
      self._bar = tqdm.tqdm(total=total, initial=initial, desc=desc,
                            unit='step', dynamic_ncols=True)

  def update(self, n: int, postfix: Mapping[str, float] | None = None):
    self.n += n
    text = {k: f'{v:.4g}' for k, v in (postfix or {}).items()}
    if self._bar is not None:
      self._bar.update(n)
      if text:
        self._bar.set_postfix(text, refresh=False)
      return
    now = time.perf_counter()
    if now - self._last >= self._every or self.n >= self.total:
      rate = (self.n - self._start) / max(now - self._t0, 1e-9)
      eta = (self.total - self.n) / rate if rate > 0 else float('inf')
      logging.info('%s step %d/%d (%.1f steps/s, ETA %.0fs)%s', self.desc,
                   self.n, self.total, rate, eta,
                   ''.join(f' {k}={v}' for k, v in text.items()))
      self._last = now

  def close(self):
    if self._bar is not None:
      self._bar.close()
