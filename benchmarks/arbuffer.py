"""Joint sampling with the AR buffer's KV cache beside re-encoding, one
process, median of repeats (experiments/arbuffer.py's `time_sampling` at a
config variant's model size, random weights: the cost does not depend on
them).

  python -m benchmarks.arbuffer [--variant default] [--context 256]
      [--targets 64] [--samples 16] [--repeats 5]

Three samplers of the same joint draw (one task, S samples of N_t targets):
the buffer (context prefilled once into the cache, shared by the S samples,
one two-token step per target), re-encoding (every step a full set pass over
the context and the sampled points, the sequence grown in buckets of 8) and
the buffer model re-run without its cache (the ablation). All are one
`jit`; compiled before timing. Executed FLOPs (XLA's cost analysis of the
compiled pieces) are printed beside the wall clock.
"""

from __future__ import annotations

import argparse

import jax

from benchmarks import timing
from configs import arbuffer as arbuffer_config
from experiments import arbuffer as exp
from iclrjax.neural_process import arbuffer as ab


def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument('--variant', default='default')
  ap.add_argument('--context', type=int, nargs='+', default=None)
  ap.add_argument('--targets', type=int, default=None)
  ap.add_argument('--samples', type=int, default=None)
  ap.add_argument('--repeats', type=int, default=5)
  args = ap.parse_args()
  c = arbuffer_config.get_config(
      None if args.variant == 'default' else args.variant)
  s = c.speed
  s.repeats = args.repeats
  if args.targets:
    s.num_target = args.targets
  if args.samples:
    s.num_samples = args.samples
  cfg = exp.model_config(c)
  params = ab.init(jax.random.key(0), cfg)
  print(f'jax {jax.__version__} on {jax.devices()[0].device_kind} '
        f'({timing.num_cpus()} CPUs); model d={cfg.d_model} L='
        f'{cfg.num_layers}; {s.num_samples} samples x {s.num_target} '
        f'targets, median of {s.repeats}')
  print(f'{"N_c":>6} {"buffer ms":>10} {"re-enc ms":>10} {"no-cache ms":>11} '
        f'{"wall x":>7} {"FLOP x":>7} {"no-cache x":>10}')
  for nc in args.context or [s.num_context]:
    s.num_context = nc
    r = exp.time_sampling(cfg, params, s)
    print(f'{nc:>6} {r["buffer_s"] * 1e3:>10.1f} {r["reencode_s"] * 1e3:>10.1f}'
          f' {r["nocache_s"] * 1e3:>11.1f} '
          f'{r["reencode_s"] / r["buffer_s"]:>7.1f} '
          f'{r["reencode_flops"] / r["buffer_flops"]:>7.1f} '
          f'{r["nocache_s"] / r["buffer_s"]:>10.1f}')


if __name__ == '__main__':
  main()
