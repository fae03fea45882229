"""LK-GP-UCB / TS and baselines: decisions, equivalences, claims."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

from configs import lkgp_bandit as lk_config
from experiments.lkgp_bandit import EXPERIMENT
from iclrjax import kernels
from iclrjax.bandits import envs
from iclrjax.bandits import lkgp
from iclrjax.core import loop
from iclrjax.kernels import gp


@pytest.fixture(autouse=True)
def x64():
  with jax.enable_x64(True):
    yield


def test_gob_lin_kernel_form_equals_primal_linucb():
  """GP-UCB with a linear kernel and K_G = (I + L)^{-1} is GOB.Lin.

  GOB.Lin works with features phi(x, u) = ((I + L)^{-1/2} e_u) (x) x and a
  ridge regression in R^{n d}: mean phi^T M^{-1} Phi^T y and width^2
  lam phi^T M^{-1} phi, M = Phi^T Phi + lam I.
  """
  rng = np.random.default_rng(0)
  n, d, t, lam = 5, 3, 40, 0.01
  W = np.asarray(envs.er_graph(jax.random.PRNGKey(0), n, 0.5))
  K_G = np.linalg.inv(np.eye(n) + np.diag(W.sum(1)) - W)
  B = scipy.linalg.sqrtm(K_G).real
  X, u = rng.uniform(-1, 1, (t, d)), rng.integers(0, n, t)
  y = rng.normal(size=t)
  Xq, uq = rng.uniform(-1, 1, (6, d)), rng.integers(0, n, 6)
  phi = lambda X, u: np.einsum('ti,tj->tij', B[:, u].T, X).reshape(len(u), -1)
  Phi, Phq = phi(X, u), phi(Xq, uq)
  M = Phi.T @ Phi + lam * np.eye(n * d)
  mean_p = Phq @ np.linalg.solve(M, Phi.T @ y)
  var_p = lam * np.einsum('qi,qi->q', Phq, np.linalg.solve(M, Phq.T).T)

  kernel = lkgp.joint_kernel(jnp.asarray(K_G), 0.0, 1.0, 1.0)
  post = gp.from_data(jnp.asarray(X), jnp.asarray(u, jnp.int32),
                      jnp.asarray(y), kernel, lam)
  mean_k, var_k = gp.predict(post, jnp.asarray(Xq), jnp.asarray(uq, jnp.int32),
                             kernel)
  np.testing.assert_allclose(mean_k, mean_p, atol=1e-8)
  np.testing.assert_allclose(var_k, var_p, atol=1e-8)


def test_user_kernels():
  W = envs.er_graph(jax.random.PRNGKey(1), 6, 0.5)
  lap = lkgp.user_kernel('laplacian', W, 0.1)
  want = np.linalg.inv(np.asarray(kernels.laplacian(W)) + 0.1 * np.eye(6))
  np.testing.assert_allclose(lap, want / np.mean(np.diag(want)), rtol=1e-10)
  np.testing.assert_allclose(lkgp.user_kernel('independent', W, 0.1),
                             np.eye(6))
  np.testing.assert_allclose(lkgp.user_kernel('pooled', W, 0.1),
                             np.ones((6, 6)))
  for kind in ('laplacian', 'gob', 'independent', 'pooled'):
    assert abs(np.mean(np.diag(lkgp.user_kernel(kind, W, 0.1))) - 1) < 1e-12


@pytest.fixture(scope='module')
def smoke_run():
  """Ten rounds of the smoke config for one seed, states after each round."""
  with jax.enable_x64(True):
    cfg = lk_config.get_config('smoke')
    init, step = lkgp.make_init(cfg), lkgp.make_step(cfg)
    state = init(loop.seed_keys(0, 1)[0])
    step = jax.jit(step)
    states = [state]
    for t in range(10):
      state, _ = step(state, jnp.int32(t))
      states.append(state)
    return cfg, states


def test_each_algorithm_picks_its_rules_argmax(smoke_run):
  """The arm chosen at round t is argmax of the rule under a full refit."""
  cfg, states = smoke_run
  k_vis, lam = lkgp.num_visible(cfg), lkgp.noise_var(cfg)
  t = 7
  before, after = states[t], states[t + 1]
  ctx = envs.round_context(before.round_key, t, cfg.num_users, cfg.num_arms,
                           k_vis, cfg.noise_std)
  Xq = before.arms[ctx.visible]
  uq = jnp.full((k_vis,), ctx.user, jnp.int32)
  for r in range(len(cfg.regimes)):
    for a, name in enumerate(cfg.algorithms):
      algo = lkgp.ALGORITHMS[name]
      post = jax.tree.map(lambda x, r=r, a=a: x[r, a], before.post)
      kernel = lkgp.joint_kernel(before.K_users[a],
                                 float(algo.base_kernel == 'rbf'),
                                 float(algo.base_kernel == 'linear'),
                                 cfg.lengthscale)
      mean, var = gp.full_posterior(post.X[:t], post.u[:t], post.y[:t], Xq,
                                    uq, kernel, lam)
      if algo.rule == 'ucb':
        score = mean + cfg.beta * np.sqrt(np.maximum(var, 0))
      else:
        z = jax.random.normal(jax.random.fold_in(
            jax.random.fold_in(before.ts_key, t), a), (k_vis,), jnp.float64)
        score = mean + cfg.nu * z * np.sqrt(np.maximum(var, 0))
      arm = ctx.visible[int(np.argmax(score))]
      chosen = after.post.X[r, a, t]
      np.testing.assert_allclose(chosen, before.arms[arm], err_msg=name)
      assert int(after.post.u[r, a, t]) == int(ctx.user)
      f = before.F[r, ctx.user]
      np.testing.assert_allclose(after.post.y[r, a, t], f[arm] + ctx.noise)
      regret = after.cum_regret[r, a] - before.cum_regret[r, a]
      np.testing.assert_allclose(regret, np.max(f[ctx.visible]) - f[arm])
      assert regret >= 0


def test_algorithms_share_users_arms_and_noise(smoke_run):
  """Within a seed every algorithm faces the same users and the same noise."""
  _, states = smoke_run
  s = states[-1]
  t = int(s.post.t[0, 0])
  assert np.all(s.post.u[..., :t] == s.post.u[:1, :1, :t])
  # Recover each pick's arm index, then the noise y - f_u(arm) it received.
  arm_idx = np.argmin(np.linalg.norm(
      np.asarray(s.post.X[..., :t, None, :]) - np.asarray(s.arms), axis=-1),
                      axis=-1)                                   # [R, A, t]
  R, A = arm_idx.shape[:2]
  f = np.stack([[np.asarray(s.F[r])[np.asarray(s.post.u[r, a, :t]),
                                    arm_idx[r, a]] for a in range(A)]
                for r in range(R)])
  noise = np.asarray(s.post.y[..., :t]) - f
  np.testing.assert_allclose(noise, np.broadcast_to(noise[:1, :1], noise.shape),
                             atol=1e-12)
  assert np.std(noise) > 0.01  # there is noise, and it is shared


@pytest.fixture(scope='module')
def default_run(tmp_path_factory):
  """The default config: 5 seeds, T=500, gp_draw and linear_gob (~30 s)."""
  wd = tmp_path_factory.mktemp('lkgp_default')
  return EXPERIMENT.execute(lk_config.get_config(), wd), wd


def test_default_config_ucb_and_ts_claims(default_run):
  """LK-GP-UCB beats independent, pooled GP-UCB and GOB.Lin in >= 4/5 seeds
  and is >= 15% below pooled; LK-GP-TS beats independent and pooled GP-UCB
  in >= 4/5 seeds (measured: 137.5 vs 252.4 / 279.5 / 338.4; TS 172.0)."""
  summary, wd = default_run
  ucb, ts = summary['claims'][:2]
  assert ucb['holds'], ucb
  assert ts['holds'], ts
  m = {k: v['mean'] for k, v in summary['metrics'].items()}
  assert m['cumulative_regret/lk_gp_ucb'] < 0.85 * m[
      'cumulative_regret/pooled_gp_ucb']
  assert (wd / 'plots' / 'cumulative_regret_gp_draw.png').exists()
  assert (wd / 'plots' / 'cumulative_regret_linear_gob.png').exists()


@pytest.mark.xfail(strict=True, reason=(
    'Does not reproduce at our scale: on linear_gob rewards (default config, '
    'T=500, 5 seeds) LK-GP-UCB with an RBF base kernel (l=1) has 2.13x the '
    'cumulative regret of GOB.Lin (96.0 vs 45.0); l=2 or 4 gives 1.46x, '
    'rho=1 2.26x, and the easy level (10 arms, T=1000) 2.05x (69.7 vs '
    '34.0). GOB.Lin is the well-specified model there.'))
def test_default_config_linear_gob_claim(default_run):
  summary, _ = default_run
  (lin,) = [c for c in summary['claims'] if '[linear_gob]' in c['claim']]
  assert lin['holds'], lin
