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


def _reusable_summary(cfg_json, commit='abc'):
  import jax  # pylint: disable=g-import-not-at-top
  return {'commit': commit, 'config': cfg_json,
          'backend': jax.default_backend(), 'devices': jax.device_count(),
          'versions': {'jax': jax.__version__}, 'claims': []}


def test_a_finished_run_is_reused_only_at_the_same_config_and_commit(
    tmp_path, monkeypatch):
  from iclrjax.core import launch  # pylint: disable=g-import-not-at-top
  cfg = {'seed': 0, 'net': {'width': 8}}
  run = tmp_path / 'linreg' / 'run'
  run.mkdir(parents=True)
  s = _reusable_summary(cfg)
  (run / 'summary.json').write_text(json.dumps(s))
  monkeypatch.delenv(launch.REUSE_ENV, raising=False)
  assert launch.reusable_run('linreg', cfg, 'abc') is None  # not asked for
  monkeypatch.setenv(launch.REUSE_ENV, str(tmp_path))
  assert launch.reusable_run('linreg', cfg, 'abc') == run
  other = {'seed': 0, 'net': {'width': 16}}
  assert launch.reusable_run('linreg', other, 'abc') is None
  assert launch.reusable_run('linreg', cfg, 'abd') is None
  assert launch.reusable_run('linreg', cfg, 'abc-dirty') is None
  assert launch.reusable_run('fge', cfg, 'abc') is None
  for key, value in (('devices', 10_000), ('backend', 'tpu'),
                     ('versions', {'jax': '0.0.1'}), ('claims_commit', 'x')):
    (run / 'summary.json').write_text(json.dumps({**s, key: value}))
    assert launch.reusable_run('linreg', cfg, 'abc') is None, key


def test_execute_copies_a_reusable_run_only_into_a_new_or_empty_workdir(
    tmp_path, monkeypatch):
  import pytest  # pylint: disable=g-import-not-at-top
  from configs import linreg  # pylint: disable=g-import-not-at-top
  from experiments.linreg import EXPERIMENT  # pylint: disable=g-import-not-at-top
  from iclrjax.core import launch  # pylint: disable=g-import-not-at-top
  cfg = linreg.get_config('smoke')
  cfg_json = launch.config_lib.to_dict(cfg)
  src = tmp_path / 'root' / 'linreg' / 'run'
  src.mkdir(parents=True)
  s = _reusable_summary(cfg_json)
  (src / 'summary.json').write_text(json.dumps(s))
  (src / 'config.json').write_text(json.dumps(cfg_json))
  monkeypatch.setattr(launch, 'code_commit', lambda: 'abc')
  monkeypatch.setenv(launch.REUSE_ENV, str(tmp_path / 'root'))
  assert EXPERIMENT.execute(cfg, tmp_path / 'new') == s  # nothing computed
  (tmp_path / 'empty').mkdir()
  assert EXPERIMENT.execute(cfg, tmp_path / 'empty') == s
  assert json.loads((tmp_path / 'new' / 'config.json').read_text()) == cfg_json
  # A workdir holding another run is refused, never merged into.
  other = tmp_path / 'other'
  other.mkdir()
  (other / 'config.json').write_text(json.dumps({**cfg_json, 'seed': 5}))
  with pytest.raises(launch.config_lib.ConfigError, match='different config'):
    EXPERIMENT.execute(cfg, other)
  assert json.loads((other / 'config.json').read_text())['seed'] == 5
