"""Optional dependencies, grouped as the package's extras (`EXTRAS`).

`pip install iclrjax` installs what every paper needs; a family's heavier
dependencies come with `pip install 'iclrjax[<extra>]'` (or `[all]`).
`require(module, extra)` imports `module` where it is needed (never when a
method module is imported), or raises a one-line `MissingExtraError` naming
the extra; the launchers print that line and exit 2.
"""

from __future__ import annotations

import importlib
import importlib.util
import types

# Each extra and the modules it provides (pyproject.toml's optional
# dependencies; tests/core/test_extras.py checks the two agree).
EXTRAS: dict[str, tuple[str, ...]] = {
    'rl': ('gymnax', 'brax', 'mujoco', 'flowjax', 'paramax'),
    'causal': ('xgboost',),             # the front-door XGBoost variant
    'stats': ('lightgbm', 'blackjax'),  # FastMix's RegMix, SGLD
    'timeseries': ('statsmodels',),     # its real series
    'graph': ('networkx',),             # karate club
    'snn': ('mnist1d', 'h5py'),         # h5py: SHD
}


class MissingExtraError(ImportError):
  """An optional dependency is absent; the message says which extra has it."""


def _missing(module: str, extra: str) -> MissingExtraError:
  if extra not in EXTRAS:
    raise ValueError(f'unknown extra {extra!r}; known: {sorted(EXTRAS)}')
  return MissingExtraError(
      f"{module.split('.')[0]} is not installed; it comes with the '{extra}' "
      f"extra: pip install 'iclrjax[{extra}]'")


def check(module: str, extra: str) -> None:
  """Raises `MissingExtraError` if `module`'s package is not installed,
  without importing it (some, e.g. gymnax, start the XLA backend on import,
  which must not happen before `jax.distributed.initialize()`)."""
  error = _missing(module, extra)
  try:
    spec = importlib.util.find_spec(module.split('.')[0])
  except ValueError:  # sys.modules[top] is None or has no spec
    spec = None
  if spec is None:
    raise error


def require(module: str, extra: str) -> types.ModuleType:
  """Imports `module` (e.g. 'statsmodels.api'), or raises `MissingExtraError`."""
  error = _missing(module, extra)
  try:
    return importlib.import_module(module)
  except ModuleNotFoundError as e:
    if e.name is None or e.name.split('.')[0] != module.split('.')[0]:
      raise  # the package is there but one of its own imports failed
    raise error from e
