"""What every paper's `paper` variant costs: compiled, not run (or timed).

  python -m benchmarks.paper_variants                    # compile only (CPU)
  python -m benchmarks.paper_variants --only=qdpm,dlm
  python -m benchmarks.paper_variants --run              # time one call each
  python -m benchmarks.paper_variants --variant=smoke --run   # the test

Each experiment lists its compiled functions in `programs(cfg)`
(`core.loop.Program`: its training chunks at the config's shapes, from the
same builders its `run` uses, and its evaluation). For each, in a fresh
process per experiment (each under its own timeout), this lowers and
compiles it without running it and reports:

- params: model parameters per seed;
- GFLOP per step: dot and convolution FLOPs counted on the jaxpr, with every
  `scan` multiplied by its length (XLA's cost analysis counts a loop body
  once); a `while` with a data-dependent trip count counts once (marked *);
- peak memory: XLA's memory analysis of the compiled program on this
  backend (arguments + outputs - donated + temporaries);
- steps and calls in the config, and an H100 estimate: the variant's total
  FLOPs at `--mfu` of an H100's 989 TFLOP/s dense bf16 / TF32 peak (a lower
  bound for programs too small to fill the GPU; `--run` measures).

`--devices=8` compiles the same programs on the mesh over 8 devices (forced
host devices on a CPU) with their batches split over 'data', and reports
memory per device: a variant too big for one 80 GB device fits where its
per-device peak does. `--write` keeps the two measurements side by side.

`--run` also calls each program once on zeros of its shapes (after a warm-up
call) on the device it finds and extrapolates the variant's wall time from
calls x seconds per call. The whole table takes minutes; `--write` records
it in benchmarks/paper_variants.json, which the docs pages and
benchmarks/README.md show.

Two checks of the data axis (run with several devices, e.g.
XLA_FLAGS=--xla_force_host_platform_device_count=8; tests/test_scale_out.py):

  python -m benchmarks.paper_variants --splits=fge,dlm --variant=smoke
  python -m benchmarks.paper_variants --compare=fge --variant=smoke

`--splits` lowers every training chunk on the mesh `Run.train` would build
and reports the batch axes it marks and whether they split over 'data';
`--compare` runs one chunk from the same init on one device and on that mesh
and reports the largest relative difference of the outputs.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import os
import pathlib
import subprocess
import sys
import time
from typing import Any

H100_PEAK = 989e12  # dense bf16 / TF32-class tensor-core FLOP/s (SXM)
GPU_MEMORY = 80e9   # bytes on one H100
ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULT_FILE = ROOT / 'benchmarks' / 'paper_variants.json'


# -- FLOPs on the jaxpr ---------------------------------------------------------
def _prod(xs) -> float:
  return float(math.prod(int(x) for x in xs))


def jaxpr_flops(jaxpr) -> tuple[float, bool]:
  """(dot + conv FLOPs, whether a while loop of unknown length was seen)."""
  import jax  # pylint: disable=g-import-not-at-top
  total, unknown = 0.0, False
  for eqn in jaxpr.eqns:
    prim = eqn.primitive.name
    if prim == 'dot_general':
      (lc, _), _ = eqn.params['dimension_numbers']
      lhs = eqn.invars[0].aval.shape
      total += 2.0 * _prod(eqn.outvars[0].aval.shape) * _prod(
          lhs[d] for d in lc)
      continue
    if prim == 'conv_general_dilated':
      rhs = eqn.invars[1].aval.shape
      dn = eqn.params['dimension_numbers']
      kernel = _prod(rhs[d] for d in dn.rhs_spec[2:])
      in_per_group = rhs[dn.rhs_spec[1]]
      total += 2.0 * _prod(eqn.outvars[0].aval.shape) * kernel * in_per_group
      continue
    subs = []
    for v in eqn.params.values():
      for item in (v if isinstance(v, (tuple, list)) else (v,)):
        if isinstance(item, jax.extend.core.ClosedJaxpr):
          subs.append(item.jaxpr)
        elif isinstance(item, jax.extend.core.Jaxpr):
          subs.append(item)
    if not subs:
      continue
    inner = [jaxpr_flops(j) for j in subs]
    unknown |= any(u for _, u in inner)
    if prim == 'scan':
      total += eqn.params['length'] * sum(f for f, _ in inner)
    elif prim == 'cond':
      total += max(f for f, _ in inner)
    elif prim == 'while':
      unknown = True
      total += sum(f for f, _ in inner)
    else:
      total += sum(f for f, _ in inner)
  return total, unknown


# -- one experiment, in its own process ----------------------------------------
def _zeros(tree):
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), tree)


def measure(name: str, variant: str, run: bool, sharded: bool = False
            ) -> list[dict[str, Any]]:
  """Rows for every program of experiments.<name> at configs/<name>:variant
  (`sharded`: on the mesh over every device; memory is then per device)."""
  import jax  # pylint: disable=g-import-not-at-top
  mod = importlib.import_module(f'experiments.{name}')
  cfg = importlib.import_module(f'configs.{name}').get_config(variant)
  rows = []
  for prog in mod.programs(cfg, sharded=sharded):
    row = dict(experiment=name, variant=variant, program=prog.name,
               params=prog.params, steps=prog.steps, calls=prog.calls,
               note=prog.note)
    if not sharded:   # the same FLOPs on a mesh (and traced under it)
      flops, unknown = jaxpr_flops(
          jax.make_jaxpr(prog.fn)(*prog.args).jaxpr)
      row.update(flops_per_call=flops, while_loop=unknown)
    t0 = time.perf_counter()
    compiled = prog.fn.lower(*prog.args).compile()
    row['compile_s'] = round(time.perf_counter() - t0, 2)
    mem = compiled.memory_analysis()
    if mem is not None:
      row['peak_bytes'] = int(mem.argument_size_in_bytes
                              + mem.output_size_in_bytes
                              - mem.alias_size_in_bytes
                              + mem.temp_size_in_bytes)
    if run:
      args = _zeros(prog.args)
      jax.block_until_ready(compiled(*args))   # warm-up (allocations)
      t0 = time.perf_counter()
      jax.block_until_ready(compiled(*_zeros(prog.args)))
      row['s_per_call'] = time.perf_counter() - t0
    rows.append(row)
  dev = jax.devices()[0]
  for row in rows:
    row['device'] = f'{jax.default_backend()}: {dev.device_kind}'
    row['devices'] = jax.device_count() if sharded else 1
  if rows:
    rows[0]['paper_scale'] = getattr(mod, 'PAPER_SCALE', '')
  return rows


def splits(name: str, variant: str = 'smoke') -> list[dict[str, Any]]:
  """How each training program of experiments.<name> splits its batch over
  the mesh `Run.train` builds on every device here (lowered, not compiled).
  """
  import jax  # pylint: disable=g-import-not-at-top
  from iclrjax.core import distributed  # pylint: disable=g-import-not-at-top
  mod = importlib.import_module(f'experiments.{name}')
  cfg = importlib.import_module(f'configs.{name}').get_config(variant)
  rows = []
  for prog in mod.programs(cfg, sharded=True):
    if not prog.steps:
      continue
    with distributed.record_splits() as sizes:
      hlo = prog.fn.lower(*prog.args).as_text()
    state = jax.tree.leaves(prog.args[0])[0]  # placed on the phase's mesh
    record = distributed.split_record(sizes, state.sharding.mesh)
    record.update(program=prog.name, batch_axis=prog.batch_axis,
                  constrained='sharding_constraint' in hlo or
                  'mhlo.sharding' in hlo)
    rows.append(record)
  return rows


def compare(name: str, variant: str = 'smoke') -> list[dict[str, Any]]:
  """Each training chunk of experiments.<name> from the same init, on one
  device and on the mesh over every device: the largest difference of its
  outputs relative to their scale (float rounding when the split is right).
  """
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  mod = importlib.import_module(f'experiments.{name}')
  cfg = importlib.import_module(f'configs.{name}').get_config(variant)
  single = {p.name: p for p in mod.programs(cfg)}
  rows = []
  for prog in mod.programs(cfg, sharded=True):
    if not prog.steps or prog.init is None:
      continue
    mesh = jax.tree.leaves(prog.args[0])[0].sharding.mesh
    one = jax.device_get(single[prog.name].fn(*single[prog.name].init(None)))
    many = jax.device_get(prog.fn(*prog.init(mesh)))
    worst = 0.0
    for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(many)):
      a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
      ok = np.isfinite(a) & np.isfinite(b)
      if (np.isfinite(a) != np.isfinite(b)).any():
        worst = float('inf')
      if not ok.any():
        continue
      scale = max(np.abs(a[ok]).max(), 1e-6)
      worst = max(worst, float(np.abs(a[ok] - b[ok]).max() / scale))
    rows.append(dict(program=prog.name, mesh=dict(mesh.shape),
                     max_rel_diff=worst))
  return rows


def _child(name: str, variant: str, run: bool, timeout: float,
           devices: int = 1) -> list[dict[str, Any]]:
  cmd = [sys.executable, '-m', 'benchmarks.paper_variants', f'--child={name}',
         f'--variant={variant}', f'--devices={devices}'] + (
             ['--run'] if run else [])
  env = dict(os.environ)
  if devices > 1:   # forced host devices where there is no accelerator
    env['XLA_FLAGS'] = (env.get('XLA_FLAGS', '') +
                        f' --xla_force_host_platform_device_count={devices}')
  try:
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, check=False, env=env)
  except subprocess.TimeoutExpired:
    return [dict(experiment=name, variant=variant,
                 error=f'timed out after {timeout:.0f} s')]
  if proc.returncode != 0:
    last = [l for l in proc.stderr.splitlines() if l.strip()][-1:] or ['?']
    return [dict(experiment=name, variant=variant, error=last[0][:300])]
  return json.loads(proc.stdout.strip().splitlines()[-1])


# -- the table -------------------------------------------------------------------
def _fmt(x: float, unit: str = '') -> str:
  for scale, suffix in ((1e12, 'T'), (1e9, 'G'), (1e6, 'M'), (1e3, 'k')):
    if abs(x) >= scale:
      return f'{x / scale:.3g}{suffix}{unit}'
  return f'{x:.3g}{unit}'


def summarize(rows: list[dict[str, Any]], mfu: float
              ) -> dict[str, dict[str, Any]]:
  """Per experiment: total FLOPs, max peak memory (one device, and per
  device on the mesh where measured), where it fits, H100 hours."""
  out: dict[str, dict[str, Any]] = {}
  for r in rows:
    e = out.setdefault(r['experiment'], dict(flops=0.0, peak=None, wall=0.0,
                                             timed=True, errors=[],
                                             peak_per_device={}))
    if 'error' in r:
      e['errors'].append(r['error'])
      continue
    n = r.get('devices', 1)
    if n > 1:   # the same program on a mesh: memory per device only
      e['peak_per_device'][n] = max(e['peak_per_device'].get(n, 0),
                                    r.get('peak_bytes', 0))
      continue
    e['flops'] += r['calls'] * r['flops_per_call']
    e['peak'] = max(e['peak'] or 0, r.get('peak_bytes', 0))
    if 's_per_call' in r:
      e['wall'] += r['calls'] * r['s_per_call']
    else:
      e['timed'] = False
  for e in out.values():
    e['h100_hours'] = e['flops'] / (mfu * H100_PEAK) / 3600
    e['fits_80gb'] = e['peak'] is not None and e['peak'] <= GPU_MEMORY
    e['fits'] = 'yes' if e['fits_80gb'] else next(
        (f'on {n} devices' for n, b in sorted(e['peak_per_device'].items())
         if b <= GPU_MEMORY), 'NO')
  return out


def table(rows: list[dict[str, Any]], mfu: float) -> str:
  head = ('| experiment | program | devices | params | steps x calls | '
          'GFLOP/call | peak memory per device | compile s | s/call |\n'
          '|---|---|---|---|---|---|---|---|---|')
  lines = [head]
  for r in rows:
    if 'error' in r:
      lines.append(f"| {r['experiment']} | error: {r['error']} | | | | | | | |")
      continue
    flops = ('-' if 'flops_per_call' not in r else
             _fmt(r['flops_per_call'] / 1e9) + ('*' if r['while_loop'] else ''))
    lines.append(
        f"| {r['experiment']} | {r['program']} | {r.get('devices', 1)} | "
        f"{_fmt(r['params'])} | {r['steps']} x {r['calls']} | {flops} | "
        f"{_fmt(r.get('peak_bytes', 0), 'B')} | {r['compile_s']} | "
        f"{r.get('s_per_call', float('nan')):.3g} |")
  lines.append('')
  lines.append(f'| experiment | total FLOPs | max peak memory (per device on '
               f'n) | fits 80 GB | H100-hours at {mfu:.0%} MFU | measured '
               'wall (extrapolated) | the paper itself |')
  lines.append('|---|---|---|---|---|---|---|')
  scale = {r['experiment']: r['paper_scale'] for r in rows
           if r.get('paper_scale')}
  for name, e in summarize(rows, mfu).items():
    paper = scale.get(name, '-').replace('|', '/')
    if e['errors'] and not e['flops']:
      lines.append(f'| {name} | error | | | | | {paper} |')
      continue
    wall = f"{e['wall'] / 3600:.3g} h" if e['timed'] else '-'
    peak = ('-' if e['peak'] is None else _fmt(e['peak'], 'B')) + ''.join(
        f" ({_fmt(b, 'B')} on {n})" for n, b in
        sorted(e['peak_per_device'].items()))
    lines.append(f"| {name} | {_fmt(e['flops'])} | {peak} | {e['fits']} | "
                 f"{e['h100_hours']:.3g} | {wall} | {paper} |")
  return '\n'.join(lines)


def names() -> list[str]:
  from experiments import papers  # pylint: disable=g-import-not-at-top
  return [p.name for p in papers.PAPERS]


def main(argv: list[str]) -> None:
  args = dict(a.lstrip('-').split('=', 1) if '=' in a else (a.lstrip('-'), '')
              for a in argv)
  variant = args.get('variant', 'paper')
  run = 'run' in args
  if 'splits' in args:
    print(json.dumps({n: splits(n, variant) for n in args['splits'].split(',')}))
    return
  if 'compare' in args:
    print(json.dumps({n: compare(n, variant)
                      for n in args['compare'].split(',')}))
    return
  if 'child' in args:
    n = int(args.get('devices', 1))
    if n > 1:
      import jax  # pylint: disable=g-import-not-at-top
      if jax.device_count() != n:   # forced host devices apply to CPUs only
        raise SystemExit(f'--devices={n}: this backend has '
                         f'{jax.device_count()} device(s)')
    print(json.dumps(measure(args['child'], variant, run, sharded=n > 1)))
    return
  only = [n for n in args.get('only', '').split(',') if n] or names()
  timeout = float(args.get('timeout', 600 if not run else 120))
  mfu = float(args.get('mfu', 0.3))
  devices = int(args.get('devices', 1))
  rows = []
  for name in only:
    t0 = time.perf_counter()
    got = _child(name, variant, run, timeout, devices)
    rows += got
    print(f'{name}: {len(got)} program(s) in {time.perf_counter() - t0:.0f} s'
          + (f" ({got[0]['error']})" if 'error' in got[0] else ''),
          file=sys.stderr, flush=True)
  print(table(rows, mfu))
  if 'write' in args:  # replaces these experiments' rows, keeps the others
    from iclrjax.core import launch  # pylint: disable=g-import-not-at-top
    commit = launch.code_commit()
    stamp = dict(commit=commit[:10] + ('-dirty' if commit.endswith('dirty')
                                       else ''),
                 date=time.strftime('%Y-%m-%d'), timed=run)
    old = (json.loads(RESULT_FILE.read_text())['rows']
           if RESULT_FILE.exists() else [])
    rows = [r for r in old if r['experiment'] not in only
            or r.get('devices', 1) != devices] + [
                {'devices': devices, **r, **stamp} for r in rows]
    rows.sort(key=lambda r: names().index(r['experiment']))
    RESULT_FILE.write_text(json.dumps(
        dict(variant=variant, mfu=mfu, rows=rows,
             summary=summarize(rows, mfu)), indent=1) + '\n')


if __name__ == '__main__':
  main(sys.argv[1:])
