"""Parity with the papers' released code: fixtures and comparisons.

Each `tests/parity/test_<paper>.py` loads `fixtures/<paper>.npz` (inputs
and the reference's outputs, written by `generate/<paper>.py` running the
released code) and defines

  PAPER: the paper's name (arXiv id);
  FIXTURE: the fixture's name;
  checks() -> list[Check]: our code on the fixture's inputs against the
    reference's outputs, one Check per quantity compared;

and tests that every check is within its tolerance. Where ours differs on
purpose, a test asserts exactly that difference (a Check whose quantity
names it). `python -m experiments.parity` gathers every module's checks
into the parity table (README, RESULTS.md).
"""

from __future__ import annotations

import dataclasses
import json
import pathlib

import numpy as np

FIXTURES = pathlib.Path(__file__).resolve().parent / 'fixtures'


@dataclasses.dataclass(frozen=True)
class Check:
  """`diff` = max |ours - theirs| over the compared arrays (or the stated
  relative error), within `tol`."""
  quantity: str
  diff: float
  tol: float

  @property
  def ok(self) -> bool:
    return bool(np.isfinite(self.diff) and self.diff <= self.tol)


def load(name: str) -> tuple[dict[str, np.ndarray], dict]:
  """The fixture's arrays and its provenance (repo, commit, command, ...)."""
  with np.load(FIXTURES / f'{name}.npz') as f:
    arrays = {k: f[k] for k in f.files}
  meta = json.loads((FIXTURES / f'{name}.json').read_text())
  return arrays, meta


def max_diff(ours, theirs) -> float:
  ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
  if ours.shape != theirs.shape:
    raise ValueError(f'shape {ours.shape} vs the reference {theirs.shape}')
  return float(np.max(np.abs(ours - theirs))) if ours.size else 0.0


def check(quantity: str, ours, theirs, tol: float) -> Check:
  return Check(quantity, max_diff(ours, theirs), tol)


def assert_checks(checks: list[Check]) -> None:
  bad = [c for c in checks if not c.ok]
  assert not bad, '; '.join(f'{c.quantity}: {c.diff:.3g} > {c.tol:.3g}'
                            for c in bad)
