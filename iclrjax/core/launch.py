"""The shared absl entry point of every `experiments/<name>.py`.

A launcher declares `EXPERIMENT = launch.Experiment(name, run, schema=...,
check_fn=...)`, where `run(r: Run) -> Result` trains (`r.train`), evaluates
and states its `Claim`s, and ends with `EXPERIMENT.main()`; tests and
notebooks call `EXPERIMENT.execute(cfg, workdir)`::

  python -m experiments.linreg                                # default config
  python -m experiments.linreg --config=configs/linreg.py:smoke --workdir=DIR
  python -m experiments.linreg --config.num_seeds=8 --config.seed=3

`jax.distributed.initialize()` (`--config.distributed=True`) comes before
the checks of the config, packages and data (one line, exit status 2). A
run's record goes to `--workdir`, by default `runs/<name>/<config hash>/`,
where the same command resumes after a kill.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
import contextlib
import dataclasses
import datetime
import hashlib
import importlib
import importlib.resources
import json
import logging as std_logging
import os
import pathlib
import shlex
import shutil
import subprocess
import sys
import time
from typing import Any

from absl import app
from absl import flags
from absl import logging
import jax
import ml_collections
from ml_collections import config_flags
import numpy as np

from iclrjax.core import checkpoint as ckpt_lib
from iclrjax.core import config as config_lib
from iclrjax.core import distributed
from iclrjax.core import extras
from iclrjax.core import logging as log_lib
from iclrjax.core import loop as loop_lib

RUNS_ROOT_ENV = 'ICLRJAX_RUNS'
# A folder of finished runs (`<root>/<name>/.../summary.json`) that `execute`
# may reuse instead of recomputing: one with the same experiment, config,
# clean commit, backend, device count and jax version is copied into the
# requested workdir when that is new or empty. The test suite sets it so a
# notebook's smoke run reuses the launcher's smoke run of the same code.
REUSE_ENV = 'ICLRJAX_REUSE_RUNS'


@dataclasses.dataclass
class Claim:
  """A paper's statement and whether our run supports it.

  control: what would fail this claim (an ablation, a baseline, an untrained
    model) and its measured number; a claim without one is a unit test.
  paper: the paper's own number for this claim, where it reports one.
  """

  claim: str
  holds: bool
  evidence: str
  control: str = ''
  paper: str = ''

  def to_json(self) -> dict[str, Any]:
    out = {'claim': self.claim, 'holds': bool(self.holds),
           'evidence': self.evidence, 'control': self.control}
    return {**out, 'paper': self.paper} if self.paper else out


def control_text(what: str, measured: str, passes: bool) -> str:
  """A claim's `control`: what ran in the method's place, its number, and
  whether it would pass the claim ('(fails)' is what a claim test expects)."""
  return f'{what}: {measured} ({"passes" if passes else "fails"})'


@dataclasses.dataclass
class Result:
  """What `run` returns: metrics ("<metric>/<variant>" -> per-seed values;
  summary.json gets their mean, ci95 and per_seed), the claims checked on
  them, and `extra` JSON to store in summary.json."""

  metrics: Mapping[str, Any]
  claims: Sequence[Claim] = ()
  extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Run:
  """Everything an experiment's `run(run) -> Result` needs."""

  name: str
  config: ml_collections.ConfigDict
  workdir: pathlib.Path
  writer: log_lib.MetricWriter
  checkpointer: ckpt_lib.Checkpointer
  mesh: jax.sharding.Mesh
  quiet: bool = False
  # phase -> how its batch used the data axis (`distributed.split_record`)
  splits: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
  _traced: dict[int, list[int]] = dataclasses.field(default_factory=dict)
  _phase_ckpts: dict[str, ckpt_lib.Checkpointer] = dataclasses.field(
      default_factory=dict)

  @property
  def plots_dir(self) -> pathlib.Path:
    return self.workdir / 'plots'

  def train(self, init_fn: loop_lib.InitFn, step_fn: loop_lib.StepFn, *,
            num_steps: int, chunk_size: int, phase: str | None = None,
            num_seeds: int | None = None, **kwargs) -> loop_lib.TrainResult:
    """`core.loop.train` with this run's seeds, mesh, writer, checkpoints.

    Each `phase` (an experiment that trains several things) checkpoints
    under checkpoints/<phase>/ and logs "<phase>/<metric>", so a resumed run
    skips finished phases. A sweep passes its (points x seeds) `num_seeds`
    with `seed_ids` and `init_args` and runs on a mesh of its own shape.
    """
    kwargs.setdefault('checkpoint_every',
                      self.config.get('checkpoint_every', 1))
    kwargs.setdefault('desc', f'{self.name}/{phase}' if phase else self.name)
    kwargs.setdefault('progress', None if not self.quiet else False)
    n = num_seeds or self.config.num_seeds
    mesh = self.mesh if n == self.config.num_seeds else (
        distributed.make_mesh(n))
    if phase is not None and phase not in self._phase_ckpts:
      self._phase_ckpts[phase] = ckpt_lib.Checkpointer(
          self.workdir / 'checkpoints' / phase,
          max_to_keep=self.config.get('keep_checkpoints', 3))
    with distributed.record_splits() as sizes:
      out = loop_lib.train(
          init_fn, step_fn, seed=self.config.seed, num_seeds=n,
          num_steps=num_steps, chunk_size=chunk_size, mesh=mesh,
          writer=self.writer, phase=phase, checkpointer=(
              self._phase_ckpts[phase] if phase else self.checkpointer),
          **kwargs)
    # A step traced before (an earlier phase with the same step_fn) hits
    # JAX's trace cache and marks nothing this time: its record stands.
    sizes = sizes or self._traced.get(id(step_fn), [])
    self._traced.setdefault(id(step_fn), list(sizes))
    record = distributed.split_record(sizes, mesh)
    if out.resumed_from is not None and out.resumed_from >= num_steps:
      record['how'] = 'restored finished (not traced in this process)'
    self.splits[phase or 'train'] = record
    return out

  def close(self) -> None:
    for c in [self.checkpointer, *self._phase_ckpts.values()]:
      c.close()
    self.writer.close()

  def rows(self) -> list[dict[str, Any]]:
    """metrics.jsonl rows written so far."""
    return log_lib.read_metrics(self.workdir)


class MissingDataError(FileNotFoundError):
  """A dataset the config asks for is not on disk (one line: what, where,
  how to get it)."""


def code_commit() -> str:
  """The git commit of the code that ran ('<sha>-dirty' with local edits;
  'unknown' outside a git checkout)."""
  def git(*args):
    return subprocess.run(
        ['git', *args], cwd=pathlib.Path(__file__).resolve().parents[2],
        check=True, capture_output=True, text=True, timeout=10).stdout.strip()
  try:
    sha = git('rev-parse', 'HEAD')
    dirty = git('status', '--porcelain', '--untracked-files=no', '--',
                'iclrjax', 'experiments', 'configs')
  except (OSError, subprocess.SubprocessError):
    return 'unknown'
  return f'{sha}-dirty' if dirty else sha


def _write_json(path: pathlib.Path, obj: Any) -> None:
  tmp = path.with_suffix(path.suffix + '.tmp')
  tmp.write_text(json.dumps(obj, indent=2) + '\n')
  os.replace(tmp, path)


def default_workdir(name: str, cfg_json: dict[str, Any]) -> pathlib.Path:
  """`runs/<name>/<config hash>`: the same command resumes in the same place,
  and every process of a multi-host run computes it on its own."""
  text = json.dumps(cfg_json, sort_keys=True)
  digest = hashlib.sha256(text.encode()).hexdigest()[:10]
  return pathlib.Path(os.environ.get(RUNS_ROOT_ENV, 'runs')) / name / digest


def reusable_run(name: str, cfg_json: dict[str, Any],
                 commit: str) -> pathlib.Path | None:
  """A finished run under $ICLRJAX_REUSE_RUNS/<name> with this config, this
  commit (a clean tree's; its claims judged by it too), backend, device count
  and jax version, else None."""
  root = os.environ.get(REUSE_ENV)
  if not root or commit.endswith('-dirty') or commit == 'unknown':
    return None
  want = {'commit': commit, 'backend': jax.default_backend(),
          'devices': jax.device_count(), 'versions': {'jax': jax.__version__}}
  flat = _flat(cfg_json)
  for path in sorted((pathlib.Path(root) / name).rglob('summary.json')):
    try:
      s = json.loads(path.read_text())
    except (OSError, ValueError):
      continue
    if (all(s.get(k) == v for k, v in want.items())
        and s.get('claims_commit', commit) == commit
        and _flat(s.get('config')) == flat):
      return path.parent
  return None


def _flat(d: Any, prefix: str = '') -> dict[str, Any]:
  """{'a.b': leaf} of a nested dict (an empty dict is a leaf)."""
  if not isinstance(d, dict) or not d:
    return {prefix.rstrip('.'): d}
  out = {}
  for k in sorted(d):
    out.update(_flat(d[k], f'{prefix}{k}.'))
  return out


def config_fields_help(name: str) -> str:
  """'  field = default' lines of configs/<name>.py's default config."""
  try:
    cfg = importlib.import_module(f'configs.{name}').get_config()
  except Exception as e:  # pylint: disable=broad-except
    return f'  (configs/{name}.py did not load: {_one_line(e)})'
  return '\n'.join(f'  {k} = {v!r}'
                   for k, v in _flat(config_lib.to_dict(cfg)).items())


def _command_line() -> str:
  """The command that reproduces this run, without --workdir (a path of this
  machine that means nothing elsewhere)."""
  argv = [a for a in sys.argv if not a.startswith('--workdir=')]
  if argv and argv[0].endswith('.py'):
    argv = ['python', '-m', '.'.join(
        pathlib.Path(argv[0]).with_suffix('').parts[-2:])] + argv[1:]
  return ' '.join(shlex.quote(a) for a in argv)


@dataclasses.dataclass(frozen=True)
class Experiment:
  """A named experiment: its run function and its config constraints.

  The config's fields and types are those of `configs/<name>.py`'s default
  config; `schema` holds only the constraints a type does not say
  (`core.config`) and `check_fn` the cross-field checks. `preflight(cfg)`
  raises FileNotFoundError when the config's data is absent (it loads
  nothing); `requires(cfg)` lists the optional packages a config needs as
  (module, extra) pairs (`core.extras`).
  """

  name: str
  run_fn: Callable[[Run], Result]
  schema: Mapping[str, config_lib.Spec] = dataclasses.field(
      default_factory=dict)
  check_fn: Callable[[ml_collections.ConfigDict], None] | None = None
  preflight: Callable[[ml_collections.ConfigDict], None] | None = None
  requires: Callable[[ml_collections.ConfigDict],
                     Sequence[tuple[str, str]]] | None = None
  # (cfg, per-seed metrics {name: array [seeds, ...]}) -> claims: set where
  # the claims are a pure function of the recorded metrics, so a revised
  # claim rule can re-judge a recorded run (`experiments.report --rejudge`)
  # without rerunning it.
  claims_fn: Callable[[ml_collections.ConfigDict, Mapping[str, np.ndarray]],
                      Sequence[Claim]] | None = None

  def default_config(self) -> ml_collections.ConfigDict:
    return importlib.import_module(f'configs.{self.name}').get_config()

  def validate(self, cfg: ml_collections.ConfigDict) -> None:
    """`ConfigError` naming the field on a bad config (starts no backend)."""
    config_lib.validate(cfg, {**config_lib.COMMON, **self.schema},
                        default=self.default_config())
    if self.check_fn is not None:
      self.check_fn(cfg)

  def check_ready(self, cfg: ml_collections.ConfigDict) -> None:
    """The config is valid, its packages importable and its data on disk."""
    self.validate(cfg)
    for module, extra in (self.requires(cfg) if self.requires else ()):
      extras.check(module, extra)  # without importing it
    if self.preflight is not None:
      try:
        self.preflight(cfg)
      except FileNotFoundError as e:
        raise MissingDataError(' '.join(str(e).split())) from e

  def execute(self, cfg: ml_collections.ConfigDict,
              workdir: str | os.PathLike | None = None, *,
              command: str | None = None,
              quiet: bool | None = None) -> dict[str, Any]:
    """Runs (or resumes) and records one run; returns its summary."""
    distributed.maybe_initialize(bool(cfg.get('distributed', False)))
    self.check_ready(cfg)
    cfg_json = config_lib.to_dict(cfg)
    wd = pathlib.Path(workdir) if workdir is not None else (
        default_workdir(self.name, cfg_json))
    main_proc = jax.process_index() == 0  # only process 0 writes files
    if (wd / 'config.json').exists():
      old = _flat(json.loads((wd / 'config.json').read_text()))
      new = _flat(cfg_json)
      if old != new:
        diff = [k for k in sorted(old.keys() | new.keys())
                if old.get(k) != new.get(k)]
        raise config_lib.ConfigError(
            ','.join(diff) or 'config', '(changed)',
            f'workdir {wd} holds a run with a different config; pass a new '
            '--workdir or the same config to resume it')
      logging.info('Resuming the run in %s', wd)
    commit = code_commit()  # the code that runs, before anyone edits it
    done = reusable_run(self.name, cfg_json, commit)
    if (done is not None and jax.process_count() == 1 and (
        done.resolve() == wd.resolve() or not wd.exists()
        or not any(wd.iterdir()))):
      logging.warning('Reusing the finished run in %s ($%s): not recomputed',
                      done, REUSE_ENV)
      if done.resolve() != wd.resolve():
        shutil.copytree(done, wd, dirs_exist_ok=True)
      return json.loads((wd / 'summary.json').read_text())
    if main_proc:
      wd.mkdir(parents=True, exist_ok=True)
      _write_json(wd / 'config.json', cfg_json)
    logging.info('%s: workdir %s', self.name, wd)

    mesh = distributed.make_mesh(cfg.num_seeds)
    writer = log_lib.MetricWriter(wd, enabled=main_proc)
    # TensorBoard's Text tab shows the config beside the scalars.
    writer.write_text('config', f'```\n{json.dumps(cfg_json, indent=2)}\n```')
    run = Run(name=self.name, config=cfg, workdir=wd, writer=writer,
              checkpointer=ckpt_lib.Checkpointer(
                  wd / 'checkpoints',
                  max_to_keep=cfg.get('keep_checkpoints', 3)), mesh=mesh,
              quiet=log_lib.quiet_default() if quiet is None else quiet)
    t0 = time.perf_counter()
    try:
      result = self.run_fn(run)
    finally:
      run.close()
    summary = {  # DESIGN.md's schema
        'experiment': self.name,
        'config': cfg_json,
        'num_seeds': int(cfg_json['num_seeds']),
        **distributed.describe(mesh),
        'commit': commit,
        'wall_s': round(time.perf_counter() - t0, 3),
        'metrics': {k: log_lib.summarize(np.asarray(v)) for k, v in
                    distributed.to_host(dict(result.metrics)).items()},
        'claims': [c.to_json() for c in result.claims],
        'command': command or f'python -m experiments.{self.name}',
        'versions': {'jax': jax.__version__},
        'finished': datetime.datetime.now().isoformat(timespec='seconds'),
        **result.extra,
        'data_axis': {'used': any(r['split'] for r in run.splits.values()),
                      'phases': run.splits},
    }
    if main_proc:
      _write_json(wd / 'summary.json', summary)
    for c in result.claims:
      logging.info('claim %s: %s (%s)',
                   'HOLDS' if c.holds else 'does NOT hold', c.claim,
                   c.evidence)
      if not c.control:
        logging.warning('claim without a control (what would fail it, and '
                        'its number): %s', c.claim)
    return summary

  def main(self) -> None:
    """absl entry point: `--config` (file[:variant]), `--workdir`."""
    name = self.name
    # DEFINE_config_file already reads sys.argv's --config.<field> overrides.
    with _flag_errors_exit_2():
      config_flags.DEFINE_config_file(
          'config', str(importlib.resources.files('configs') / f'{name}.py'),
          f'Config file, e.g. configs/{name}.py:smoke; override fields with '
          f'--config.<field>=value. Fields (default):\n'
          + config_fields_help(name), lock_config=True)
    flags.DEFINE_string('workdir', None,
                        f'Output directory (default: runs/{name}/<config '
                        'hash>; the same command resumes there).')

    def _main(argv):
      # Hide INFO chatter: orbax (lines per checkpoint), JAX backend probing.
      logging.get_absl_handler().addFilter(
          lambda r: r.levelno >= std_logging.WARNING or not any(
              p in r.pathname for p in ('/orbax/', 'xla_bridge.py')))
      if len(argv) > 1:
        raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
      try:
        summary = self.execute(flags.FLAGS.config, flags.FLAGS.workdir,
                               command=_command_line())
      except (config_lib.ConfigError, MissingDataError,
              distributed.BatchSplitError, extras.MissingExtraError) as e:
        print(f'error: {e}', file=sys.stderr)
        sys.exit(2)
      print(json.dumps({'metrics': {k: v['mean'] for k, v in
                                    summary['metrics'].items()},
                        'claims': summary['claims']}, indent=1))

    app.run(_main, flags_parser=_parse_flags)


def _one_line(e: BaseException) -> str:
  text = str(e)
  if isinstance(e, (KeyError, AttributeError)):
    # ConfigDict: KeyError('\'x\'\nDid you mean "y" instead of "x"?')
    text = text.strip('\'"').replace('\\n', ' ').replace("\\'", "'")
  if 'Traceback (most recent call last)' in text:
    # config_flags embeds get_config()'s traceback; its last line says why.
    last = [l for l in text.splitlines() if l.strip()][-1].strip()
    text = f'{text.split(":", 1)[0]}: {last}'
  return ' '.join(text.split())


def _parse_flags(argv: list[str]) -> list[str]:
  """absl flag parsing; a bad flag or config file exits 2 with one line."""
  for arg in argv[1:]:
    if arg.startswith('--config='):
      path = arg.split('=', 1)[1].split(':', 1)[0]
      if not os.path.exists(path):
        print(f'error: --config: no config file {path!r} (expected e.g. '
              f'configs/<name>.py[:variant], relative to {os.getcwd()})',
              file=sys.stderr)
        sys.exit(2)
  with _flag_errors_exit_2():
    rest = flags.FLAGS(argv)
    _ = flags.FLAGS.config  # applies --config.<field> overrides
  return rest


@contextlib.contextmanager
def _flag_errors_exit_2():
  """A bad flag, override or config file: one line on stderr, exit 2."""
  try:
    yield
  except (flags.Error, AttributeError, KeyError, ValueError, TypeError) as e:
    msg = _one_line(e)
    if isinstance(e, (KeyError, AttributeError)):
      msg = f'unknown config field in an override: {msg}'
    print(f'error: {msg}', file=sys.stderr)
    sys.exit(2)
