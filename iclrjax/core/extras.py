"""Optional dependencies, grouped as the package's extras.

`pip install iclrjax` installs what every paper needs (JAX, Flax, Optax,
Orbax, TFDS, ...). A family's heavier dependencies are an extra:

  pip install 'iclrjax[rl]'          # gymnax, brax, MuJoCo/MJX, flowjax
  pip install 'iclrjax[causal]'      # xgboost (the front-door XGBoost variant)
  pip install 'iclrjax[stats]'       # lightgbm (FastMix's RegMix), blackjax (SGLD)
  pip install 'iclrjax[timeseries]'  # statsmodels (its real series)
  pip install 'iclrjax[graph]'       # networkx (karate club)
  pip install 'iclrjax[snn]'         # mnist1d, h5py (SHD)
  pip install 'iclrjax[all]'         # all of them

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
    'causal': ('xgboost',),
    'stats': ('lightgbm', 'blackjax'),
    'timeseries': ('statsmodels',),
    'graph': ('networkx',),
    'snn': ('mnist1d', 'h5py'),
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
