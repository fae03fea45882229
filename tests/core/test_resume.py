"""Resume is exact whatever the kill point: metrics.jsonl byte for byte.

linreg smoke: 600 steps in chunks of 50, a checkpoint every 3 chunks (steps
150, 300, ...). A run killed at step 100 has logged rows but has no
checkpoint; one killed at step 200 has logged rows past its checkpoint at
150. Rerunning the same command must leave exactly the files of a run that
was never killed (TensorBoard events included: one point per logged step).
"""

import json
import pathlib
import sys

from tensorboard.backend.event_processing import event_accumulator

from iclrjax.core import loop
from tests.conftest import run_module

ARGS = ('--config=configs/linreg.py:smoke',)


def _run(wd, kill_at=None):
  env = {loop.FAULT_ENV: str(kill_at)} if kill_at else {}
  return run_module('experiments.linreg', *ARGS, f'--workdir={wd}', env=env)


def _tb_steps(wd, tag='loss'):
  acc = event_accumulator.EventAccumulator(str(wd / 'tensorboard'))
  acc.Reload()
  return [e.step for e in acc.Scalars(tag)]


def test_killed_runs_resume_to_the_uninterrupted_record(tmp_path):
  ref = tmp_path / 'ref'
  assert _run(ref).returncode == 0
  ref_bytes = (ref / 'metrics.jsonl').read_bytes()
  ref_steps = [json.loads(l)['step'] for l in ref_bytes.splitlines()]
  assert ref_steps == list(range(50, 601, 50))
  assert _tb_steps(ref) == ref_steps
  for kill_at in (100, 200):  # before the first checkpoint; after it
    wd = tmp_path / f'kill{kill_at}'
    killed = _run(wd, kill_at)
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert not (wd / 'summary.json').exists()
    logged = (wd / 'metrics.jsonl').read_bytes()
    assert logged and ref_bytes.startswith(logged)  # rows up to the kill
    again = _run(wd)
    assert again.returncode == 0, again.stderr[-3000:]
    assert (wd / 'metrics.jsonl').read_bytes() == ref_bytes, kill_at
    assert _tb_steps(wd) == ref_steps, kill_at


def test_tensorboard_is_installed_with_the_package():
  """`tensorboard --logdir runs/` works after the one install command."""
  assert (pathlib.Path(sys.executable).parent / 'tensorboard').exists()


def test_a_finished_run_is_reused_only_at_the_same_config_and_commit(
    tmp_path, monkeypatch):
  from iclrjax.core import launch  # pylint: disable=g-import-not-at-top
  cfg = {'seed': 0, 'net': {'width': 8}}
  run = tmp_path / 'linreg' / 'run'
  run.mkdir(parents=True)
  (run / 'summary.json').write_text(json.dumps(
      {'commit': 'abc', 'config': cfg}))
  monkeypatch.delenv(launch.REUSE_ENV, raising=False)
  assert launch.reusable_run('linreg', cfg, 'abc') is None  # not asked for
  monkeypatch.setenv(launch.REUSE_ENV, str(tmp_path))
  assert launch.reusable_run('linreg', cfg, 'abc') == run
  other = {'seed': 0, 'net': {'width': 16}}
  assert launch.reusable_run('linreg', other, 'abc') is None
  assert launch.reusable_run('linreg', cfg, 'abd') is None
  assert launch.reusable_run('linreg', cfg, 'abc-dirty') is None
  assert launch.reusable_run('fge', cfg, 'abc') is None
