"""Figures of the experiments: mean and 95% band over seeds, bar charts.

Series come from metrics.jsonl rows (`Run.rows()`) or from arrays over
seeds; each figure is a PNG, usually under the run's plots/ directory.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
import math
import os
import pathlib
from typing import Any

import numpy as np
import scipy.special

from iclrjax.core import launch
from iclrjax.core import logging as log_lib


def curves(rows: Sequence[Mapping[str, Any]],
           key: str) -> tuple[np.ndarray, np.ndarray]:
  """(steps [T], values [T, num_seeds]) of one metric from metrics rows."""
  steps, vals = [], []
  for r in rows:
    if key in r:
      steps.append(r['step'])
      vals.append(np.atleast_1d(np.asarray(r[key], dtype=np.float64)))
  if not steps:
    return np.zeros((0,)), np.zeros((0, 0))
  return np.asarray(steps), np.stack(vals)


def subplots(nrows: int = 1, ncols: int = 1, **kwargs):
  """`(fig, axes)` like `plt.subplots`, without pyplot's global backend."""
  from matplotlib.figure import Figure  # pylint: disable=g-import-not-at-top
  fig = Figure(figsize=kwargs.pop('figsize', None))
  return fig, fig.subplots(nrows, ncols, **kwargs)


def save_figure(fig, path: str | os.PathLike) -> pathlib.Path:
  """Writes `fig` to `path` (PNG, 100 dpi, legend outside kept)."""
  path = pathlib.Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  fig.savefig(path, dpi=100, bbox_inches='tight')
  return path


def series_style(i: int) -> dict[str, Any]:
  """Colour and line style of the i-th series (10 colours x 4 dashes)."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  colours = matplotlib.colormaps['tab10'].colors
  styles = ('-', '--', ':', '-.')
  return {'color': colours[i % len(colours)],
          'linestyle': styles[(i // len(colours) + i) % len(styles)]}


def outside_legend(ax, fontsize: float = 7, **kwargs) -> None:
  """A legend to the right of `ax`, outside the data."""
  ax.legend(fontsize=fontsize, loc='upper left', bbox_to_anchor=(1.02, 1.0),
            borderaxespad=0.0, frameon=False, **kwargs)


def plot_series(series: Sequence[tuple[str, np.ndarray, np.ndarray]],
                path: str | os.PathLike, *, title: str = '',
                xlabel: str = 'step', ylabel: str = 'value',
                logy: bool = False,
                bounds: tuple[float, float] | None = None) -> pathlib.Path:
  """Plots (label, x [T], values [T, n]) series: mean and 95% band over n.

  The band is clipped to `bounds` (the range the metric cannot leave), else
  at 0 for a series that is never negative; a constant series is labelled
  '(constant)'.
  """
  fig, ax = subplots(figsize=(7.5, 4))
  for i, (label, steps, vals) in enumerate(series):
    if not len(steps):
      continue
    vals = np.asarray(vals, np.float64)
    mean, n = np.nanmean(vals, axis=1), vals.shape[1]
    half = scipy.special.stdtrit(n - 1, 0.975) * (
        np.nanstd(vals, axis=1, ddof=1) / math.sqrt(n)) if n > 1 else (
            np.zeros_like(mean))
    lo, hi = mean - half, mean + half
    if logy:  # a t-band can cross zero; on a log axis stop it at the data
      lo = np.maximum(lo, np.nanmin(vals, axis=1))
    if bounds is not None:
      lo, hi = np.clip(lo, *bounds), np.clip(hi, *bounds)
    elif np.nanmin(vals) >= 0:
      lo = np.maximum(lo, 0.0)
    text = f'{label} (n={n})'
    if np.nanmax(vals) == np.nanmin(vals):
      text += ' (constant)'
    style = series_style(i)
    ax.plot(steps, mean, label=text, **style)
    ax.fill_between(steps, lo, hi, alpha=0.2, color=style['color'],
                    linewidth=0)
  ax.set_xlabel(xlabel)
  ax.set_ylabel(ylabel)
  if logy:
    ax.set_yscale('log')
  if title:
    ax.set_title(title, fontsize=10)
  ax.grid(alpha=0.3)
  if ax.get_legend_handles_labels()[0]:
    outside_legend(ax, fontsize=8)
  return save_figure(fig, path)


def plot_bars(values: Mapping[str, np.ndarray], path: str | os.PathLike, *,
              title: str = '', ylabel: str = 'value',
              bounds: tuple[float, float] | None = None,
              highlight: Sequence[str] = ()) -> pathlib.Path:
  """Compares methods on one metric, {label: values [n]}: a bar at the mean,
  a 95% t-interval (clipped to `bounds`) and a dot per seed; `highlight`
  (the method) in colour, the others grey."""
  labels = list(values)
  fig, ax = subplots(figsize=(max(4.0, 1.1 * len(labels) + 1.5), 4))
  for i, label in enumerate(labels):
    vals = np.atleast_1d(np.asarray(values[label], np.float64))
    n = len(vals)
    mean, half = log_lib.mean_ci95(vals)
    lo, hi = mean - half, mean + half
    if bounds is not None:
      lo, hi = float(np.clip(lo, *bounds)), float(np.clip(hi, *bounds))
    colour = series_style(0)['color'] if label in highlight else '0.6'
    ax.bar(i, mean, color=colour, alpha=0.7, width=0.7)
    ax.errorbar(i, mean, yerr=[[mean - lo], [hi - mean]], color='k',
                capsize=4, linewidth=1)
    jitter = np.linspace(-0.15, 0.15, n) if n > 1 else np.zeros(1)
    ax.scatter(i + jitter, vals, s=10, color='k', zorder=3)
  ax.set_xticks(range(len(labels)))
  many = len(labels) > 3
  ax.set_xticklabels(labels, rotation=20 if many else 0,
                     ha='right' if many else 'center', fontsize=8)
  ax.set_ylabel(ylabel)
  if bounds is not None:
    ax.set_ylim(bottom=bounds[0])
  n = len(np.atleast_1d(values[labels[0]])) if labels else 0
  ax.set_title(f'{title} (mean, 95% CI, dots: {n} seeds)' if title else
               f'mean, 95% CI, dots: {n} seeds', fontsize=10)
  ax.grid(alpha=0.3, axis='y')
  return save_figure(fig, path)


def plot_curves(rows: Sequence[Mapping[str, Any]], keys: Sequence[str],
                path: str | os.PathLike, *, title: str = '',
                xlabel: str = 'step', ylabel: str | None = None,
                labels: Sequence[str] | None = None,
                logy: bool = False) -> pathlib.Path:
  """Plots mean and 95% CI band over seeds of `keys` into one PNG."""
  series = [((labels or keys)[i], *curves(rows, key))
            for i, key in enumerate(keys)]
  return plot_series(series, path, title=title, xlabel=xlabel,
                     ylabel=ylabel or (keys[0] if len(keys) == 1 else 'value'),
                     logy=logy)


def plot_run(r: launch.Run, keys: Sequence[str], name: str,
             **kwargs) -> pathlib.Path:
  """Plots the run's metric `keys` (mean, 95% band) into plots/<name>.png."""
  return plot_curves(r.rows(), keys, r.plots_dir / f'{name}.png', **kwargs)
