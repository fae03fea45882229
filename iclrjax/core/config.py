"""Constraints on `ml_collections.ConfigDict` fields, checked before a run.

The default config of `configs/<name>.py` declares the fields and
ml_collections keeps their types; a family adds only what a type cannot say,
keyed by dotted path::

  CONSTRAINTS = {
      'num_seeds': config.Int(min=1),
      'optim.learning_rate': config.Float(min=0.0, min_inclusive=False),
      'env.name': config.Choice('CartPole-v1', 'Acrobot-v1'),
      'env_kwargs': config.Dict(),         # keys vary; checked in check_config
  }
  config.validate(cfg, CONSTRAINTS, default=get_config())

`validate` raises `ConfigError`, one line naming the field, the value and
what is allowed (a field only some variants set is declared by a constraint
with required=False).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Mapping, Sequence
from typing import Any

import ml_collections

_DICTS = (Mapping, ml_collections.ConfigDict)


class ConfigError(ValueError):
  """A config field has a bad value; the message names field and fix."""

  def __init__(self, field: str, value: Any, allowed: str):
    self.field, self.value, self.allowed = field, value, allowed
    super().__init__(f'config.{field}={value!r} is invalid: {allowed}')


def _hint(name: str, known: Sequence[str], fmt: str = '; did you mean {!r}?'
          ) -> str:
  close = difflib.get_close_matches(name, sorted(known), n=1)
  return fmt.format(close[0]) if close else ''


@dataclasses.dataclass(frozen=True)
class Spec:
  """A field's constraint: `check` returns None if ok, else what is allowed."""

  required: bool = True
  nullable: bool = False
  help: str = ''

  def ok(self, value: Any) -> bool:  # pragma: no cover - abstract
    raise NotImplementedError

  def describe(self) -> str:  # pragma: no cover - abstract
    raise NotImplementedError

  def check(self, value: Any) -> str | None:
    return None if self.ok(value) else f'expected {self.describe()}'


@dataclasses.dataclass(frozen=True)
class Float(Spec):
  """A finite real number (ints accepted) within an optional range."""

  min: float | None = None
  max: float | None = None
  min_inclusive: bool = True
  max_inclusive: bool = True

  def _range(self) -> str:
    parts = [f'{op[inc]} {b}' for b, inc, op in (
        (self.min, self.min_inclusive, ('>', '>=')),
        (self.max, self.max_inclusive, ('<', '<='))) if b is not None]
    return ' ' + ' and '.join(parts) if parts else ''

  def describe(self) -> str:
    return 'a finite number' + self._range()

  def ok(self, value) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
      return False
    lo, hi = self.min, self.max
    return math.isfinite(value) and (
        lo is None or (value >= lo if self.min_inclusive else value > lo)) and (
            hi is None or (value <= hi if self.max_inclusive else value < hi))


@dataclasses.dataclass(frozen=True)
class Int(Float):
  """An integer (bools are rejected) within an optional range."""

  multiple_of: int | None = None

  def describe(self) -> str:
    return 'an integer' + self._range() + (
        f' and a multiple of {self.multiple_of}' if self.multiple_of else '')

  def ok(self, value) -> bool:
    return isinstance(value, int) and super().ok(value) and not (
        self.multiple_of and value % self.multiple_of)


@dataclasses.dataclass(frozen=True)
class Bool(Spec):
  """True or False."""

  def describe(self) -> str:
    return 'True or False'

  def ok(self, value) -> bool:
    return isinstance(value, bool)


@dataclasses.dataclass(frozen=True)
class Str(Spec):
  """A string, optionally non-empty."""

  nonempty: bool = False

  def describe(self) -> str:
    return 'a non-empty string' if self.nonempty else 'a string'

  def ok(self, value) -> bool:
    return isinstance(value, str) and bool(value or not self.nonempty)


class Choice(Spec):
  """One of a fixed set of values (strings, numbers, ...)."""

  def __init__(self, *choices, **kwargs):
    object.__setattr__(self, 'choices', tuple(choices))
    super().__init__(**kwargs)

  def describe(self) -> str:
    return 'one of ' + ', '.join(repr(c) for c in self.choices)

  def ok(self, value) -> bool:
    # `True == 1` in Python; compare types too so Choice(0, 1) rejects True.
    return any(value == c and type(value) is type(c)  # pylint: disable=unidiomatic-typecheck
               for c in self.choices)

  def check(self, value):
    msg = super().check(value)
    if msg and isinstance(value, str):
      msg += _hint(value, [c for c in self.choices if isinstance(c, str)],
                   ' (did you mean {!r}?)')
    return msg


@dataclasses.dataclass(frozen=True)
class Seq(Spec):
  """A list/tuple whose items all satisfy `item`, with a length range."""

  item: Spec | None = None
  min_len: int = 0
  max_len: int | None = None

  def describe(self) -> str:
    item = '' if self.item is None else ' of ' + self.item.describe(
        ).removeprefix('a ').removeprefix('an ')
    return 'a list' + item + (
        f' with at least {self.min_len} item(s)' if self.min_len else '') + (
            '' if self.max_len is None else
            f' with at most {self.max_len} item(s)')

  def ok(self, value) -> bool:
    return isinstance(value, (list, tuple)) and self.min_len <= len(value) <= (
        len(value) if self.max_len is None else self.max_len)

  def check(self, value):
    bad = super().check(value)
    for i, v in enumerate(value if bad is None and self.item else ()):
      item_bad = self.item.check(v)
      if item_bad is not None:
        return f'item {i} ({v!r}): {item_bad}'
    return bad


@dataclasses.dataclass(frozen=True)
class AnyValue(Spec):
  """Any value: as `AnyValue(required=False)`, the declaration of a field
  only some variants set (ml_collections keeps the type a variant gives it)."""

  def describe(self) -> str:
    return 'any value'

  def ok(self, value) -> bool:
    return True


@dataclasses.dataclass(frozen=True)
class Dict(Spec):
  """A sub-config whose keys vary (a loader's or constructor's kwargs): each
  key is optional, `items` constrains a key's value when present and `keys`
  (if given) lists the allowed keys; else the family's check_config decides.
  """

  keys: tuple[str, ...] | None = None
  items: Mapping[str, Spec] | None = None

  def describe(self) -> str:
    return 'a dict' + ('' if self.keys is None else
                       ' with keys among ' + ', '.join(self.keys))

  def ok(self, value) -> bool:
    return isinstance(value, _DICTS)


_MISSING = object()


def _lookup(cfg: Any, path: str):
  for part in path.split('.'):
    if not isinstance(cfg, _DICTS) or part not in cfg:
      return _MISSING
    cfg = cfg[part]
  return cfg


def _leaves(cfg: Any, prefix: str = '') -> list[str]:
  out = []
  for k, v in (cfg.items() if hasattr(cfg, 'items') else []):
    if isinstance(v, (ml_collections.ConfigDict, dict)):
      out.extend(_leaves(v, f'{prefix}{k}.'))
    else:
      out.append(f'{prefix}{k}')
  return out


def _check(path: str, spec: Spec, value: Any) -> None:
  """Raises `ConfigError` unless `spec` allows `value` (present)."""
  if value is None:
    problem = None if spec.nullable else f'expected {spec.describe()}'
  else:
    problem = spec.check(value)
  if problem is not None:
    raise ConfigError(path, value, problem)
  if isinstance(spec, Dict) and value is not None:
    if spec.keys is not None:
      check_keys(value, path, spec.keys)
    for k, item in (spec.items or {}).items():
      if k in value:
        _check(f'{path}.{k}', item, value[k])


def validate(cfg: ml_collections.ConfigDict, constraints: Mapping[str, Spec],
             *, default: ml_collections.ConfigDict | None = None,
             allow_extra: bool = False) -> None:
  """Checks `cfg` against `constraints` (dotted path -> `Spec`); raises
  `ConfigError` on the first problem. The fields of `default` must be
  present; a field neither it nor a constraint declares is an error unless
  `allow_extra` (almost always a typo)."""
  opened = [p for p, s in constraints.items() if isinstance(s, Dict)]
  in_dict = lambda path: any(path.startswith(d + '.') for d in opened)
  known = set(constraints)
  for path in _leaves(default) if default is not None else ():
    known.add(path)
    if (path not in constraints and not in_dict(path)
        and _lookup(cfg, path) is _MISSING):
      raise ConfigError(path, None,
                        'field is missing (the default config has it)')
  for path, spec in constraints.items():
    value = _lookup(cfg, path)
    if value is not _MISSING:
      _check(path, spec, value)
    elif spec.required and not in_dict(path):
      raise ConfigError(path, None,
                        f'field is missing; expected {spec.describe()}')
  for leaf in [] if allow_extra else _leaves(cfg):
    if leaf not in known and not in_dict(leaf):
      raise ConfigError(leaf, _lookup(cfg, leaf),
                        'unknown field (not read by this experiment)'
                        + _hint(leaf, known))


def check(condition: bool, field: str, value: Any, allowed: str) -> None:
  """Cross-field check: raises `ConfigError(field, value, allowed)` if false."""
  if not condition:
    raise ConfigError(field, value, allowed)


def check_keys(node: Mapping[str, Any], path: str, allowed: Sequence[str],
               what: str = 'expected one of') -> None:
  """Raises `ConfigError` on '<path>.<key>' for a key not in `allowed`."""
  for k in node:
    if k not in allowed:
      raise ConfigError(f'{path}.{k}', node[k],
                        f'unknown key; {what} {", ".join(allowed)}'
                        + _hint(k, allowed))


def to_dict(cfg: ml_collections.ConfigDict) -> dict[str, Any]:
  """A JSON-friendly plain dict of `cfg` (tuples become lists)."""
  if isinstance(cfg, _DICTS):
    return {k: to_dict(x) for k, x in cfg.items()}
  if isinstance(cfg, (list, tuple)):
    return [to_dict(x) for x in cfg]
  return cfg


# Fields every launcher reads (see `core.launch`).
COMMON = {
    'seed': Int(min=0, help='base PRNG seed; seed i uses fold_in(seed, i)'),
    'num_seeds': Int(min=1, help='independent runs, vmapped'),
    'checkpoint_every': Int(min=0, required=False,
                            help='chunks between checkpoints (0: never)'),
    'keep_checkpoints': Int(min=1, required=False),
    'distributed': Bool(required=False,
                        help='call jax.distributed.initialize()'),
}
