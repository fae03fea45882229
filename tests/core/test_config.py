"""Config validation: errors name the field, the value and what is allowed."""

import ml_collections
import pytest

from iclrjax.core import config as cfg_lib
from tests.conftest import run_module

SCHEMA = {
    'seed': cfg_lib.Int(min=0),
    'lr': cfg_lib.Float(min=0.0, min_inclusive=False, max=1.0),
    'env.name': cfg_lib.Choice('CartPole-v1', 'Acrobot-v1'),
    'use_norm': cfg_lib.Bool(),
    'widths': cfg_lib.Seq(item=cfg_lib.Int(min=1), min_len=1),
    'tag': cfg_lib.Str(required=False),
    'schedule_p': cfg_lib.Float(nullable=True),
}


def good_dict():
  return {'seed': 0, 'lr': 0.1, 'env': {'name': 'CartPole-v1'},
          'use_norm': True, 'widths': (64, 64), 'schedule_p': None}


def good():
  return ml_collections.ConfigDict(good_dict())


def test_good_config_passes():
  cfg_lib.validate(good(), SCHEMA)


@pytest.mark.parametrize('field,value,fragment', [
    ('seed', -1, 'an integer >= 0'),
    ('seed', 1.5, 'an integer'),
    ('seed', True, 'an integer'),
    ('lr', 0.0, '> 0.0'),
    ('lr', 2.0, '<= 1.0'),
    ('lr', float('nan'), 'finite'),
    ('lr', 'fast', 'a finite number'),
    ('env.name', 'Cartpole-v1', "did you mean 'CartPole-v1'"),
    ('use_norm', 1, 'True or False'),
    ('widths', (64, 0), 'item 1'),
    ('widths', (), 'at least 1'),
])
def test_bad_value_names_field_value_and_allowed(field, value, fragment):
  d = good_dict()
  if '.' in field:
    a, b = field.split('.')
    d[a][b] = value
  else:
    d[field] = value
  cfg = ml_collections.ConfigDict(d)
  with pytest.raises(cfg_lib.ConfigError) as e:
    cfg_lib.validate(cfg, SCHEMA)
  msg = str(e.value)
  assert e.value.field == field
  assert msg.startswith(f'config.{field}=')
  assert repr(value) in msg
  assert fragment in msg
  assert '\n' not in msg


def test_missing_and_unknown_fields():
  cfg = good()
  del cfg['use_norm']
  with pytest.raises(cfg_lib.ConfigError, match='config.use_norm.*missing'):
    cfg_lib.validate(cfg, SCHEMA)
  cfg = good()
  cfg.lrr = 0.1
  with pytest.raises(cfg_lib.ConfigError, match="unknown field.*'lr'"):
    cfg_lib.validate(cfg, SCHEMA)
  cfg_lib.validate(cfg, SCHEMA, allow_extra=True)


def test_optional_and_nullable():
  cfg = good()
  cfg_lib.validate(cfg, SCHEMA)  # 'tag' absent: optional
  with cfg.unlocked():
    cfg.tag = 3
  with pytest.raises(cfg_lib.ConfigError, match='config.tag=3'):
    cfg_lib.validate(cfg, SCHEMA)


def test_choice_does_not_confuse_bool_and_int():
  spec = cfg_lib.Choice(0, 1)
  assert spec.check(1) is None
  assert spec.check(True) is not None


# -- constraints on top of the default config ---------------------------------
CONSTRAINTS = {
    'seed': cfg_lib.Int(min=0),
    'lr': cfg_lib.Float(min=0.0, min_inclusive=False, max=1.0),
    'env.name': cfg_lib.Choice('CartPole-v1', 'Acrobot-v1'),
    'widths': cfg_lib.Seq(item=cfg_lib.Int(min=1), min_len=1),
    'schedule_p': cfg_lib.Float(nullable=True),
}


def default_dict():
  return {**good_dict(), 'num_seeds': 2, 'momentum': 0.9, 'tag': 'run',
          'steps': 10, 'names': ('a', 'b'), 'extra': None}


DEFAULT = ml_collections.ConfigDict(default_dict())


def with_value(path, value):
  d = default_dict()
  node = d
  *parents, leaf = path.split('.')
  for p in parents:
    node = node[p]
  node[leaf] = value
  return ml_collections.ConfigDict(d)


def test_the_default_passes_and_a_constraint_binds():
  cfg_lib.validate(DEFAULT, CONSTRAINTS, default=DEFAULT)
  with pytest.raises(cfg_lib.ConfigError, match=r'config.lr=0.0 .*> 0.0'):
    cfg_lib.validate(with_value('lr', 0.0), CONSTRAINTS, default=DEFAULT)


@pytest.mark.parametrize('field,value', [
    ('momentum', 'fast'), ('use_norm', 1), ('steps', 2.5), ('tag', 3)])
def test_ml_collections_keeps_the_default_type(field, value):
  """An unconstrained field is typed by ml_collections, not by us."""
  cfg = ml_collections.ConfigDict(default_dict())
  with pytest.raises(TypeError, match=field):
    setattr(cfg, field, value)


def test_unknown_and_missing_fields_against_the_default():
  cfg = ml_collections.ConfigDict(default_dict())
  cfg.momentom = 0.5
  with pytest.raises(cfg_lib.ConfigError) as e:
    cfg_lib.validate(cfg, CONSTRAINTS, default=DEFAULT)
  assert str(e.value) == (
      "config.momentom=0.5 is invalid: unknown field (not read by this "
      "experiment); did you mean 'momentum'?")
  cfg = ml_collections.ConfigDict(default_dict())
  del cfg['steps']
  with pytest.raises(cfg_lib.ConfigError, match='config.steps.*missing'):
    cfg_lib.validate(cfg, CONSTRAINTS, default=DEFAULT)


def test_a_field_only_some_variants_set():
  constraints = {**CONSTRAINTS, 'warmup': cfg_lib.Int(min=0, required=False)}
  cfg_lib.validate(DEFAULT, constraints, default=DEFAULT)
  cfg_lib.validate(with_value('warmup', 3), constraints, default=DEFAULT)
  with pytest.raises(cfg_lib.ConfigError, match=r'config.warmup=-1 .*>= 0'):
    cfg_lib.validate(with_value('warmup', -1), constraints, default=DEFAULT)


def test_dict_sub_config_whose_keys_vary():
  default = ml_collections.ConfigDict(
      {'seed': 0, 'data_args': {'num_samples': 100, 'seed': 0},
       'noise': {'insert': (0.1,)}})
  constraints = {
      'data_args': cfg_lib.Dict(items={'num_samples': cfg_lib.Int(min=10),
                                       'max_time': cfg_lib.Float(min=0.0)}),
      'noise': cfg_lib.Dict(keys=('insert', 'delete')),
  }
  # Other keys, and keys left out, are fine (check_config decides which).
  cfg = ml_collections.ConfigDict(
      {'seed': 0, 'data_args': {'max_time': 1.4, 'steps': 3}, 'noise': {}})
  cfg_lib.validate(cfg, constraints, default=default)
  for d, field, fragment in [
      ({'num_samples': 5}, 'data_args.num_samples', 'an integer >= 10'),
      ({'max_time': 'x'}, 'data_args.max_time', 'a finite number'),
  ]:
    cfg = ml_collections.ConfigDict({'seed': 0, 'data_args': d, 'noise': {}})
    with pytest.raises(cfg_lib.ConfigError) as e:
      cfg_lib.validate(cfg, constraints, default=default)
    assert e.value.field == field and fragment in str(e.value)
  cfg = ml_collections.ConfigDict(
      {'seed': 0, 'data_args': {}, 'noise': {'insrt': (0.1,)}})
  with pytest.raises(cfg_lib.ConfigError) as e:
    cfg_lib.validate(cfg, constraints, default=default)
  assert str(e.value) == (
      "config.noise.insrt=(0.1,) is invalid: unknown key; expected one of "
      "insert, delete; did you mean 'insert'?")


def test_launcher_bad_value_exits_2_with_one_line(tmp_path):
  proc = run_module('experiments.linreg', '--config=configs/linreg.py:smoke',
                    '--config.learning_rate=-0.5',
                    f'--workdir={tmp_path / "w"}')
  assert proc.returncode == 2, proc.stderr
  assert 'Traceback' not in proc.stderr
  err_lines = [l for l in proc.stderr.splitlines() if l.startswith('error:')]
  assert err_lines == [
      'error: config.learning_rate=-0.5 is invalid: expected a finite number '
      '> 0.0']
  # Nothing ran: no workdir was created.
  assert not (tmp_path / 'w').exists()


def test_launcher_cross_field_check_exits_2(tmp_path):
  proc = run_module('experiments.linreg', '--config=configs/linreg.py:smoke',
                    '--config.batch_size=100000',
                    f'--workdir={tmp_path / "w"}')
  assert proc.returncode == 2, proc.stderr
  assert 'config.batch_size=100000 is invalid' in proc.stderr
  assert 'num_examples' in proc.stderr
  assert 'Traceback' not in proc.stderr


@pytest.mark.parametrize('arg,fragment', [
    ('--config.num_seedz=3', 'Did you mean "num_seeds"'),
    ('--config.num_seeds=abc', "--config.num_seeds=abc: invalid literal"),
    ('--config=configs/linreg.py:bogus', "Unknown variant 'bogus'"),
    ('--config=configs/nofile.py', "no config file 'configs/nofile.py'"),
])
def test_launcher_bad_flag_exits_2_with_one_line(arg, fragment, tmp_path):
  proc = run_module('experiments.linreg', arg, f'--workdir={tmp_path / "w"}')
  assert proc.returncode == 2, proc.stderr
  assert 'Traceback' not in proc.stderr
  (line,) = [l for l in proc.stderr.splitlines() if l.strip()]
  assert line.startswith('error: ') and fragment in line, line
  assert not (tmp_path / 'w').exists()
