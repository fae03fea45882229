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

`require(module, extra)` imports `module` where it is needed (never at import
time of a method module) and, when it is absent, raises `MissingExtraError`
with one line naming the extra to install; the launchers print that line and
exit 2.
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


def _missing(top: str, extra: str) -> MissingExtraError:
  return MissingExtraError(
      f"{top} is not installed; it comes with the '{extra}' extra: "
      f"pip install 'iclrjax[{extra}]'")


def check(module: str, extra: str) -> None:
  """Raises `MissingExtraError` if `module`'s package is not installed,
  without importing it (some, e.g. gymnax, start the XLA backend on import,
  which must not happen before `jax.distributed.initialize()`)."""
  if extra not in EXTRAS:
    raise ValueError(f'unknown extra {extra!r}; known: {sorted(EXTRAS)}')
  top = module.split('.')[0]
  try:
    spec = importlib.util.find_spec(top)
  except ValueError:  # sys.modules[top] is None or has no spec
    spec = None
  if spec is None:
    raise _missing(top, extra)


def require(module: str, extra: str) -> types.ModuleType:
  """Imports `module` (e.g. 'statsmodels.api'), or raises a one-line
  `MissingExtraError` naming `pip install 'iclrjax[<extra>]'`."""
  if extra not in EXTRAS:
    raise ValueError(f'unknown extra {extra!r}; known: {sorted(EXTRAS)}')
  try:
    return importlib.import_module(module)
  except ModuleNotFoundError as e:
    top = module.split('.')[0]
    if e.name is None or e.name.split('.')[0] != top:
      raise  # the package is there but one of its own imports failed
    raise _missing(top, extra) from e
