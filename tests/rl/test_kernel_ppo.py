"""Kernel PPO: the math against closed forms, and the paper's claims."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from configs import kernel_ppo as kc
from experiments.kernel_ppo import EXPERIMENT
from iclrjax.core import logging as log_lib
from iclrjax.core import loop
from iclrjax.rl import envs
from iclrjax.rl import kernel_ppo as kp


@pytest.fixture
def x64():
  with jax.enable_x64(True):
    yield


def _tabular_mdp(seed, n=40, S=3, A=2, gamma=0.9):
  """n one-step samples of a random 3-state, 2-action MDP, one-hot kernel."""
  rng = np.random.default_rng(seed)
  P = rng.dirichlet(np.ones(S), size=(S, A))
  R = rng.normal(size=(S, A))
  pi = rng.dirichlet(np.ones(A), size=S)
  s0, a0 = rng.integers(0, S, n), rng.integers(0, A, n)
  s1 = np.array([rng.choice(S, p=P[s, a]) for s, a in zip(s0, a0)])
  phi = lambda s, a: np.eye(S * A)[s * A + a]
  Phi0 = phi(s0, a0)                                       # [n, SA]
  Phi1_exp = np.einsum('na,nak->nk', pi[s1], np.stack(
      [phi(s1, np.full(n, a)) for a in range(A)], 1))     # E_{a1~pi} phi
  r = R[s0, a0]
  return Phi0, Phi1_exp, r, gamma


@pytest.mark.parametrize('seed', [0, 1, 2])
def test_kernel_td_iteration_converges_to_closed_form(x64, seed):
  Phi0, Phi1, r, gamma = _tabular_mdp(seed)
  K = Phi0 @ Phi0.T                    # K(omega0_i, omega0_j)
  C = gamma * Phi1 @ Phi0.T            # gamma K(omega1_i, omega0_j)
  lam = 0.01
  b_star = kp.kernel_td_closed_form(K, C, r, lam)
  b = kp.kernel_td_iterate(K, C, r, lam, eta=0.5, num_iters=20000)
  np.testing.assert_allclose(b, b_star, atol=1e-5)
  # The same iteration in feature space (what training runs) gives the
  # same function: f(omega0) = Phi0 w = K b.
  w = jnp.zeros(Phi0.shape[1])
  step = jax.jit(lambda w: kp.td_feature_step(
      w, Phi0, gamma * Phi1 @ w, r, lam, 0.5))
  for _ in range(20000):
    w = step(w)
  np.testing.assert_allclose(Phi0 @ w, K @ b_star, atol=1e-5)
  # And it is the regularised TD fixed point: residual orthogonality.
  f0, f1 = Phi0 @ w, Phi1 @ w
  resid = Phi0.T @ (f0 - r - gamma * f1) / len(r) + lam * w
  np.testing.assert_allclose(resid, 0, atol=1e-7)


def test_npg_step_is_the_kl_regularised_argmax(x64):
  """pi_k exp(Delta f) / Z maximises Delta <f, pi> - KL(pi || pi_k): found
  numerically with L-BFGS over unconstrained logits."""
  rng = np.random.default_rng(0)
  logits_k = jnp.asarray(rng.normal(size=(5, 4)))
  f = jnp.asarray(rng.normal(size=(5, 4)))
  delta = 0.7
  closed = jax.nn.softmax(kp.npg_policy_step(logits_k, f, delta))

  def neg_objective(z):
    pi, logpi = jax.nn.softmax(z), jax.nn.log_softmax(z)
    kl = jnp.sum(pi * (logpi - jax.nn.log_softmax(logits_k)), -1)
    return -jnp.sum(delta * jnp.sum(pi * f, -1) - kl)

  opt = optax.lbfgs()
  z = jnp.zeros_like(logits_k)
  state = opt.init(z)
  value_and_grad = optax.value_and_grad_from_state(neg_objective)

  @jax.jit
  def upd(z, state):
    value, g = value_and_grad(z, state=state)
    u, state = opt.update(g, state, z, value=value, grad=g,
                          value_fn=neg_objective)
    return optax.apply_updates(z, u), state

  for _ in range(200):
    z, state = upd(z, state)
  np.testing.assert_allclose(jax.nn.softmax(z), closed, atol=1e-4)
  # A perturbed policy scores lower (the closed form is the maximiser).
  assert neg_objective(jnp.log(closed)) < neg_objective(
      jnp.log(closed) + 0.1 * jnp.asarray(rng.normal(size=(5, 4))))


def test_schedules_and_sample_size():
  k = jnp.arange(5)
  np.testing.assert_allclose(kp.delta_schedule(k, 0.5, 20.0),
                             [20.0, 1.0, 2**-0.5, 3**-0.5, 0.5], rtol=1e-6)
  np.testing.assert_array_equal(kp.sample_size(k, 100, 0.5, 180),
                                [100, 142, 174, 180, 180])
  # lambda(k) = 1e-3 (n/64)^-0.5: n = 64, 256, 576 -> 1e-3, 5e-4, 1e-3/3.
  np.testing.assert_allclose(kp.ridge_schedule(jnp.array([64, 256, 576]),
                                               1e-3, 64, 0.5),
                             [1e-3, 5e-4, 1e-3 / 3], rtol=1e-6)
  np.testing.assert_allclose(kp.ridge_schedule(jnp.array([64, 512]), 2e-3,
                                               64, 0.0), [2e-3, 2e-3])


def test_default_config_is_the_experiment_npg_section():
  """`kernel_ppo.default_config()` is what make_network uses without a
  config, and what configs/kernel_ppo.py's default `npg` section holds (so
  the documented library defaults are the recorded runs' settings)."""
  assert kp.default_config().to_dict() == kc.get_config().npg.to_dict()
  env = envs.make('CartPole-v1')
  init, _ = kp.make_network(env)
  st = jax.eval_shape(lambda k: init(k, 0.5), jax.random.key(0))
  assert st.obs.shape == (1, 4)  # default_config().num_envs = 1


CLAIM_STEPS = 99_840  # 780 updates of 128 steps: 78 chunks of 10


@pytest.fixture(scope='module')
def small_run(tmp_path_factory):
  """CartPole at ~100k steps: p in {0.5, 1.5} and PPO, 5 seeds (~30 s). The
  smoke config at a larger budget, so the compiled NPG and PPO chunks are the
  launcher smoke test's (one XLA cache per test run, tests/conftest.py)."""
  cfg = kc.get_config('smoke')
  assert cfg.num_seeds == 5 and cfg.updates_per_chunk == 10
  cfg.env_steps = (CLAIM_STEPS,)
  cfg.rkhs_envs = ()
  cfg.log_every = 10
  return EXPERIMENT.execute(cfg, tmp_path_factory.mktemp('kppo_small'))


def test_small_scale_claims(small_run):
  """k^-0.5 solves CartPole in >= 4/5 seeds within 100k steps, k^-1.5
  stalls below 200, and our PPO solves >= 4/5 seeds (paper structure)."""
  m = {k: np.asarray(v['per_seed']) for k, v in small_run['metrics'].items()}
  assert m['solved/cartpole/npg_p0.5'].sum() >= 4, m
  assert m['final_return/cartpole/npg_p1.5'].mean() < 200, m
  assert m['solved/cartpole/ppo'].sum() >= 4, m
  # The random-policy control: uniform-random CartPole-v1 play lasts ~22
  # steps (Gym's reported random baseline, 22 +- 1).
  rand = m['random_return/cartpole']
  assert rand.shape == (5,) and np.all((rand > 18) & (rand < 27)), rand
  claims = {c['claim'][:22]: c for c in small_run['claims']}
  assert claims['Delta_k = k^-1.5 stall']['holds']
  # Each claim names a control that fails it.
  for c in small_run['claims']:
    if 'reported, not gated' not in c['claim']:
      assert c['control'] and '(fails)' in c['control'], c


@pytest.fixture(scope='module')
def default_run(tmp_path_factory):
  return EXPERIMENT.execute(kc.get_config(),
                            tmp_path_factory.mktemp('kppo_default'))


def _claims(run):
  return {c['claim'].split(':')[0]: c for c in run['claims']}


@pytest.mark.slow
def test_default_config_claims(default_run):
  """The claims that hold at the default config (10 seeds, 500k/300k
  steps, final-10% means; 06a380b): k^-1.5 stalls (115.0), the RKHS form
  learns (175.1 against random 22.2); the clip-PPO baseline converges
  (10/10, 500.0; Acrobot -83.8 through `ppo_envs`)."""
  by = _claims(default_run)
  assert by['Delta_k = k^-1.5 stalls']['holds'], by
  rkhs = [c for c in default_run['claims']
          if c['claim'].startswith('The RKHS form') and 'learns' in c['claim']]
  assert rkhs and rkhs[0]['holds'], rkhs
  m = {k: np.asarray(v['per_seed']) for k, v in default_run['metrics'].items()}
  # The baseline the PPO claim compares against converges (not a claim).
  assert (m['final_return/cartpole/ppo'] >= 475).sum() >= 9, m
  assert m['final_return/acrobot/ppo'].mean() >= -100, m
  # k^-0.2 vs k^-0.5 is reported with numbers, not gated.
  rep = [c for c in default_run['claims'] if 'k^-0.2' in c['claim']]
  assert rep and 'k^-0.2' in rep[0]['evidence']


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=(
    'Graded on the final 10% of training (default config at 06a380b), '
    'k^-0.5 converges (>= 475) in 2/10 CartPole seeds within 500k steps '
    '(final-10% mean 415.9, per seed 244-484; 6/10 and 471.4 at 67a67e8, '
    'before refactors that keep the equations), below the 8/10 criterion; '
    'every seed reaches a rolling mean of 475 at some point (10/10 solved), '
    'so the policy does not stay there. k^-0.2: 430.2 (0/10).'))
def test_default_cartpole_convergence_claim(default_run):
  assert _claims(default_run)['Delta_k = k^-0.5 converges on CartPole']['holds']


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=(
    'The RKHS form (RFF kernel-TD on standardised states, closed-form NPG '
    'step, n(k) and lambda(k) rules, 1024 features, 200 TD iterations) '
    'learns but does not converge on CartPole: final-10% mean 175.1 (per '
    'seed 68-285, 0/10 converged) at 600k steps, from 77.3 after its first '
    'updates. Tried (3-seed pilots, 200-600k steps): 256 vs 1024 features, '
    'lengthscale 0.5/1/2, 50-200 TD iterations, step scales 1/0.2/0.1/0.01, '
    '16 envs, the sample rule on/off: best rolling returns 150-420.'))
def test_default_rkhs_claim(default_run):
  assert _claims(default_run)['The RKHS form (kernel-TD critic, closed-form '
                              'NPG step, n(k) and lambda(k) rules) converges '
                              'on CartPole in >= 80% of seeds.']['holds']


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=(
    'Learns, then collapses: on Acrobot-v1 (300k steps, 10 seeds, c_e '
    '0.05) every schedule ends at -500.0. The policy is softmax(Q) at '
    'temperature 1 and Q ~ -100: in 3-seed pilots (150k steps) the rolling '
    'means climb to -363/-172/-210, then the policy turns deterministic '
    '(final-10% entropy 0.00; uniform 1.10) and ends at -500. Rewards x0.1 '
    'or x0.01 keep it uniform (entropy 1.10) and it never learns (-496 to '
    '-500); c_e 2 at scale 1 keeps entropy 0.7-0.9 and 2 of 3 seeds at -154 '
    'to -168 (c_e 1: 1 seed at -111 to -125); best final-10% mean -272 '
    '(-276 at 300k), none >= -100. Clip-PPO: -83.8. Pilot table: '
    'docs/papers/kernel_ppo.md, "Acrobot pilots".'))
def test_default_config_acrobot_claim(default_run):
  assert _claims(default_run)[
      'Delta_k = k^-0.5 converges on Acrobot']['holds']


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=(
    'The paper calls PPO slower and less stable; at the default config '
    '(da2cb60, 10 seeds, 500k steps) k^-0.5 converges in 2/10 CartPole '
    'seeds (final-10% mean 415.9) and our clip-PPO (CleanRL settings; the '
    'paper\'s PPO is not released) in 10/10 (500.0).'))
def test_default_npg_beats_ppo_claim(default_run):
  assert _claims(default_run)['Delta_k = k^-0.5 converges on CartPole in '
                              'more seeds than clip-PPO (the paper']['holds']


def test_sampled_gaussian_npg_step_matches_the_tilted_gaussian():
  """With f(u) = -h (u - c)^2 / 2 and pi_k = N(m0, s0^2), pi_k exp(Delta f)
  is Gaussian with precision 1/s0^2 + Delta h and mean (m0/s0^2 + Delta h c)
  / precision; minimising the sampled objective over (mean, log_std) with
  many fixed samples recovers it."""
  m0, s0, h, cc, delta = 0.3, 0.8, 2.0, -1.0, 0.7
  prec = 1 / s0**2 + delta * h
  want_mean, want_std = (m0 / s0**2 + delta * h * cc) / prec, prec**-0.5
  eps = jax.random.normal(jax.random.key(0), (20000, 1))
  eps = (eps - eps.mean()) / eps.std()
  f = lambda u: -0.5 * h * jnp.sum((u - cc)**2, -1)
  loss = lambda p: kp.gaussian_npg_objective(
      p[0], p[1], jnp.array([m0]), jnp.log(jnp.array([s0])), f, eps,
      1.0 / delta)
  p = (jnp.zeros(1), jnp.zeros(1))
  tx = optax.adam(0.05)
  opt = tx.init(p)

  @jax.jit
  def upd(p, opt):
    g = jax.grad(loss)(p)
    u, opt = tx.update(g, opt)
    return optax.apply_updates(p, u), opt

  for _ in range(1500):
    p, opt = upd(p, opt)
  np.testing.assert_allclose(float(p[0][0]), want_mean, atol=2e-3)
  np.testing.assert_allclose(float(jnp.exp(p[1][0])), want_std, atol=2e-3)


def test_network_form_runs_on_continuous_actions():
  c = kc.get_config('smoke').npg
  c.num_envs, c.num_steps, c.num_minibatches = 2, 16, 2
  env = envs.make('Pendulum-v1')
  init, step = kp.make_network(env, c)
  st = loop.init_states(lambda k: init(k, 0.5), loop.seed_keys(0, 2))
  st, m = loop.chunk_fn(step, 3)(st, jnp.int32(0))
  for k in ('loss/policy', 'loss/td', 'kl'):
    assert np.all(np.isfinite(np.asarray(m[k]))), k


@pytest.mark.slow
def test_continuous_actions_learn_pendulum(tmp_path):
  """The `pendulum` variant (5 seeds, 1M steps, ~3.5 min): the sampled NPG
  step with k^-0.5 learns (measured -210 +- 20 over the final 10%; k^-1.5
  -1056; the untrained agents -1252)."""
  out = EXPERIMENT.execute(kc.get_config('pendulum'), tmp_path / 'pend')
  c = next(c for c in out['claims'] if 'Pendulum-v1' in c['claim'])
  assert c['holds'] and '(fails)' in c['control'], c
  m = {k: np.asarray(v['per_seed']) for k, v in out['metrics'].items()}
  assert m['final_return/pendulum/npg_p1.5'].mean() < -700, m


@pytest.mark.slow
def test_brax_variant_claims(tmp_path):
  """The `brax` variant (MJX inverted_pendulum, 5 seeds, 600k steps, ~7
  min): clip-PPO and the continuous kernel-PPO step both learn (measured
  1000.0 and 948.6 of 1000; a uniform-random policy 6.2 fails the same
  bar), and k^-1.5 stalls (146.7)."""
  out = EXPERIMENT.execute(kc.get_config('brax'), tmp_path / 'brax')
  claims = [c for c in out['claims'] if 'inverted_pendulum' in c['claim']]
  assert len(claims) == 3, out['claims']
  for c in claims:
    assert c['holds'] and '(fails)' in c['control'], c


@pytest.mark.slow
def test_rkhs_variant_learns(tmp_path):
  """The `rkhs` variant (CartPole, 5 seeds, 600k steps): the RKHS form
  learns (final-10% mean >= 100; random play ~22) though it does not
  converge (see test_default_rkhs_claim)."""
  out = EXPERIMENT.execute(kc.get_config('rkhs'), tmp_path / 'rkhs')
  c = next(c for c in out['claims'] if 'RKHS form learns' in c['claim'])
  assert c['holds'] and c['control'].count('(fails)') == 2, c


def test_halfcheetah_variant_traces_on_mjx():
  """The `halfcheetah` variant's network-form chunk at its shapes on MJX
  halfcheetah (17-d observations, 6 actions), traced, not compiled (~10 s):
  P x S = 30 rows, one metric per update of the chunk."""
  cfg = kc.get_config('halfcheetah')
  env = envs.make('brax:halfcheetah', backend=cfg.brax_backend,
                  episode_length=cfg.brax_episode_length)
  assert env.spec.obs_shape == (17,) and env.spec.num_actions == 6
  assert env.spec.max_steps == 1000 and env.brax_env.backend == 'mjx'
  init, step = kp.make_network(env, cfg.npg)
  rows = len(cfg.powers) * cfg.num_seeds
  states = loop.abstract_states(
      lambda k, p: init(k, p), jax.ShapeDtypeStruct((rows, 2), jnp.uint32),
      None, jax.ShapeDtypeStruct((rows,), jnp.float32))
  _, m = jax.eval_shape(loop.chunk_fn(step, cfg.updates_per_chunk), states,
                        jax.ShapeDtypeStruct((), jnp.int32))
  for k in ('return', 'env_steps', 'loss/td', 'kl', 'entropy'):
    assert m[k].shape == (rows, cfg.updates_per_chunk), (k, m[k])


@pytest.mark.slow
def test_halfcheetah_smoke_runs_and_records(tmp_path):
  """The `halfcheetah_smoke` variant end to end on CPU (Brax's spring
  pipeline of halfcheetah, 2 seeds x 4 updates of 4 envs x 16 steps, 16-step
  episodes): every metric is finite, each seed took exactly 256 env steps,
  returns were recorded from the first update on, and summary.json holds the
  HalfCheetah claim with its random-play control. ~60 s of CPU, almost all
  compiling the Brax physics (reset, the rollout, the random-play control):
  `slow`, like the MJX tests of test_ppo.py."""
  cfg = kc.get_config('halfcheetah_smoke')
  S, batch = cfg.num_seeds, cfg.npg.num_envs * cfg.npg.num_steps
  assert cfg.npg.num_steps % cfg.brax_episode_length == 0
  wd = tmp_path / 'hc'
  out = EXPERIMENT.execute(cfg, wd)
  m = {k: np.asarray(v['per_seed']) for k, v in out['metrics'].items()}
  for k in ('final_return/halfcheetah/npg_p0.5',
            'initial_return/halfcheetah/npg_p0.5',
            'final_entropy/halfcheetah/npg_p0.5', 'random_return/halfcheetah'):
    assert m[k].shape == (S,) and np.all(np.isfinite(m[k])), (k, m.get(k))
  rows = [r for r in log_lib.read_metrics(wd)
          if 'npg_halfcheetah/env_steps' in r]
  assert [r['step'] for r in rows] == [1, 2, 3, 4], rows
  np.testing.assert_array_equal(rows[-1]['npg_halfcheetah/env_steps'],
                                [cfg.env_steps[0]] * S)
  assert cfg.env_steps[0] == 4 * batch
  for k in ('loss/td', 'loss/policy', 'kl', 'return'):
    v = np.asarray([r[f'npg_halfcheetah/{k}'] for r in rows], float)
    assert v.shape == (4, S) and np.all(np.isfinite(v)), (k, v)
  saved = json.loads((wd / 'summary.json').read_text())
  (claim,) = [c for c in saved['claims'] if 'halfcheetah' in c['claim']]
  assert claim['control'].startswith('a uniform-random policy'), claim
  assert isinstance(claim['holds'], bool)
