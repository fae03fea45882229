"""Shared test setup: CPU only, quiet runs, helpers to run launchers."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

os.environ.setdefault('JAX_PLATFORMS', 'cpu')
os.environ.setdefault('ICLRJAX_QUIET', '1')

ROOT = pathlib.Path(__file__).resolve().parents[1]


def run_module(module: str, *args: str, env: dict[str, str] | None = None,
               timeout: float = 600, cwd: pathlib.Path | None = None
               ) -> subprocess.CompletedProcess:
  """Runs `python -m module args...` from the repo root; captures output."""
  full_env = dict(os.environ)
  full_env.pop('PYTEST_CURRENT_TEST', None)
  full_env.update({'JAX_PLATFORMS': 'cpu', 'ICLRJAX_QUIET': '1'})
  full_env.update(env or {})
  return subprocess.run([sys.executable, '-m', module, *args],
                        cwd=cwd or ROOT, env=full_env, capture_output=True,
                        text=True, timeout=timeout, check=False)


def assert_missing_data_stops_early(experiment, cfg, tmp_path, dataset):
  """`experiment.execute(cfg)` with absent data: one-line error naming
  `dataset`, raised before the workdir exists."""
  cfg.data_dir = str(tmp_path / 'data')
  wd = tmp_path / 'run'
  with pytest.raises(FileNotFoundError, match=f'^dataset {dataset} is not'):
    experiment.execute(cfg, workdir=wd)
  assert not wd.exists()


@pytest.fixture
def run_launcher():
  return run_module
