"""Config validation: errors name the field, the value and what is allowed."""

import ml_collections
import pytest

from iclrjax.core import config as cfg_lib
from iclrjax.core import launch
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


# -- schemas derived from the default config -----------------------------------
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


def derived():
  return cfg_lib.derive_schema(ml_collections.ConfigDict(default_dict()),
                               CONSTRAINTS)


def with_value(path, value):
  d = default_dict()
  node = d
  *parents, leaf = path.split('.')
  for p in parents:
    node = node[p]
  node[leaf] = value
  return ml_collections.ConfigDict(d)


def test_derived_schema_passes_the_default():
  schema = derived()
  assert isinstance(schema, cfg_lib.Schema)
  assert schema['lr'] is CONSTRAINTS['lr']  # A constraint wins.
  assert schema['momentum'] == cfg_lib.Float()  # Else the default's type.
  cfg_lib.validate(ml_collections.ConfigDict(default_dict()), schema)


@pytest.mark.parametrize('field,value,fragment', [
    ('momentum', 'fast', 'expected a finite number'),  # float field
    ('use_norm', 1, 'expected True or False'),
    ('steps', 2.5, 'expected an integer'),
    ('tag', 3, 'expected a string'),
    ('names', 'ab', 'expected a list of string'),
    ('names', ('a', 2), "item 1 (2): expected a string"),
    ('momentum', None, 'expected a finite number'),  # not nullable
    ('lr', 0.0, '> 0.0'),  # the constraint
])
def test_a_field_is_typed_by_its_default_without_a_schema_entry(
    field, value, fragment):
  with pytest.raises(cfg_lib.ConfigError) as e:
    cfg_lib.validate(with_value(field, value), derived())
  msg = str(e.value)
  assert e.value.field == field
  assert msg.startswith(f'config.{field}={value!r} is invalid: ')
  assert fragment in msg
  assert '\n' not in msg


@pytest.mark.parametrize('field,value', [
    ('momentum', 1),  # floats accept ints
    ('extra', 'anything'),  # a None default: nullable, any value
    ('extra', None),
    ('schedule_p', 0.5),
])
def test_inferred_specs_accept(field, value):
  cfg_lib.validate(with_value(field, value), derived())


def test_derived_schema_rejects_unknown_fields_with_a_hint():
  cfg = ml_collections.ConfigDict(default_dict())
  cfg.momentom = 0.5
  with pytest.raises(cfg_lib.ConfigError) as e:
    cfg_lib.validate(cfg, derived())
  assert str(e.value) == (
      "config.momentom=0.5 is invalid: unknown field (not read by this "
      "experiment); did you mean 'momentum'?")


def test_constraint_on_a_missing_field_raises_naming_it():
  default = ml_collections.ConfigDict(default_dict())
  with pytest.raises(cfg_lib.SchemaError) as e:
    cfg_lib.derive_schema(default, {'momentm': cfg_lib.Float(min=0.0)})
  assert e.value.field == 'momentm'
  assert "did you mean 'momentum'" in str(e.value)
  assert 'required=False' in str(e.value)
  # A field only some variants set: optional, and validated when present.
  schema = cfg_lib.derive_schema(
      default, {'warmup': cfg_lib.Int(min=0, required=False)})
  cfg_lib.validate(default, schema)
  with pytest.raises(cfg_lib.ConfigError, match=r'config.warmup=-1 .*>= 0'):
    cfg_lib.validate(with_value('warmup', -1), schema)


@pytest.mark.parametrize('constraint', [
    cfg_lib.Float(min=0.95),
    cfg_lib.Int(min=0),  # 0.9 is no integer
    cfg_lib.Choice(0.5, 1.0),
])
def test_constraint_rejecting_its_default_raises(constraint):
  default = ml_collections.ConfigDict(default_dict())
  with pytest.raises(cfg_lib.SchemaError) as e:
    cfg_lib.derive_schema(default, {'momentum': constraint})
  assert e.value.field == 'momentum'
  assert str(e.value).startswith(
      'schema of config.momentum: the constraint rejects the default 0.9: ')
  with pytest.raises(cfg_lib.SchemaError, match='config.extra.*None'):
    cfg_lib.derive_schema(default, {'extra': cfg_lib.Float()})


def test_sub_config_constraint_must_be_a_dict():
  default = ml_collections.ConfigDict(default_dict())
  with pytest.raises(cfg_lib.SchemaError, match="config.env: a sub-config"):
    cfg_lib.derive_schema(default, {'env': cfg_lib.Str()})


def test_dict_sub_config_whose_keys_vary():
  default = ml_collections.ConfigDict(
      {'seed': 0, 'data_args': {'num_samples': 100, 'seed': 0},
       'noise': {'insert': (0.1,)}})
  schema = cfg_lib.derive_schema(default, {
      'data_args': cfg_lib.Dict(items={'num_samples': cfg_lib.Int(min=10),
                                       'max_time': cfg_lib.Float(min=0.0)}),
      'noise': cfg_lib.Dict(keys=('insert', 'delete')),
  })
  # Other keys, and keys left out, are fine (check_config decides which).
  cfg = ml_collections.ConfigDict(
      {'seed': 0, 'data_args': {'max_time': 1.4, 'steps': 3}, 'noise': {}})
  cfg_lib.validate(cfg, schema)
  for d, field, fragment in [
      ({'num_samples': 5}, 'data_args.num_samples', 'an integer >= 10'),
      ({'max_time': 'x'}, 'data_args.max_time', 'a finite number'),
      ({'seed': 1.5}, 'data_args.seed', 'an integer'),  # the default's type
  ]:
    cfg = ml_collections.ConfigDict({'seed': 0, 'data_args': d, 'noise': {}})
    with pytest.raises(cfg_lib.ConfigError) as e:
      cfg_lib.validate(cfg, schema)
    assert e.value.field == field and fragment in str(e.value)
  cfg = ml_collections.ConfigDict(
      {'seed': 0, 'data_args': {}, 'noise': {'insrt': (0.1,)}})
  with pytest.raises(cfg_lib.ConfigError) as e:
    cfg_lib.validate(cfg, schema)
  assert str(e.value) == (
      "config.noise.insrt=(0.1,) is invalid: unknown key; expected one of "
      "insert, delete; did you mean 'insert'?")


def test_launch_validate_derives_from_the_default():
  default = ml_collections.ConfigDict(default_dict())
  cfg = ml_collections.ConfigDict(default_dict())
  cfg.momentom = 0.5
  with pytest.raises(cfg_lib.ConfigError, match="did you mean 'momentum'"):
    launch.validate(cfg, CONSTRAINTS, default=default)
  # Without a default, `cfg` types itself: only the constraints can fail.
  launch.validate(cfg, CONSTRAINTS)
  with pytest.raises(cfg_lib.ConfigError, match='config.lr=2.0'):
    launch.validate(with_value('lr', 2.0), CONSTRAINTS)


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
