"""Shared test setup: CPU only, quiet runs, helpers to run launchers."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tempfile

import filelock
import pytest

os.environ.setdefault('JAX_PLATFORMS', 'cpu')
os.environ.setdefault('ICLRJAX_QUIET', '1')
# The default suite is compile-bound (tiny smoke sizes): XLA's CPU backend at
# LLVM -O0 compiles ~20% faster (measured on the LM tests: 128 -> 111 s of
# summed durations) and the programs stay the same HLO. XLA's older CPU
# fusion emitters compile about twice as fast again (a Flow2GAN GAN step:
# 8.2 -> 4.5 s; the diffusion tests: 1436 -> 1078 s of summed durations on
# 2 cores, though a few execution-bound float64 tests run slower). Results
# agree to float rounding (a term XLA recomputes inside a fusion may round
# differently). Set XLA_FLAGS to override; launchers and notebooks started
# by the tests inherit it. Programs compiled through `OPTIMIZED` (below)
# override these two flags per compile.
os.environ.setdefault('XLA_FLAGS', '--xla_backend_optimization_level=0 '
                      '--xla_cpu_use_fusion_emitters=false')

# One XLA compilation cache per test run, shared by the xdist workers and by
# the processes the tests start (launchers, notebook kernels), so a program
# compiled once (e.g. a paper's smoke run, which its launcher test and its
# notebook both execute) is not compiled again. Fresh for every run: the
# durations a run reports include each compile once.
_RUN = os.environ.get('PYTEST_XDIST_TESTRUNUID') or f'pid{os.getpid()}'
os.environ.setdefault('JAX_COMPILATION_CACHE_DIR', str(
    pathlib.Path(tempfile.gettempdir()) / f'iclrjax-xla-{_RUN}'))
# The processes the tests start cache every program: a paper's notebook
# replays its smoke run program by program (measured on arbuffer's smoke run:
# 23 s again with the 0.5 s threshold, 14 s with none, +3 s for the first
# run's writes). The test processes themselves, whose programs are mostly
# one-offs, keep a 0.5 s threshold.
os.environ.setdefault('JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS', '0')
os.environ.setdefault('JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES', '0')
import jax  # pylint: disable=g-import-not-at-top,wrong-import-position
jax.config.update('jax_compilation_cache_dir',
                  os.environ['JAX_COMPILATION_CACHE_DIR'])
jax.config.update('jax_persistent_cache_min_compile_time_secs', 0.5)
jax.config.update('jax_persistent_cache_min_entry_size_bytes', 0)

# Execution-bound test programs (Monte Carlo over many draws, samplers run
# on thousands of samples) opt back into XLA's optimizing CPU backend per
# compile: QDPM's u-MC floor program runs 10.1 s as the flags above compile
# it and 2.0 s at level 2 (compile 1.1 -> 1.6 s), with the same numbers.
OPTIMIZED = {'xla_backend_optimization_level': 2,
             'xla_cpu_use_fusion_emitters': True}


def jit_optimized(fn=None, **kwargs):
  """`jax.jit` compiled with `OPTIMIZED`: for a test program that runs
  longer than it compiles (usable as a decorator)."""
  if fn is None:
    return lambda f: jit_optimized(f, **kwargs)
  return jax.jit(fn, compiler_options=OPTIMIZED, **kwargs)


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


# One smoke launcher run per experiment per test run, shared by the xdist
# workers (a file lock per experiment): the launcher test checks its run
# record and a paper's tests read the same summary, instead of each paying
# for its own smoke run.
SMOKE_ROOT = pathlib.Path(tempfile.gettempdir()) / f'iclrjax-smoke-{_RUN}'


def smoke_launch(name: str) -> tuple[pathlib.Path, dict[str, str]]:
  """(workdir, {'returncode', 'stderr'}) of `python -m experiments.<name>
  --config=configs/<name>.py:smoke`, run once per test run."""
  SMOKE_ROOT.mkdir(parents=True, exist_ok=True)
  wd = SMOKE_ROOT / name / 'run'
  status = SMOKE_ROOT / name / 'status.json'
  with filelock.FileLock(str(SMOKE_ROOT / f'{name}.lock')):
    if not status.exists():
      proc = run_module(f'experiments.{name}',
                        f'--config=configs/{name}.py:smoke', f'--workdir={wd}')
      status.write_text(json.dumps({'returncode': proc.returncode,
                                    'stderr': proc.stderr[-4000:]}))
  return wd, json.loads(status.read_text())


def find_claim(summary: dict, prefix: str) -> dict:
  """The one claim of a summary whose statement starts with `prefix`."""
  hits = [c for c in summary['claims'] if c['claim'].startswith(prefix)]
  assert len(hits) == 1, (prefix, [c['claim'] for c in summary['claims']])
  return hits[0]


def smoke_summary(name: str) -> dict:
  """The shared smoke run's summary.json (fails with its stderr if the run
  failed)."""
  wd, st = smoke_launch(name)
  assert st['returncode'] == 0, st['stderr']
  return json.loads((wd / 'summary.json').read_text())


def pytest_collection_modifyitems(config, items):
  """Notebook tests first. Each runs its paper's smoke launcher (once per
  test run, `smoke_launch`) and then the notebook, which reuses that run;
  placed first, a notebook test never waits on the lock of the same
  launcher running on another xdist worker (the launcher's own test, later,
  finds the run done), so no wait is counted in any test's duration."""
  del config
  first = [i for i in items
           if i.nodeid.startswith('tests/test_notebooks.py::test_notebook_runs')]
  if first:
    ids = {id(i) for i in first}
    items[:] = first + [i for i in items if id(i) not in ids]
