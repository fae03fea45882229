"""Scale-out for every experiment (issue 48), checked without running one.

On 8 forced host devices each experiment's smoke training chunks are lowered
on the mesh `Run.train` builds: a chunk that has a batch splits it over
'data', a chunk that declares none marks none. One family trainer per family
runs a chunk on one device and on the mesh from the same init: equal up to
float rounding (slow). `benchmarks.paper_variants --run` works at smoke
size.
"""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.test_launchers import NAMES

EIGHT = dict(os.environ, JAX_PLATFORMS='cpu',
             XLA_FLAGS='--xla_force_host_platform_device_count=8')


def _bench(*args, env=None, timeout=900):
  proc = subprocess.run(
      [sys.executable, '-m', 'benchmarks.paper_variants', *args], cwd=ROOT,
      capture_output=True, text=True, timeout=timeout, check=False,
      env=env or dict(os.environ, JAX_PLATFORMS='cpu'))
  assert proc.returncode == 0, proc.stderr[-3000:]
  return proc.stdout


def test_every_training_chunk_splits_its_batch_or_declares_none():
  out = json.loads(_bench(f'--splits={",".join(NAMES)}', '--variant=smoke',
                          env=EIGHT).strip().splitlines()[-1])
  assert sorted(out) == sorted(NAMES)
  for name, rows in out.items():
    assert rows, f'{name}: no training program'
    for r in rows:
      where = f"{name}/{r['program']}: {r['how']}"
      if r['batch_axis']:
        assert r['batch'] and (r['split'] or r['data'] == 1), where
        assert r['constrained'] or r['data'] == 1, where
      else:
        assert not r['batch'], where


# One trainer per family: supervised, RL rollout, diffusion, LM.
FAMILY_TRAINERS = ['linreg', 'causal_delta', 'kernel_ppo', 'qdpm', 'lm_grpo']


@pytest.mark.slow  # ~2-5 min on 2 cores: every program compiled twice
def test_family_trainers_match_one_device():
  out = json.loads(_bench(f'--compare={",".join(FAMILY_TRAINERS)}',
                          '--variant=smoke', env=EIGHT
                          ).strip().splitlines()[-1])
  for name, rows in out.items():
    assert rows, name
    for r in rows:
      assert r['max_rel_diff'] < 1e-4, (name, r)


def test_run_mode_times_every_program_at_smoke_size():
  text = _bench('--only=linreg', '--variant=smoke', '--run')
  assert 'error' not in text, text
  assert text.count('| linreg |') == 2  # program row and summary row


def test_fits_reads_one_device_then_the_mesh():
  """The cost table's verdict: 'yes' on one 80 GB device, else the smallest
  mesh whose per-device peak fits, else NO; a mesh-only record never reads
  'yes'."""
  from benchmarks import paper_variants as pv  # pylint: disable=g-import-not-at-top
  row = dict(experiment='x', program='p', params=1, steps=1, calls=2,
             compile_s=1.0, flops_per_call=1e12, while_loop=False)
  fits = lambda *rows: pv.summarize(list(rows), 0.3)['x']['fits']
  one = lambda gb: dict(row, devices=1, peak_bytes=gb * 1e9)
  mesh = lambda gb: dict(row, devices=8, peak_bytes=gb * 1e9)
  assert fits(one(70)) == 'yes'
  assert fits(one(200)) == 'NO'
  assert fits(one(200), mesh(50)) == 'on 8 devices'
  assert fits(one(200), mesh(90)) == 'NO'
  assert fits(mesh(50)) == 'on 8 devices' and fits(mesh(90)) == 'NO'
  assert pv.summarize([one(200), mesh(50)], 0.3)['x']['flops'] == 2e12
