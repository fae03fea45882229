"""Paper-size points of the W2S feature model (for a GPU): d_z = 2048,
p_T = 4, p_S = 2 (d_T = 8192, d_S = 4096), n = N = 32768, eta_l = 0.3,
eta_u in {0.1, 0.3, 0.5}, ||mu_S|| in {0, 4}, 2 seeds: the simulated
teacher / student excess risks beside the closed form, and the seconds per
(point, seed) (`configs/w2s.py:paper` runs 30 points x 10 seeds).

  python -m benchmarks.w2s_paper_point   # JSON to $OUT (or /tmp)
"""

from __future__ import annotations

import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from iclrjax.stats import w2s

D_Z, N_LABELLED, N_PSEUDO = 2048, 32768, 32768


def point(key, eta_u, mu_s):
  geom = w2s.make_geometry(jax.random.fold_in(key, 0), D_Z, 6, 4, 2,
                           mu_t=4.0, mu_s=mu_s)
  sim = w2s.simulate(jax.random.fold_in(key, 1), geom, N_LABELLED, N_PSEUDO,
                     0.3, eta_u, 0.5)
  cf = w2s.closed_form(geom, N_LABELLED, N_PSEUDO, 0.3, eta_u, 0.5)
  return jnp.stack([sim.teacher, sim.student, cf.teacher, cf.student])


def main() -> None:
  jax.config.update('jax_default_matmul_precision', 'highest')
  print(jax.devices(), flush=True)
  f = jax.jit(point)
  out = {}
  for mu_s in (0.0, 4.0):
    for eta_u in (0.1, 0.3, 0.5):
      for seed in range(2):
        t0 = time.perf_counter()
        r = np.asarray(f(jax.random.PRNGKey(seed), eta_u, mu_s))
        dt = time.perf_counter() - t0
        out[f'mu_s{mu_s:g}_eta_u{eta_u:g}_seed{seed}'] = r.tolist() + [dt]
        print(f'mu_s {mu_s:g} eta_u {eta_u:g} seed {seed}: teacher / student '
              f'{r[0]:.4f} / {r[1]:.4f}, closed form {r[2]:.4f} / {r[3]:.4f}'
              f' ({dt:.1f} s)', flush=True)
  path = os.path.join(os.environ.get('OUT', '/tmp'), 'w2s_paper_point.json')
  with open(path, 'w') as f_out:
    json.dump(out, f_out, indent=1)


if __name__ == '__main__':
  main()
