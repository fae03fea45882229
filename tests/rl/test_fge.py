"""FGE (arXiv 2602.15817): buffers, novelty, baselines' math, the claims."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from configs import fge as fc
from experiments.fge import EXPERIMENT
from iclrjax.rl import fge
from iclrjax.rl import rollout as ro
from iclrjax.rl.reach import base
from iclrjax.rl.reach import toylevels


# -- buffers and pieces ---------------------------------------------------------
def test_ring_push_wraps_in_order_and_contains():
  r = fge.Ring.create(4, (1,))
  rows = jnp.arange(6, dtype=jnp.float32)[:, None]
  r = r.push(rows[:3], jnp.array([True, False, True]))  # pushes 0, 2
  assert int(r.count) == 2 and int(r.size) == 2
  np.testing.assert_array_equal(r.data[:2, 0], [0, 2])
  r = r.push(rows[3:], jnp.array([True, True, True]))   # 3, 4, 5 wrap
  assert int(r.count) == 5 and int(r.size) == 4
  np.testing.assert_array_equal(np.sort(r.data[:, 0]), [2, 3, 4, 5])
  assert float(r.newest()[0]) == 5.0
  np.testing.assert_array_equal(
      r.contains(jnp.array([[0.0], [4.0], [9.0]])), [False, True, False])
  empty = fge.Ring.create(4, (1,))
  assert not bool(empty.contains(jnp.zeros((1, 1)))[0])  # unfilled slots


def test_first_occurrence_dedupes_masked_rows():
  rows = jnp.array([[1.0], [2.0], [1.0], [3.0], [2.0]])
  mask = jnp.array([True, False, True, True, True])
  np.testing.assert_array_equal(fge._first_occurrence(rows, mask),
                                [True, False, False, True, True])


def test_mixture_probs_redistribute_like_the_paper_code():
  p = lambda *n: np.asarray(fge._mixture_probs(0.02, 0.8, 0.08, *n))
  np.testing.assert_allclose(p(5, 5, 5), [0.02, 0.8, 0.08, 0.1], atol=1e-6)
  # No rehearsal buffer yet: its mass goes to explore.
  np.testing.assert_allclose(p(5, 0, 5), [0.02, 0.9, 0.08, 0.0], atol=1e-6)
  # Nothing but the nominal distribution yet.
  np.testing.assert_allclose(p(0, 0, 0), [1.0, 0.0, 0.0, 0.0], atol=1e-6)
  # Empty predicted-feasible set: its mass goes to rehearsal.
  np.testing.assert_allclose(p(5, 5, 0), [0.02, 0.8, 0.0, 0.18], atol=1e-6)


def test_kde_matches_scipy():
  rng = np.random.default_rng(0)
  centres = rng.normal(size=(50, 2))
  pts = rng.normal(size=(7, 2))
  h = 0.3
  mask = np.arange(64) < 50
  padded = np.concatenate([centres, 99 * np.ones((14, 2))])
  ours = fge.kde_log_density(jnp.asarray(pts), jnp.asarray(padded),
                             jnp.asarray(mask), h)
  ref = scipy.stats.gaussian_kde(centres.T, bw_method=1.0)
  ref.set_bandwidth(bw_method=1.0)
  # scipy scales by the data covariance; compare with the isotropic formula.
  direct = np.log(np.mean(np.exp(-0.5 * ((pts[:, None] - centres[None]) ** 2
                                         ).sum(-1) / h**2), 1)
                  / (2 * np.pi * h**2))
  np.testing.assert_allclose(ours, direct, rtol=1e-5, atol=1e-5)
  del ref


def test_episode_scores_match_a_loop():
  """PLR's score: mean |GAE| over each episode's steps in the rollout."""
  rng = np.random.default_rng(1)
  T, E, gamma, lam = 7, 3, 0.9, 0.8
  value = rng.normal(size=(T, E)).astype(np.float32)
  reward = rng.normal(size=(T, E)).astype(np.float32)
  term = rng.random((T, E)) < 0.2
  trunc = (rng.random((T, E)) < 0.1) & ~term
  batch = ro.Batch(None, None, None, jnp.asarray(value), jnp.asarray(reward),
                   jnp.asarray(term), jnp.asarray(trunc), None, None)
  got = np.asarray(fge.episode_scores(batch, gamma, lam))
  want = np.zeros((T, E))
  for e in range(E):
    nv = np.concatenate([value[1:, e], value[-1:, e]])
    nv = np.where(trunc[:, e], value[:, e], nv)
    adv, a = np.zeros(T), 0.0
    for t in reversed(range(T)):
      done = term[t, e] or trunc[t, e]
      d = reward[t, e] + gamma * (1 - term[t, e]) * nv[t] - value[t, e]
      a = d + gamma * lam * (1 - done) * a
      adv[t] = a
    seg, s = np.zeros(T, int), 0
    for t in range(T):
      seg[t] = s
      s += term[t, e] or trunc[t, e]
    for t in range(T):
      same = seg == seg[t]
      want[t, e] = np.abs(adv[same]).mean()
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# -- ToyLevels ---------------------------------------------------------------------
def _scripted(obs):
  """Go left early in the hard level and push left through the disturbance."""
  x, y = obs[:, 0] * 25 + 25, obs[:, 1] * 25 + 25
  hard = jnp.argmax(obs[:, -3:], -1) == 1
  left = hard & ((x > 36.5) | ((y < 15.5) & (y >= 4.5)))
  return jnp.where(left, 1, 0)


def test_toylevels_ground_truth_by_scripted_controllers():
  task = toylevels.ToyLevels()
  th = task.eval_thetas(500)
  assert len(th) == 500
  safe = np.asarray(jax.jit(lambda t: base.rollout_safe(task, _scripted, t))(
      jnp.asarray(th)))
  truth = task.feasible(th)
  # The scripted controller is safe exactly on the claimed feasible set ...
  np.testing.assert_array_equal(safe, truth)
  cov = base.region_coverage(task, th, safe)
  assert cov['coverage/easy'] == 1.0 and cov['coverage/hard'] == 1.0
  # ... and no fixed action sequence saves the impossible level.
  for a in range(3):
    s = base.rollout_safe(task, lambda o, a=a: jnp.full(o.shape[0], a),
                          jnp.asarray(th[~truth]))
    assert not np.any(np.asarray(s))
  # Doing nothing fails the hard level (the disturbance pushes into a wall).
  none = np.asarray(base.rollout_safe(
      task, lambda o: jnp.zeros(o.shape[0], jnp.int32), jnp.asarray(th)))
  assert base.region_coverage(task, th, none)['coverage/hard'] == 0.0


def test_toylevels_box_coordinates_round_trip():
  task = toylevels.ToyLevels()
  th = task.eval_thetas(90)
  ends = np.asarray(toylevels.RESET).ravel()
  th = jnp.asarray(th[np.abs(th[:, :1] - ends[None]).min(1) > 1e-3])
  u = jax.vmap(task.to_box)(th)  # (region ends touch; a null set)
  assert float(u.min()) >= -1 and float(u.max()) <= 1
  np.testing.assert_allclose(jax.vmap(task.from_box)(u), th, atol=1e-4)
  # Each reset region is a third of the box.
  reg = np.asarray(jax.vmap(task.region_of)(th))
  for i in range(3):
    assert np.all((u[reg == i] >= -1 + 2 * i / 3 - 1e-6) &
                  (u[reg == i] <= -1 + 2 * (i + 1) / 3 + 1e-6))


def test_reach_env_resets_to_next_theta_and_reports_episodes():
  task = toylevels.ToyLevels()
  env = base.ReachEnv(task)
  _, st = env.reset_to(jnp.array([47.0]))     # impossible: fails eventually
  st = base.set_next_theta(st, jnp.array([10.0]))
  step = jax.jit(env.step)
  rewards, dones = [], []
  for _ in range(200):
    st, out = step(jax.random.key(0), st, jnp.int32(0))
    rewards.append(float(out.reward))
    dones.append(bool(out.info['done']))
    if dones[-1]:
      assert not bool(out.info['safe'])
      assert float(out.info['theta'][0]) == 47.0
      break
  assert dones[-1] and rewards[-1] == -1.0 and sum(rewards) == -1.0
  assert float(st.theta[0]) == 10.0 and int(st.t) == 0
  assert float(st.task_state.pos[0]) == 10.0


# -- FGE on ToyLevels ------------------------------------------------------------------
@pytest.fixture(scope='module')
def certified_run():
  """A short FGE run (16 envs): enough finished episodes to certify."""
  c = fc.get_config('smoke')
  c.num_updates = 40
  task = toylevels.ToyLevels()
  init, step, _, _ = fge.make_trainer(task, c, 'fge', c.num_updates)
  from iclrjax.core import loop  # pylint: disable=g-import-not-at-top
  st = loop.init_states(init, loop.seed_keys(0, 2))
  st, m = loop.chunk_fn(step, 20)(st, jnp.int32(0))
  st, m = loop.chunk_fn(step, 20)(st, jnp.int32(20))
  return task, st, m


def test_certified_buffer_has_no_false_positives(certified_run):
  """Only theta with a safe rollout enter D_f; none is infeasible."""
  task, st, m = certified_run
  cert = st.sampler.certified
  for i in range(2):
    n = min(int(cert.count[i]), cert.data.shape[1])
    th = np.asarray(cert.data[i, :n])
    assert n > 0
    assert not np.any(~task.feasible(th)), th[~task.feasible(th)]
    assert len(np.unique(th[:, 0])) == n  # deduplicated
  # The collide buffer does hold impossible theta (they were tried).
  col = st.sampler.collide
  n = min(int(col.count[0]), col.data.shape[1])
  assert np.any(~task.feasible(np.asarray(col.data[0, :n])))
  assert np.all(np.isfinite(m['fge/loss_feas']))


@pytest.fixture(scope='module')
def claims_run(tmp_path_factory):
  """FGE and DR at the default config (3 seeds, 1000 iterations of 128 x 30
  steps); PLR and RARL run in the slow test."""
  c = fc.get_config()
  c.methods = ('fge', 'dr')
  return EXPERIMENT.execute(c, tmp_path_factory.mktemp('fge_claims'))


def test_fge_vs_dr_claims(claims_run):
  """The issue's ToyLevels claims against domain randomisation."""
  m = {k: np.asarray(v['per_seed']) for k, v in claims_run['metrics'].items()}
  assert m['coverage_hard/fge'].mean() >= 0.8, m
  assert m['coverage_hard/dr'].mean() <= 0.2, m
  assert m['coverage_easy/fge'].mean() >= 0.95, m
  assert m['coverage_loss/fge_vs_dr'].mean() <= 0.05, m
  assert m['coverage_impossible/fge'].max() == 0.0, m
  assert np.all(m['certified_infeasible/fge'] == 0), m
  by = {c['claim'][:30]: c['holds'] for c in claims_run['claims']}
  assert all(by.values()), claims_run['claims']


@pytest.mark.parametrize('variant', ['pendulum', 'hopper_smoke', 'hopper'])
def test_task_variants_validate(variant):
  EXPERIMENT.validate(fc.get_config(variant))


def test_bad_task_kwarg_is_a_clear_error():
  c = fc.get_config('smoke')
  c.task_kwargs.horizn = 3
  with pytest.raises(ValueError, match='task_kwargs.horizn'):
    EXPERIMENT.validate(c)


def test_hopper_smoke_trains_on_cpu(tmp_path):
  """The MJX Hopper (slopes and a gap) trains a few FGE and DR iterations."""
  out = EXPERIMENT.execute(fc.get_config('hopper_smoke'), tmp_path / 'hop')
  m = out['metrics']
  for method in ('fge', 'dr'):
    assert 0.0 <= m[f'coverage/{method}']['mean'] <= 1.0
    assert f'coverage_gap/{method}' in m
  assert (tmp_path / 'hop' / 'plots' / 'coverage.png').exists()


@pytest.fixture(scope='module')
def default_run(tmp_path_factory):
  return EXPERIMENT.execute(fc.get_config(),
                            tmp_path_factory.mktemp('fge_default'))


@pytest.mark.slow
def test_default_config_claims(default_run):
  """All four methods, 3 seeds, 1000 iterations: every claim holds."""
  for c in default_run['claims']:
    assert c['holds'], c
