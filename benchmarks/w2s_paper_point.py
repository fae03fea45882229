"""Paper-size points of the W2S feature model (a GPU): d_z = 2048, p_T = 4,
p_S = 2 (d_T = 8192, d_S = 4096), n = N = 32768, 2 seeds, eta_l = 0.3,
eta_u in {0.1, 0.3, 0.5}, ||mu_S|| in {0, 4}: simulated teacher / student
excess risks beside the closed form, and seconds per (point, seed).

  python -m benchmarks.w2s_paper_point     # writes $OUT/w2s_paper_gpu.json
"""
import json, os, time
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_default_matmul_precision", "highest")
from iclrjax.stats import w2s
print(jax.devices(), flush=True)
d_z, n, N = 2048, 32768, 32768
out = {}
def one(key, eta_u, mu_s):
  geom = w2s.make_geometry(jax.random.fold_in(key, 0), d_z, 6, 4, 2, mu_t=4.0, mu_s=mu_s)
  sim = w2s.simulate(jax.random.fold_in(key, 1), geom, n, N, 0.3, eta_u, 0.5)
  cf = w2s.closed_form(geom, n, N, 0.3, eta_u, 0.5)
  return jnp.stack([sim.teacher, sim.student, cf.teacher, cf.student])
f = jax.jit(one)
for mu_s in (0.0, 4.0):
  for eta_u in (0.1, 0.3, 0.5):
    for seed in range(2):
      t = time.time()
      r = np.asarray(f(jax.random.PRNGKey(seed), eta_u, mu_s))
      dt = time.time() - t
      out[f'mu_s{mu_s}_eu{eta_u}_s{seed}'] = r.tolist() + [dt]
      print(mu_s, eta_u, seed, r.round(5), f'{dt:.1f}s', flush=True)
json.dump(out, open(os.path.join(os.environ.get('OUT', '/tmp'), 'w2s_paper_gpu.json'), 'w'), indent=1)
