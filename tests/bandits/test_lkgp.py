"""LK-GP-UCB / TS and baselines: decisions, equivalences, claims."""

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
import scipy.stats

from configs import lkgp_bandit as lk_config
from experiments import lkgp_bandit as exp
from iclrjax import kernels
from iclrjax.bandits import envs
from iclrjax.bandits import lkgp
from iclrjax.core import loop
from iclrjax.kernels import gp
from tests.conftest import smoke_launch, smoke_summary, find_claim as _claim


@pytest.fixture(autouse=True)
def x64():
  with jax.enable_x64(True):
    yield


def _graph(n=5, seed=0, p=0.5):
  return np.asarray(envs.er_graph(jax.random.PRNGKey(seed), n, p))


@pytest.mark.parametrize('kind', ['gob', 'laplacian'])
def test_linear_kernel_form_equals_primal_ridge(kind):
  """GP-UCB with a linear kernel and user kernel K_G is ridge regression in
  R^{n d} with penalty lam theta^T (K_G^{-1} (x) I) theta: GOB.Lin for
  K_G = (I + L)^{-1}, GraphUCB's Laplacian-regularised mean for
  (L + rho I)^{-1}. Primal: features phi(x, u) = (K_G^{1/2} e_u) (x) x,
  mean phi^T M^{-1} Phi^T y, width^2 lam phi^T M^{-1} phi,
  M = Phi^T Phi + lam I.
  """
  rng = np.random.default_rng(0)
  n, d, t, lam = 5, 3, 40, 0.01
  W = _graph(n)
  K_G = np.asarray(lkgp.user_kernel(kind, jnp.asarray(W), 0.1))
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
  W = jnp.asarray(_graph(6, seed=1))
  lap = lkgp.user_kernel('laplacian', W, 0.1)
  want = np.linalg.inv(np.asarray(kernels.laplacian(W)) + 0.1 * np.eye(6))
  np.testing.assert_allclose(lap, want / np.mean(np.diag(want)), rtol=1e-10)
  perm = jnp.array([3, 0, 5, 1, 4, 2])
  np.testing.assert_allclose(lkgp.user_kernel('permuted', W, 0.1, perm),
                             np.asarray(lap)[perm][:, perm], rtol=1e-10)
  np.testing.assert_allclose(lkgp.user_kernel('independent', W, 0.1),
                             np.eye(6))
  np.testing.assert_allclose(lkgp.user_kernel('coop', W, 0.1), np.eye(6))
  np.testing.assert_allclose(lkgp.user_kernel('pooled', W, 0.1),
                             np.ones((6, 6)))
  for a in (0.0, 0.3, 1.0):  # between independent (0) and pooled (1)
    np.testing.assert_allclose(lkgp.user_kernel('shared', W, 0.1, share=a),
                               a * np.ones((6, 6)) + (1 - a) * np.eye(6))
  for kind in ('laplacian', 'gob', 'independent', 'pooled', 'shared'):
    assert abs(np.mean(np.diag(lkgp.user_kernel(kind, W, 0.1))) - 1) < 1e-12


def test_graphucb_width_is_the_exact_width_for_disconnected_users():
  """With no edges the joint precision is block diagonal, so GraphUCB's
  per-user width equals the linear-kernel GP's posterior std. On a graph
  it inverts the user's diagonal block A_uu of the joint precision A
  instead of taking the block of A^{-1}, and (A^{-1})_uu >= (A_uu)^{-1}
  (Schur complement): the width is below the exact std."""
  rng = np.random.default_rng(1)
  n, d, t, lam = 4, 3, 30, 0.05
  X, u = rng.uniform(-1, 1, (t, d)), rng.integers(0, n, t).astype(np.int32)
  Xq = rng.uniform(-1, 1, (5, d))
  for W, exact in ((np.zeros((n, n)), True), (_graph(n, 2, 0.9), False)):
    K_G = lkgp.user_kernel('laplacian', jnp.asarray(W), 0.3)
    P = np.linalg.inv(np.asarray(K_G))
    kernel = lkgp.joint_kernel(K_G, 0.0, 1.0, 1.0)
    post = gp.from_data(jnp.asarray(X), jnp.asarray(u), jnp.zeros(t), kernel,
                        lam)
    _, var = gp.predict(post, jnp.asarray(Xq), jnp.zeros(5, jnp.int32), kernel)
    V0 = X[u == 0].T @ X[u == 0]
    width = lkgp.graphucb_width(jnp.asarray(V0), P[0, 0], lam,
                                jnp.asarray(Xq))
    if exact:
      np.testing.assert_allclose(width, np.sqrt(var), rtol=1e-8)
    else:
      assert np.all(width <= np.sqrt(var) + 1e-12)
      assert np.max(np.sqrt(var) - width) > 1e-5


def test_coop_user_kernel_matches_direct_mmd():
  rng = np.random.default_rng(2)
  n, d, t, T = 4, 2, 25, 32
  X = rng.uniform(-1, 1, (T, d))
  y = rng.normal(size=T)
  u = rng.integers(0, n - 1, T).astype(np.int32)   # user 3 has no data
  post = gp.init(T, d)._replace(X=jnp.asarray(X), y=jnp.asarray(y),
                                u=jnp.asarray(u), t=jnp.int32(t))
  K = np.asarray(lkgp.coop_user_kernel(post, n, 0.7, 0.5))
  k = lambda i, j: (np.exp(-np.sum((X[i] - X[j])**2) / (2 * 0.49))
                    * np.exp(-(y[i] - y[j])**2 / (2 * 0.25)))
  idx = [np.flatnonzero(u[:t] == v) for v in range(n)]
  emb = lambda a, b: np.mean([[k(i, j) for j in idx[b]] for i in idx[a]])
  mmd2 = {(a, b): emb(a, a) + emb(b, b) - 2 * emb(a, b)
          for a in range(3) for b in range(3) if a != b}
  tau = np.median(list(mmd2.values()))
  for (a, b), m in mmd2.items():
    np.testing.assert_allclose(K[a, b], np.exp(-m / tau), rtol=1e-8)
  np.testing.assert_allclose(np.diag(K), 1.0)
  np.testing.assert_allclose(K[3], np.eye(n)[3])   # no data: independent
  assert np.min(np.linalg.eigvalsh(K)) > -1e-10


def test_ml_grid_fit_is_the_argmax_of_scipy_log_likelihoods():
  rng = np.random.default_rng(3)
  n, d, t = 5, 2, 60
  W = jnp.asarray(_graph(n, 4, 0.6))
  X = jnp.asarray(rng.uniform(-1, 1, (t, d)))
  u = jnp.asarray(rng.integers(0, n, t), jnp.int32)
  truth = lkgp.joint_kernel(lkgp.user_kernel('laplacian', W, 1.0), 1.0, 0.0,
                            0.5)
  K = np.asarray(truth(X, u, X, u)) + 0.01 * np.eye(t)
  y = np.linalg.cholesky(K) @ rng.normal(size=t)
  post = gp.from_data(X, u, jnp.asarray(y), truth, 0.01, capacity=64)
  rhos, lss = np.array([0.1, 1.0, 10.0]), np.array([0.25, 0.5, 2.0])
  scores = {}
  for r in rhos:
    for l in lss:
      k = lkgp.joint_kernel(lkgp.user_kernel('laplacian', W, r), 1.0, 0.0, l)
      scores[(r, l)] = scipy.stats.multivariate_normal(
          np.zeros(t), np.asarray(k(X, u, X, u)) + 0.01 * np.eye(t)).logpdf(y)
  want = max(scores, key=scores.get)
  got = lkgp.ml_grid_fit(post, W, 0.01, jnp.asarray(rhos), jnp.asarray(lss))
  np.testing.assert_allclose([float(got[0]), float(got[1])], want)


def test_spectral_ratio_lam():
  rng = np.random.default_rng(4)
  X = jnp.asarray(rng.uniform(-1, 1, (12, 2)))
  u = jnp.zeros(12, jnp.int32)
  kernel = lkgp.joint_kernel(jnp.ones((1, 1)), 1.0, 0.0, 1.0)
  post = gp.from_data(X, u, jnp.zeros(12), kernel, 0.01, capacity=20)
  top = np.linalg.eigvalsh(np.asarray(kernel(X, u, X, u)))[-1]
  np.testing.assert_allclose(
      lkgp.spectral_ratio_lam(post, kernel, 1e-4, 100.0, 16), top / 100)
  np.testing.assert_allclose(
      lkgp.spectral_ratio_lam(post, kernel, 1.0, 100.0, 16), 1.0)


def test_select_plays_the_rules_argmax_and_feeds_append():
  """`select` scores the arms by UCB / TS with the posterior (the rule's
  argmax under a full refit) and returns the column and variance that let
  `gp.append` skip its own pass (the same posterior as a plain append)."""
  with jax.enable_x64(True):
    rng = np.random.default_rng(5)
    W = jnp.asarray(np.roll(np.eye(4), 1, 1) + np.roll(np.eye(4), -1, 1))
    kernel = lkgp.lk_kernel(W, rho=0.1, lengthscale=0.7)
    X, arms = (jnp.asarray(rng.uniform(-1, 1, (n, 2))) for n in (9, 15))
    u, y = jnp.asarray(rng.integers(0, 4, 9), jnp.int32), jnp.asarray(
        rng.normal(size=9))
    post = gp.from_data(X, u, y, kernel, 0.01, capacity=12)
    mean, var = gp.full_posterior(X, u, y, arms, jnp.full(15, 2), kernel,
                                  0.01)
    key = jax.random.key(3)
    z = jax.random.normal(key, (15,), jnp.float64)

    @functools.partial(jax.jit, static_argnums=0)
    def play(rule):
      j, l, v = lkgp.select(post, kernel, arms, 2, rule=rule, key=key)
      fast = gp.append(post, arms[j], jnp.int32(2), 0.3, kernel, 0.01, l=l,
                       var=v)
      plain = gp.append(post, arms[j], jnp.int32(2), 0.3, kernel, 0.01)
      return j, v, fast.a, plain.a

    for rule, score in (('ucb', mean + 0.5 * np.sqrt(var)),
                        ('ts', mean + 0.5 * z * np.sqrt(var))):
      j, v, fast, plain = play(rule)
      assert int(j) == int(np.argmax(score)), rule
      np.testing.assert_allclose(v, var[int(j)], rtol=1e-6, atol=1e-10)
      np.testing.assert_allclose(fast, plain, rtol=1e-8, atol=1e-10)
    with pytest.raises(ValueError, match='needs a key'):
      lkgp.select(post, kernel, arms, 2, rule='ts')
    with pytest.raises(ValueError, match='rule'):
      lkgp.select(post, kernel, arms, 2, rule='eps_greedy')


def _select_example() -> str:
  block = lkgp.select.__doc__.split('```python', 1)[1].split('```', 1)[0]
  lines = [l for l in block.splitlines() if l.strip()]
  indent = min(len(l) - len(l.lstrip()) for l in lines)
  return '\n'.join(l[indent:] for l in block.splitlines())


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_select_docstring_example_learns_in_both_precisions(dtype):
  """`select`'s docstring example (a user's ring graph and arms, 120 TS
  rounds) as written in float32, and in float64 under enable_x64: the
  regret of the second half falls below the first's and below random
  play's (the control)."""
  code = _select_example().replace('jnp.float32', f'jnp.{dtype}')
  ns = {}
  with jax.enable_x64(dtype == 'float64'):
    exec(code.replace('print(', '_ = ('), ns)  # pylint: disable=exec-used
    regret = np.asarray(ns['regret'])
    assert ns['post'].a.dtype == dtype
    r = ns['reward']
    rand = float(jnp.mean(jax.vmap(lambda u: jnp.max(r(ns['arms'], u))
                                   - jnp.mean(r(ns['arms'], u)))(
                                       jnp.arange(ns['n']))))
    post, kernel = ns['post'], ns['kernel']
    Xq = ns['arms'][:8]
    uq = jnp.arange(8, dtype=jnp.int32) % ns['n']
    got = gp.predict(post, Xq, uq, kernel)
  with jax.enable_x64(True):   # the exact posterior of the same data
    cast = lambda x: jnp.asarray(np.asarray(x), jnp.float64)
    want = gp.full_posterior(cast(post.X), post.u, cast(post.y), cast(Xq),
                             uq, lkgp.lk_kernel(cast(ns['W'])), 0.01)
  for g, w in zip(got, want):  # the O(T^2) recursion stays accurate
    np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-3)
  assert np.isfinite(regret).all()
  assert regret[60:].mean() < regret[:60].mean(), regret
  assert regret[60:].mean() < 0.5 * rand, (regret[60:].mean(), rand)


# -- the compiled bandit loop ----------------------------------------------------------
@pytest.fixture(scope='module')
def smoke_run():
  """Sixteen rounds of the smoke config for one seed, states after each."""
  with jax.enable_x64(True):
    cfg = lk_config.get_config('smoke')
    init, step = exp.make_init(cfg), exp.make_step(cfg)
    state = init(loop.seed_keys(0, 1)[0])
    step = jax.jit(step)
    states = [state]
    for t in range(16):
      state, _ = step(state, jnp.int32(t))
      states.append(state)
    return cfg, states


@pytest.mark.parametrize('t', [7, 13])
def test_each_algorithm_picks_its_rules_argmax(smoke_run, t):
  """The arm chosen at round t is argmax of the rule under a full refit with
  the algorithm's current K_G, lengthscale and lam (t = 7: in the exact
  phase; t = 13: after the schedule froze lam and a refit at round 10)."""
  cfg, states = smoke_run
  k_vis = exp.num_visible(cfg)
  before, after = states[t], states[t + 1]
  ctx = envs.round_context(before.round_key, t, cfg.num_users, cfg.num_arms,
                           k_vis, cfg.noise_std)
  Xq = before.arms[ctx.visible]
  uq = jnp.full((k_vis,), ctx.user, jnp.int32)
  for r in range(len(cfg.regimes)):
    for a, name in enumerate(cfg.algorithms):
      algo = lkgp.ALGORITHMS[name]
      post = jax.tree.map(lambda x, r=r, a=a: x[r, a], before.post)
      lam = float(before.lam[r, a])
      kernel = lkgp.joint_kernel(before.K_users[r, a],
                                 float(algo.base_kernel != 'linear'),
                                 float(algo.base_kernel != 'rbf'),
                                 float(before.lengthscale[r, a]))
      mean, var = gp.full_posterior(post.X[:t], post.u[:t], post.y[:t], Xq,
                                    uq, kernel, lam)
      width = np.sqrt(np.maximum(var, 0))
      if algo.width == 'per_user':
        mine = np.asarray(post.u[:t]) == int(ctx.user)
        Xu = np.asarray(post.X[:t])[mine]
        P = np.linalg.inv(np.asarray(before.K_users[r, a]))
        M = Xu.T @ Xu + lam * P[ctx.user, ctx.user] * np.eye(cfg.dim)
        width = np.sqrt(lam * np.einsum('qi,iq->q', np.asarray(Xq),
                                        np.linalg.solve(M, np.asarray(Xq).T)))
      if algo.rule == 'ucb':
        score = mean + cfg.beta * width
      else:
        z = jax.random.normal(jax.random.fold_in(
            jax.random.fold_in(before.ts_key, t), a), (k_vis,), jnp.float64)
        score = mean + cfg.nu * z * width
      arm = ctx.visible[int(np.argmax(score))]
      np.testing.assert_allclose(after.post.X[r, a, t], before.arms[arm],
                                 err_msg=name)
      assert int(after.post.u[r, a, t]) == int(ctx.user)
      f = before.F[r, ctx.user]
      np.testing.assert_allclose(after.post.y[r, a, t], f[arm] + ctx.noise)
      regret = after.cum_regret[r, a] - before.cum_regret[r, a]
      np.testing.assert_allclose(regret, np.max(f[ctx.visible]) - f[arm])
      assert regret >= 0


def test_schedule_refits_exactly_then_freezes_lam(smoke_run):
  """For t < exact_rounds every posterior is the exact one under lam_t =
  max(noise^2, lambda_max(K_t) / ratio); then lam stays fixed and the
  recursion keeps the posterior exact."""
  cfg, states = smoke_run
  E = cfg.exact_rounds
  lams = np.stack([np.asarray(s.lam) for s in states])   # [t, R, A]
  assert np.all(lams[E:] == lams[E])                     # frozen after E
  assert np.all(lams >= exp.noise_var(cfg) - 1e-15)
  assert np.any(lams[E] > exp.noise_var(cfg))            # the ratio binds
  s = states[-1]
  a = cfg.algorithms.index('lk_gp_ucb')
  post = jax.tree.map(lambda x: x[0, a], s.post)
  kernel = lkgp.joint_kernel(s.K_users[0, a], 1.0, 0.0,
                             float(s.lengthscale[0, a]))
  t = int(post.t)
  Xq, uq = s.arms[:7], jnp.arange(7, dtype=jnp.int32) % cfg.num_users
  want = gp.full_posterior(post.X[:t], post.u[:t], post.y[:t], Xq, uq, kernel,
                           float(s.lam[0, a]))
  for g, w in zip(gp.predict(post, Xq, uq, kernel), want):
    np.testing.assert_allclose(g, w, atol=1e-8)


def test_refits_change_only_their_algorithms(smoke_run):
  """At round 10 LK-GP-UCB-ML takes grid hyperparameters, the shared
  kernel a grid share and lengthscale, and COOP an MMD user kernel; every
  other algorithm keeps its K_G and lengthscale."""
  cfg, states = smoke_run
  b, a = states[cfg.refit_every - 1], states[cfg.refit_every]
  for i, name in enumerate(cfg.algorithms):
    changed = not np.allclose(a.K_users[:, i], b.K_users[:, i])
    refit = lkgp.ALGORITHMS[name].refit
    assert changed == (refit != 'none') or refit in ('ml', 'ml_shared'), (
        name)
    if refit == 'ml_shared':
      assert set(np.asarray(a.rho[:, i])) <= set(cfg.shared_grid), name
      K = np.asarray(a.K_users[:, i])
      np.testing.assert_allclose(K[:, 0, 1], np.asarray(a.rho[:, i]))
    if refit == 'ml':
      assert set(np.asarray(a.rho[:, i])) <= set(cfg.ml_rho_grid)
    if refit in ('ml', 'ml_shared'):
      assert set(np.asarray(a.lengthscale[:, i])) <= set(
          cfg.ml_lengthscale_grid), name
    else:
      np.testing.assert_array_equal(a.lengthscale[:, i], b.lengthscale[:, i])


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


# -- claims -------------------------------------------------------------------------------
def _cum(cfg, means, spread=1.0):
  """Synthetic per-seed final regrets: regime -> algorithm -> mean."""
  S = cfg.num_seeds
  jitter = spread * np.linspace(-1, 1, S)
  return {exp.metric_name(cfg, reg, alg): means[reg].get(alg, 100.0) + jitter
          for reg in cfg.regimes for alg in cfg.algorithms}


def test_claims_hold_when_lk_wins_and_their_controls_fail():
  cfg = lk_config.get_config()
  good = {reg: {'lk_gp_ucb': 50.0, 'lk_gp_ts': 60.0, 'lk_gp_ucb_ml': 55.0,
                'lk_gp_ucb_permuted': 150.0, 'lk_gp_ucb_permuted2': 150.0,
                'lk_gp_ts_permuted': 160.0,
                'goblin': 30.0 if reg == 'linear_gob' else 100.0}
          for reg in cfg.regimes}
  claims = exp.evaluate_claims(cfg, _cum(cfg, good))
  assert len(claims) == 8
  for c in claims:
    if '[linear_gob]' in c.claim:
      assert not c.holds and c.control.endswith('(fails)'), c   # 100/30
    else:
      assert c.holds and c.control.endswith('(fails)'), c
  beats = [c for c in claims if 'non-graph' in c.claim]
  assert len(beats) == 5
  # The fitted non-graph kernel doing as well as LK fails them all (paired
  # CI), though LK still beats every paper baseline.
  shared = {reg: dict(v, shared_gp_ucb_ml=45.0) for reg, v in good.items()}
  for c in exp.evaluate_claims(cfg, _cum(cfg, shared))[:5]:
    assert not c.holds and 'wins: indep_gp_ucb 10/10' in c.evidence, c
  # LK on the permuted graph doing as well passes the control.
  perm = {reg: dict(v, lk_gp_ucb_permuted=50.0, lk_gp_ts_permuted=60.0)
          for reg, v in good.items()}
  for c in exp.evaluate_claims(cfg, _cum(cfg, perm))[:5]:
    assert c.holds and c.control.endswith('(passes)'), c
  # The graph claims (paired CIs): a permutation no worse than the true
  # graph fails them.
  same = {reg: dict(v, lk_gp_ucb=150.0) for reg, v in good.items()}
  graph = [c for c in exp.evaluate_claims(cfg, _cum(cfg, same))
           if ', graph]' in c.claim]
  assert len(graph) == 2 and not any(c.holds for c in graph), graph
  # RBF + linear LK within 1.3x of GOB.Lin holds; per-user LinUCB as
  # close would pass the control.
  lin = {reg: dict(v, lk_gp_ucb_rbflin=35.0, peruser_linucb=36.0)
         for reg, v in good.items()}
  (c,) = [c for c in exp.evaluate_claims(cfg, _cum(cfg, lin))
          if '[linear_gob]' in c.claim]
  assert c.holds and c.control.endswith('(passes)'), c


def test_smoke_launcher_run_records_claims_controls_and_plots():
  summary = smoke_summary('lkgp_bandit')   # the launcher test's run
  wd, _ = smoke_launch('lkgp_bandit')
  assert len(summary['claims']) == 8
  for c in summary['claims']:
    assert c['control'], c
  m = summary['metrics']
  assert len(m['cumulative_regret/lk_gp_ucb']['per_seed']) == 2
  assert set(m['gp_draw_misspec/rho/lk_gp_ucb_ml']['per_seed']) <= {0.1, 1.0}
  for name in ('cumulative_regret_gp_draw', 'cumulative_regret_linear_gob',
               'cumulative_regret_gp_draw_misspec', 'rho_lk_gp_ucb_ml',
               'share_shared_gp_ucb_ml'):
    assert (wd / 'plots' / f'{name}.png').exists(), name


# -- the default run (slow) ------------------------------------------------------------
@pytest.fixture(scope='module')
def default_run(tmp_path_factory):
  wd = tmp_path_factory.mktemp('lkgp_default')
  return exp.EXPERIMENT.execute(lk_config.get_config(), wd), wd


@pytest.mark.slow
@pytest.mark.parametrize('prefix', [
    '[gp_draw, graph]', '[gp_draw_misspec, graph]', '[linear_gob]'])
def test_default_run_claims(default_run, prefix):
  # Measured at 34b393a (10 seeds): permuted - LK +21.3 +- 9.0 (null +7.0
  # +- 8.7) and +45.4 +- 23.3 (null +11.2 +- 18.8); RBF + linear LK 1.12x
  # GOB.Lin (RBF alone 2.03x; per-user LinUCB 1.77x fails).
  c = _claim(default_run[0], prefix)
  assert c['holds'], c
  assert c['control'].endswith('(fails)'), c


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=(
    'Does not hold: against the fitted non-graph kernel (shared_gp_ucb_ml, '
    'a 1 1^T + (1 - a) I with (a, l) by type-II ML), default config at '
    '34b393a, 10 seeds: LK-GP-TS on gp_draw shared - LK -21.9 +- 17.2 (LK '
    'worse); LK-GP-UCB on gp_draw_misspec +5.9 +- 27.4 (the shared kernel '
    'fits l = 0.5 as LK-ML does)'))
@pytest.mark.parametrize('prefix', ['[gp_draw, lk_gp_ts]',
                                    '[gp_draw_misspec, lk_gp_ucb]'])
def test_default_run_shared_kernel_claims_that_fail(default_run, prefix):
  c = _claim(default_run[0], prefix)
  assert c['control'].endswith('(fails)'), c
  assert c['holds'], c


@pytest.mark.slow
@pytest.mark.parametrize('prefix', ['[gp_draw, lk_gp_ucb]',
                                    '[gp_draw_misspec, lk_gp_ucb_ml]',
                                    '[representer_draw, lk_gp_ucb]'])
def test_default_run_marginal_shared_kernel_claims(default_run, prefix):
  """Recorded as not holding, but each CI's lower end is within one SE of
  0 (34b393a: shared - LK +12.2 +- 13.2 on gp_draw, +23.8 +- 26.4 for
  LK-GP-UCB-ML, +2.0 +- 2.5 on the representer draw): a seed can flip the
  verdict, so the test checks the verdict is the CI's and that the control
  (the permuted-graph LK, below the shared kernel) fails, not the verdict."""
  c = _claim(default_run[0], prefix)
  d, ci = (float(v) for v in re.search(
      r'shared_gp_ucb_ml - \S+ ([+-][\d.]+) \+- ([\d.]+)',
      c['evidence']).groups())
  assert c['holds'] == (d - ci > 0), c
  assert c['control'].endswith('(fails)'), c
