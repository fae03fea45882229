"""FGE (arXiv 2602.15817): buffers, novelty, baselines' math, the claims."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from configs import fge as fc
from experiments import fge as fge_exp
from experiments.fge import EXPERIMENT
from iclrjax.core import loop
from iclrjax.rl import curricula
from iclrjax.rl import fge
from iclrjax.rl import rollout as ro
from iclrjax.rl import reach
from iclrjax.rl.reach import base
from iclrjax.rl.reach import toylevels


# -- buffers and pieces ---------------------------------------------------------
def test_ring_push_wraps_in_order_and_contains():
  r = curricula.Ring.create(4, (1,))
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
  empty = curricula.Ring.create(4, (1,))
  assert not bool(empty.contains(jnp.zeros((1, 1)))[0])  # unfilled slots


def test_first_occurrence_dedupes_masked_rows():
  rows = jnp.array([[1.0], [2.0], [1.0], [3.0], [2.0]])
  mask = jnp.array([True, False, True, True, True])
  np.testing.assert_array_equal(curricula.first_occurrence(rows, mask),
                                [True, False, False, True, True])


def test_mixture_probs_redistribute_like_the_paper_code():
  p = lambda *n: np.asarray(fge.mixture_probs(0.02, 0.8, 0.08, *n))
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
  got = np.asarray(curricula.episode_scores(batch, gamma, lam))
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


# -- FGE pieces -----------------------------------------------------------------------
def test_priority_queue_keeps_the_highest_and_updates_rows():
  q = fge.PriorityQueue.create(3, 1)
  th = jnp.arange(5, dtype=jnp.float32)[:, None]
  q = q.add(th[:4], jnp.array([1.0, 5.0, 3.0, 2.0]),
            jnp.array([True, True, True, False]))
  top, ok = q.top(2)
  np.testing.assert_array_equal(top[:, 0], [1.0, 2.0])
  assert bool(ok.all())
  # Row 1 comes back with a low priority (replaced, not duplicated) and a
  # new row 4 enters; capacity 3 keeps the three highest.
  q = q.add(jnp.stack([th[1], th[4]]), jnp.array([0.5, 4.0]),
            jnp.array([True, True]))
  kept = sorted(zip(np.asarray(q.priority)[np.asarray(q.filled)],
                    np.asarray(q.theta)[np.asarray(q.filled), 0]))
  assert kept == [(1.0, 0.0), (3.0, 2.0), (4.0, 4.0)], kept
  # Two copies of a row in one call: the last one's priority wins.
  q = q.add(jnp.stack([th[2], th[2]]), jnp.array([9.0, 0.1]),
            jnp.array([True, True]))
  assert float(q.priority[np.asarray(q.theta[:, 0]) == 2.0][0]) == np.float32(
      0.1)


def test_bce_smooths_labels_to_one_minus_s_and_s():
  """The release's smoothing (update_fn.py:119-120): the BCE is minimal at
  sigmoid(logit) = 1 - s for positives and s for negatives."""
  s = 0.05
  z = jnp.array([np.log((1 - s) / s), np.log(s / (1 - s))], jnp.float32)
  g = jax.grad(lambda z: fge.bce(z, jnp.array([1.0, 0.0]), jnp.ones(2), s))(z)
  np.testing.assert_allclose(g, 0.0, atol=1e-6)


def test_explore_candidates_in_the_release_order_and_ties_to_the_first():
  """Collide rows, the queue's top, then rho (buf_custom.py:407-458); when
  every candidate costs the same sentinel the first valid one is picked."""
  q = fge.PriorityQueue.create(4, 1).add(
      jnp.array([[7.0], [8.0]]), jnp.array([2.0, 1.0]), jnp.ones(2, bool))
  col = jnp.array([[1.0], [2.0]])
  rho = jnp.array([[3.0], [4.0], [5.0], [6.0]])
  cand, ok, from_buf = fge.explore_candidates(
      col, jnp.array([True, False]), q, 1, rho)
  np.testing.assert_array_equal(cand[:, 0], [1, 2, 7, 3, 4, 5, 6])
  np.testing.assert_array_equal(ok, [1, 0, 1, 1, 1, 0, 0])
  np.testing.assert_array_equal(from_buf, [1, 1, 1, 0, 0, 0, 0])
  cost = fge.explore_costs(jnp.zeros(7), jnp.ones(7), jnp.zeros(7, bool),
                           0.4)
  assert np.all(np.asarray(cost) == np.float32(fge.COST_PREDICTED_FEASIBLE))
  pick, q2 = fge.explore_pick(cand, cost, ok, from_buf, q)
  assert int(pick) == 0
  # Unsafe at t = 0 costs less than predicted feasible.
  cost = fge.explore_costs(jnp.zeros(7), jnp.ones(7),
                           jnp.arange(7) == 4, 0.4)
  assert int(fge.explore_pick(cand, cost, ok, from_buf, q)[0]) == 4
  # The collide row and the pick enter the queue; row 7 is re-scored.
  kept = dict(zip(np.asarray(q2.theta)[np.asarray(q2.filled), 0],
                  np.asarray(q2.priority)[np.asarray(q2.filled)]))
  assert set(kept) == {1.0, 7.0, 8.0}
  assert kept[7.0] == np.float32(fge.COST_PREDICTED_FEASIBLE)


def test_spline_flow_is_a_normalised_density_that_fits():
  """The flowjax spline flow integrates to 1, and full-batch steps on
  bimodal data (+-2, sd 0.3) take its NLL below any Gaussian's (the
  standardised data's Gaussian NLL is 0.5 log(2 pi e) = 1.419) and put more
  density at the modes than between them."""
  flow = fge.SplineFlow(1, 2, 16, 8, 4.0, 3e-2, 1e-4)
  st = flow.init(jax.random.key(0))
  log_prob = jax.jit(flow.log_prob)
  z = jnp.linspace(-12, 12, 4001)[:, None]
  dens = np.exp(np.asarray(log_prob(st, z)))
  np.testing.assert_allclose(np.trapezoid(dens, z[:, 0]), 1.0, atol=2e-3)
  k1, k2 = jax.random.split(jax.random.key(1))
  x = (0.3 * jax.random.normal(k1, (1024, 1))
       + 2.0 * jnp.where(jax.random.bernoulli(k2, 0.5, (1024, 1)), 1, -1))
  fit = jax.jit(lambda st: jax.lax.scan(
      lambda s, _: flow.fit(s, x), st, None, length=150))
  st, losses = fit(st)
  loss = losses[-1]
  assert float(loss) < 1.419 - 0.2, float(loss)
  lp = log_prob(st, jnp.array([[2.0], [0.0], [-2.0]]))
  assert float(lp[0]) > float(lp[1]) + 1 and float(lp[2]) > float(lp[1]) + 1


def _run_sampler(task, c, method, iters, seeds=2):
  init, step, _ = curricula.make_trainer(
      task, c, fge_exp.make_sampler(method, task, c), c.num_updates)
  st = loop.init_states(init, loop.seed_keys(0, seeds))
  st, m = loop.chunk_fn(step, iters)(st, jnp.int32(0))
  return st, jax.tree.map(np.asarray, m)


@pytest.fixture(scope='module')
def pendulum_run():
  """FGE's sampler update on the skewed pendulum (3-d theta), driven by 12
  rollouts in which each of 16 envs ends one episode: 8 from theta drawn
  by the sampler's own proposal, 8 uniform on the box, labelled safe on
  the easy region (a stand-in label: the buffers' contents are under test,
  not the labels). The novelty model is the smoke's KDE."""
  c = fc.get_config('smoke')
  c.task = 'pendulum'
  c.task_kwargs = {'horizon': 30, 'nominal': 'skewed'}
  task = reach.make_task('pendulum', **c.task_kwargs)
  sampler = fge_exp.make_sampler('fge', task, c)
  update = jax.jit(sampler.update, static_argnums=2)
  propose = jax.jit(sampler.propose)
  lo, hi = np.asarray(task.theta_low), np.asarray(task.theta_high)
  rng = np.random.default_rng(0)
  s = sampler.init(jax.random.key(0))
  rows = []
  for t in range(12):
    s, proposed, _ = propose(s, t)
    th = jnp.concatenate([proposed[:8], jnp.asarray(
        rng.uniform(lo, hi, (8, lo.size)), jnp.float32)])
    safe = jax.vmap(task.region_of)(th) == 0
    s, m = update(s, _episode_batch(th, safe), None, t)
    rows.append(m)
  m = {k: np.asarray([r[k] for r in rows])[None] for k in rows[0]}
  return task, c, (jax.tree.map(lambda x: x[None], s), m)


def test_every_buffer_holds_only_points_of_theta(pendulum_run):
  """No buffer is padded with a placeholder theta (the old predicted-
  feasible buffer was filled with theta = 0, u_max = 0, outside Theta)."""
  task, _, (st, m) = pendulum_run
  lo, hi = task.theta_low, task.theta_high
  bufs = jax.vmap(fge.buffer_thetas)(st)
  assert m['fge/certified'][:, -1].min() > 0  # something was certified
  # The full method's parts are on (the ablations' are off: below).
  assert np.asarray(st.rehearse.count).min() > 0
  assert np.asarray(st.predci_size).min() > 0
  for name, (theta, filled) in bufs.items():
    theta, filled = np.asarray(theta), np.asarray(filled)
    for i in range(theta.shape[0]):
      rows = theta[i][filled[i]]
      assert len(rows) or name in ('predci', 'rehearse', 'prioq'), name
      inside = np.all((rows >= lo - 1e-6) & (rows <= hi + 1e-6), axis=1)
      assert inside.all(), (name, rows[~inside][:5])
  assert np.all(np.isfinite(m['fge/loss_density']))


def test_uniform_box_sampler_covers_each_toylevels_region_equally():
  task = toylevels.ToyLevels()
  s = curricula.uniform_box(task, 3000)
  _, th, _ = s.propose(s.init(jax.random.key(0)), 0)
  reg = np.asarray(jax.vmap(task.region_of)(th))
  np.testing.assert_allclose(np.bincount(reg, minlength=3) / 3000, 1 / 3,
                             atol=0.03)
  dr = curricula.domain_randomisation(task, 3000)
  _, th, _ = dr.propose(dr.init(jax.random.key(0)), 0)
  assert np.mean(np.asarray(jax.vmap(task.region_of)(th)) == 1) < 0.005


def _episode_batch(theta_E, safe_E, T=4):
  """A rollout in which every env ends one episode at its last step."""
  E = theta_E.shape[0]
  info = {'theta': jnp.broadcast_to(theta_E[None], (T,) + theta_E.shape),
          'done': jnp.zeros((T, E), bool).at[-1].set(True),
          'safe': jnp.zeros((T, E), bool).at[-1].set(safe_E)}
  return ro.Batch(*([None] * 9), info=info)


def test_certificates_and_ablation_switches():
  """Only theta whose episode ended safe enter D_f (the zero-false-positive
  invariant holds by construction: a unit test, not a claim); unsafe ones
  enter the collide buffer; the explore-only ablation never fills the
  rehearsal or predicted-feasible buffers."""
  c = fc.get_config('smoke')
  c.fge.density = 'flow'  # the method's novelty model, inside the update
  task = toylevels.ToyLevels()
  sampler = fge_exp.make_sampler('fge_explore_only', task, c)
  theta = jnp.array([[10.0], [20.0], [47.0], [48.0], [30.0], [46.0]])
  safe = jnp.array([True, True, False, False, True, False])
  update = jax.jit(lambda s, b: sampler.update(s, b, None, 0))
  s = sampler.init(jax.random.key(0))
  for _ in range(3):
    s, m = update(s, _episode_batch(theta, safe))
  cert = np.asarray(s.certified.data[:int(s.certified.size), 0])
  np.testing.assert_array_equal(np.sort(cert), [10.0, 20.0, 30.0])
  col = np.asarray(s.collide.data[:int(s.collide.size), 0])
  np.testing.assert_array_equal(np.sort(col), [46.0, 47.0, 48.0])
  assert task.feasible(cert[:, None]).all()
  assert int(s.explore.count) == 3
  assert int(s.rehearse.count) == 0 and int(s.predci_size) == 0
  assert np.isfinite(float(m['fge/loss_density']))


@pytest.fixture(scope='module')
def toy_fge():
  """One compiled FGE update on ToyLevels (rho on the easy level, a one-unit
  feasibility classifier, a pick every 2nd iteration, 5 rho candidates a
  pick), shared by the explore-step tests below."""
  c = fc.get_config('smoke')
  c.fge.clf_hidden = (1,)
  c.fge.pick_every, c.fge.rho_candidates = 2, 5
  task = toylevels.ToyLevels(nominal_probs=(1.0, 0.0, 0.0))
  sampler = fge_exp.make_sampler('fge', task, c)
  return c, task, sampler, jax.jit(sampler.update, static_argnums=2)


def test_explore_picks_the_least_dense_candidate_not_predicted_feasible(
    toy_fge):
  """The explore step on a constructed state: a one-unit classifier predicts
  feasible (q ~ 1) exactly left of x = 20; the visited starts (the KDE)
  cover x in [19, 32] and [39, 41]; the collide buffer offers 3.6 (the
  least dense of all, predicted feasible) and 42 (sparse, not predicted
  feasible); rho's candidates lie in the easy level. FGE must pick 42, the
  explore-only ablation (no filter) a candidate left of 20; the region
  diagnostics count what was offered, filtered and picked."""
  c, task, fge_sampler, fge_update = toy_fge
  x0 = (20.0 - 25.0) / 25.0   # the boundary in obs feature 0, (x - 25) / 25

  def constructed(method):
    sampler = (fge_sampler if method == 'fge'
               else fge_exp.make_sampler(method, task, c))
    s = sampler.init(jax.random.key(0))
    p = jax.tree.map(jnp.zeros_like, s.feas.params)
    d0, d1 = p['params']['Dense_0'], p['params']['Dense_1']
    d0['kernel'] = d0['kernel'].at[0, 0].set(50.0)
    d0['bias'] = d0['bias'].at[0].set(-50.0 * x0)
    d1['kernel'] = d1['kernel'].at[0, 0].set(-10.0)
    s = s._replace(feas=s.feas._replace(params=p))
    vis = np.concatenate([np.linspace(19.0, 32.0, 150),
                          np.linspace(39.0, 41.0, 50)])[:, None]
    s = s._replace(visited=s.visited.push(
        jax.vmap(task.to_box)(jnp.asarray(vis, jnp.float32)),
        jnp.ones(len(vis), bool)))
    col = jnp.array([[3.6], [42.0]])
    s = s._replace(collide=s.collide.push(col, jnp.ones(2, bool)),
                   collide_alive=s.collide_alive.at[:2].set(True),
                   onpol_theta=s.onpol_theta.push(col, jnp.ones(2, bool)))
    q = fge.feasibility_fn(task, c.fge)(s, jnp.array([[3.6], [19.0], [21.0],
                                                      [42.0]]))
    np.testing.assert_array_less([0.4, 0.4], np.asarray(q[:2]))
    np.testing.assert_array_less(np.asarray(q[2:]), [0.4, 0.4])
    none_ended = _episode_batch(jnp.zeros((4, 1)), jnp.zeros(4, bool))
    none_ended.info['done'] = jnp.zeros_like(none_ended.info['done'])
    update = (fge_update if method == 'fge'
              else jax.jit(sampler.update, static_argnums=2))
    return update(s, none_ended, None, 0)

  s, m = constructed('fge')
  assert float(m['fge/explore_theta']) == pytest.approx(42.0)
  assert float(s.explore.newest()[0]) == pytest.approx(42.0)
  offered = sum(float(m[f'fge/diag_offered/{r}']) for r in
                task.region_names)
  assert offered == 2 + c.fge.rho_candidates   # 2 collide + the capped rho
  assert float(m['fge/diag_picked/hard']) == 1.0
  assert float(m['fge/diag_filtered/hard']) == 0.0
  assert 1.0 <= float(m['fge/diag_filtered/easy']) < float(
      m['fge/diag_offered/easy'])
  assert float(m['fge/diag_first_cert/hard']) == -1.0
  _, m = constructed('fge_explore_only')
  assert float(m['fge/explore_theta']) < 20.0
  assert float(m['fge/diag_filtered/easy']) == 0.0


def test_pick_every_rho_cap_and_first_certificate(toy_fge):
  """`pick_every = 2` pushes explore and rehearsal picks (and counts the
  diagnostics) on even iterations only; `rho_candidates` caps the rho
  candidates a pick sees; the first certified theta of a region records
  its iteration."""
  c, task, sampler, update = toy_fge
  assert (c.fge.pick_every, c.fge.rho_candidates) == (2, 5)
  s = sampler.init(jax.random.key(0))
  safe_easy = _episode_batch(jnp.array([[10.0], [12.0], [10.0], [12.0]]),
                             jnp.ones(4, bool))
  none = _episode_batch(jnp.zeros((4, 1)), jnp.zeros(4, bool))
  none.info['done'] = jnp.zeros_like(none.info['done'])
  counts = []
  for t, batch in enumerate([none, none, none, safe_easy, none]):
    s, m = update(s, batch, None, t)
    counts.append((int(s.explore.count), int(s.rehearse.count),
                   sum(float(m[f'fge/diag_offered/{r}'])
                       for r in task.region_names),
                   sum(float(m[f'fge/diag_offered_rho/{r}'])
                       for r in task.region_names)))
  # Picks at t = 0, 2, 4; rehearsal needs a certificate (from t = 3 on).
  assert [x[0] for x in counts] == [1, 1, 2, 2, 3]
  assert [x[1] for x in counts] == [0, 0, 0, 0, 1]
  # Each pick offers the 5 capped rho candidates, beside the queue's rows
  # (the first pick's queue is empty).
  assert [x[3] for x in counts] == [5.0, 5.0, 10.0, 10.0, 15.0]
  assert counts[0][2] == 5.0 and counts[4][2] > counts[4][3]
  assert float(m['fge/diag_first_cert/easy']) == 3.0
  assert float(m['fge/diag_first_cert/hard']) == -1.0


def _metrics(**per_seed):
  return {k.replace('__', '/'): np.asarray(v, float)
          for k, v in per_seed.items()}


def test_claims_fail_for_a_sampler_without_the_feasibility_machinery():
  """The claim logic on fixed numbers: FGE's gap passes, the explore-only
  control's and DR's do not, and each claim names its control."""
  c = fc.get_config()
  m = _metrics(coverage_feasible_hard__fge=[0.9, 0.95, 1.0, 0.9, 0.95],
               coverage_feasible_hard__fge_explore_only=[0.2, 0.5, 0.1, 0.3,
                                                         0.4],
               coverage_feasible_hard__dr=[0.0, 0.05, 0.0, 0.0, 0.1],
               coverage_feasible_hard__plr=[0.1, 0.0, 0.0, 0.2, 0.0],
               coverage_feasible_hard__uniform=[0.95] * 5,
               coverage_loss__fge_vs_dr=[0.0, 0.01, 0.0, 0.0, 0.01],
               coverage_loss__rarl_vs_dr=[0.3, 0.2, 0.4, 0.3, 0.2])
  claims = fge_exp.evaluate_claims(c, m)
  assert [cl.holds for cl in claims] == [True, True, True, True]
  assert 'fails' in claims[0].control and 'explore only' in claims[0].control
  # Seeds: FGE 5/5 against PLR 0/5: p = 1 / C(10, 5); explore only 1/5.
  assert 'p = 0.00397' in claims[1].evidence, claims[1].evidence
  assert 'FGE explore only 1/5' in claims[1].control
  assert 'fails' in claims[1].control
  assert 'explore only in its place' in claims[2].control
  assert 'fails' in claims[2].control
  assert 'RARL' in claims[3].control and 'fails' in claims[3].control
  m['coverage_feasible_hard__fge'.replace('__', '/')] = m[
      'coverage_feasible_hard/fge_explore_only']
  assert not any(cl.holds for cl in fge_exp.evaluate_claims(c, m)[:2])


def test_wilson_and_fisher_match_closed_forms():
  lo, hi = fge_exp.wilson(0, 10)
  z2 = scipy.stats.norm.ppf(0.975)**2
  assert lo == 0.0 and hi == pytest.approx(z2 / (10 + z2), rel=1e-9)
  assert fge_exp.fisher_greater(5, 5, 0, 5) == pytest.approx(1 / 252)
  assert fge_exp.fisher_greater(0, 5, 5, 5) == pytest.approx(1.0)


@pytest.mark.parametrize('variant', fc.VARIANTS)
def test_variants_validate(variant):
  EXPERIMENT.validate(fc.get_config(variant))


def test_bad_task_kwarg_is_a_clear_error():
  c = fc.get_config('smoke')
  c.task_kwargs.horizn = 3
  with pytest.raises(ValueError, match='task_kwargs.horizn'):
    EXPERIMENT.validate(c)


def test_bad_claim_region_is_a_clear_error():
  c = fc.get_config('smoke')
  c.claims.region = 'weak'
  with pytest.raises(ValueError, match='claims.region'):
    EXPERIMENT.validate(c)


@pytest.mark.slow
def test_hopper_smoke_trains_on_cpu(tmp_path):
  """The MJX Hopper (slopes and a gap) trains a few FGE and DR iterations:
  every explore candidate falls in one of the six regions, the pairwise
  gain and loss add up to the coverage difference, and the plots exist."""
  c = fc.get_config('hopper_smoke')
  out = EXPERIMENT.execute(c, tmp_path / 'hop')
  m = {k: v['mean'] for k, v in out['metrics'].items()}
  task = reach.make_task('hopper', **c.task_kwargs.to_dict())
  offered = sum(m[f'explore_offered_{r}/fge'] for r in task.region_names)
  assert offered == c.fge.explore_candidates * c.num_updates
  np.testing.assert_allclose(
      m['coverage_gain/fge_vs_dr'] - m['coverage_loss/fge_vs_dr'],
      m['coverage/fge'] - m['coverage/dr'], atol=1e-9)
  for plot in ('coverage.png', 'explore_diagnostics.png'):
    assert (tmp_path / 'hop' / 'plots' / plot).exists()


@pytest.fixture(scope='module')
def default_run(tmp_path_factory):
  return EXPERIMENT.execute(fc.get_config(),
                            tmp_path_factory.mktemp('fge_default'))


def _claim(run, start):
  return next(c for c in run['claims'] if c['claim'].startswith(start))


@pytest.mark.slow
def test_default_keeps_what_dr_covers(default_run):
  """ToyLevels, 12 methods x 5 seeds x 1000 iterations (~25 min on 2
  cores): FGE's coverage loss against DR is 0.000 (3be85d9); PAIRED's
  0.058 +- 0.161 fails the same bar."""
  c = _claim(default_run, 'FGE keeps what DR covers')
  assert c['holds'] and '(fails)' in c['control'], c


_DEFAULT_RUN = (
    'At the default (5 seeds, 1000 iterations, the release\'s masses and '
    'PPO; 3be85d9) FGE covers the hard level 0.494 (seeds 0, 1, 0.80, 0.67, '
    '0; 3/5 seeds) against DR, PLR, SFL, VDS 0.000 and RARL 0.014, but ACCEL '
    'and PAIRED 1.000 in 5/5, as the uniform-box oracle: gap -0.506 +- '
    '0.579. One failing seed is offered 8 hard candidates and picks none, '
    'the other picks 346 and certifies none; explore only covers 2/5.')


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=_DEFAULT_RUN)
def test_default_beats_the_best_baseline_on_the_hard_region(default_run):
  assert _claim(default_run, 'FGE covers the feasible theta of the hard '
                'region better')['holds']


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=_DEFAULT_RUN)
def test_default_matches_the_oracle_sampler(default_run):
  assert _claim(default_run, 'FGE finds the feasible theta')['holds']


@pytest.fixture(scope='module')
def ratio_run(tmp_path_factory):
  return EXPERIMENT.execute(fc.get_config('ratio'),
                            tmp_path_factory.mktemp('fge_ratio'))


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=(
    'At the release\'s ratios (10 seeds, 55 min on 2 cores; f4d7402) FGE '
    'covers the hard level in 8/10 seeds (0.778; the failing two certify '
    'their first hard theta at iterations 818 and 788), beating DR 0/10, '
    'PLR 1/10, RARL 0/10 and SFL 0/10 (Fisher p < 0.01), but ACCEL covers '
    'it in 10/10 (0.995; its mutants walk from the easy level\'s edge into '
    'the hard one) and PAIRED (regret maximised) in 8/10: gap to ACCEL '
    '-0.217 +- 0.238.'))
def test_ratio_beats_every_existing_method(ratio_run):
  assert _claim(ratio_run, 'FGE covers the feasible theta of the hard '
                'region better')['holds']


_CONTESTS = {
    'pendulum_skewed': ('FGE covers the feasible theta', (
        'pendulum_skewed (8 seeds, 1000 iterations, 3be85d9): weak-band '
        'feasible coverage FGE 0.786 (seeds 0.36-0.97) vs RARL 0.970 (its '
        'adversary samples the whole box), PLR 0.809, DR 0.199, uniform-box '
        'DR 0.970; gap to the best baseline -0.184 +- 0.231; the '
        'explore-only ablation covers 0.918.')),
    'dubins_skewed': ('FGE covers the hard region', (
        'dubins_skewed (8 seeds, 2000 iterations of 64 envs x 30 steps, ~30 '
        'min, 14b389d): hard-region grid coverage FGE 0.532 vs DR 0.511, PLR '
        '0.508, RARL 0.236 (gap +0.021 +- 0.148, needs >= 0.1 at the lower '
        'bound); uniform-box DR 0.521 and the explore-only ablation 0.626 do '
        'as well: every method keeps the omega_1 = 0.71 half of the grid, where '
        'the car barely laps the ego, and almost none the 0.86 half at this '
        'budget.')),
}


@pytest.mark.slow
@pytest.mark.parametrize('variant', [
    pytest.param(v, marks=pytest.mark.xfail(strict=True, reason=why))
    for v, (_, why) in _CONTESTS.items()])
def test_skewed_contest(variant, tmp_path):
  out = EXPERIMENT.execute(fc.get_config(variant), tmp_path / variant)
  assert _claim(out, _CONTESTS[variant][0])['holds']


def docstring_example(fn) -> str:
  """The ```python block of `fn`'s docstring, dedented."""
  block = fn.__doc__.split('```python', 1)[1].split('```', 1)[0]
  lines = block.splitlines()
  indent = min(len(l) - len(l.lstrip()) for l in lines if l.strip())
  return '\n'.join(l[indent:] for l in lines)


@pytest.mark.slow
def test_fge_train_docstring_example_runs(capsys):
  """`fge.train` on a user's gymnax environment, as its docstring shows."""
  exec(docstring_example(fge.train), {})  # pylint: disable=exec-used
  out = capsys.readouterr().out
  assert 'safe: [' in out
  certified = float(out.split('certified theta:')[1].split()[0])
  assert certified >= 1.0, out   # safe episodes were seen and certified

