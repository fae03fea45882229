"""The UED baselines of the FGE comparison (rl/curricula): ACCEL, SFL,
PAIRED and VDS against closed forms and constructed states, and a few jitted
`make_trainer` steps of each on ToyLevels. PLR's replay probabilities
against jaxued: tests/parity/test_ued.py."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import fge as fc
from experiments import fge as fge_exp
from iclrjax.core import loop
from iclrjax.rl import curricula
from iclrjax.rl.reach import base
from iclrjax.rl.reach import toylevels


def _inside(task, theta):
  """Whether each theta [N, 1] lies in ToyLevels' Theta (the union of the
  three reset intervals)."""
  x = np.asarray(theta)[:, 0]
  return np.any([(x >= lo - 1e-5) & (x <= hi + 1e-5)
                 for lo, hi in toylevels.RESET], axis=0)


# -- PLR's buffer, shared by ACCEL --------------------------------------------------
def test_plr_replay_probs_closed_form():
  """Rank weights rank^(-1/T) over the filled slots, mixed with staleness
  (t - last) / sum (PLR Eq. 2-3); empty slots get nothing."""
  s = curricula.PLRState(jnp.zeros((4, 1)), jnp.array([1.0, 3.0, 2.0, 9.0]),
                         jnp.array([7, 9, 4, 0]), jnp.array([1, 1, 1, 0], bool),
                         jax.random.key(0))
  h = np.array([3.0, 1.0, 2.0]) ** (-1 / 0.5)   # ranks of 1, 3, 2
  stale = np.array([3.0, 1.0, 6.0])            # t = 10
  want = 0.7 * h / h.sum() + 0.3 * stale / stale.sum()
  got = np.asarray(jax.jit(curricula.plr_replay_probs, static_argnums=(2, 3))(
      s, jnp.int32(10), 0.5, 0.3))
  np.testing.assert_allclose(got, np.append(want, 0.0), rtol=1e-5)


def test_plr_insert_updates_replayed_and_evicts_the_lowest_score():
  s = curricula.PLRState.create(3, 1, jax.random.key(0))
  th = jnp.array([[1.0], [2.0], [3.0], [2.0], [4.0], [5.0]])
  sc = jnp.array([0.5, 0.1, 0.9, 0.7, 0.2, 0.8])
  ok = jnp.array([True, True, True, True, True, False])
  insert = jax.jit(curricula.plr_insert)
  s = insert(s, th, sc, ok, jnp.int32(4))
  # 1, 2, 3 fill the buffer; 2 comes back with 0.7 (updated in place); 4
  # (0.2) evicts the lowest score, 1 (0.5)? No: 0.2 < 0.5, so it is dropped;
  # 5 is not valid.
  kept = dict(zip(np.asarray(s.theta[:, 0]), np.asarray(s.score)))
  assert kept == {1.0: np.float32(0.5), 2.0: np.float32(0.7),
                  3.0: np.float32(0.9)}, kept
  s = insert(s, th.at[0, 0].set(6.0), sc.at[0].set(0.6),
             jnp.arange(6) == 0, jnp.int32(5))
  assert sorted(np.asarray(s.theta[:, 0]).tolist()) == [2.0, 3.0, 6.0]
  assert int(s.last[np.asarray(s.theta[:, 0]) == 6.0][0]) == 5


# -- ACCEL --------------------------------------------------------------------------
def _accel_sampler(task, E, **overrides):
  c = fc.get_config('smoke')
  c.accel.update(overrides)
  return curricula.accel(task, c.accel, E, 8, 0.99, 0.95), c.accel


def test_accel_buffer_ranks_as_plr_and_cycles_replay_then_mutate():
  """A replay iteration draws from `plr_replay_probs` of its buffer; the
  next iteration proposes mutants of that batch (Gaussian steps of sd
  `mutate_scale` in box coordinates, clipped: always points of Theta); new
  theta come from rho while the buffer is below `min_fill`."""
  task = toylevels.ToyLevels()
  E, C = 4000, 8
  sampler, c = _accel_sampler(task, E, capacity=C, p_replay=1.0,
                              min_fill=0.5)
  s = sampler.init(jax.random.key(0))
  # Under-filled (3 of 8 < 4): new theta from rho, no mutation next.
  plr = s.plr._replace(theta=jnp.arange(10.0, 18.0)[:, None],
                       score=jnp.array([5.0, 1, 3, 2, 8, 0, 4, 6]),
                       last=jnp.array([0, 3, 1, 2, 0, 1, 2, 3], jnp.int32),
                       filled=jnp.arange(C) < 3)
  propose = jax.jit(sampler.propose)
  s1, th, m = propose(s._replace(plr=plr), jnp.int32(5))
  assert float(m['accel/branch']) == 0 and not bool(s1.mutate_next)
  assert np.isin(np.asarray(th[:, 0]), np.arange(10.0, 18.0)).mean() < 0.01
  # Filled: a replay batch distributed as plr_replay_probs.
  plr = plr._replace(filled=jnp.arange(C) < 6)
  s2, th, m = propose(s._replace(plr=plr), jnp.int32(5))
  assert float(m['accel/branch']) == 1 and bool(s2.mutate_next)
  freq = np.bincount(np.asarray(th[:, 0]).astype(int) - 10, minlength=C) / E
  want = np.asarray(jax.jit(curricula.plr_replay_probs, static_argnums=(
      2, 3))(plr, jnp.int32(5), c.temperature, c.staleness))
  np.testing.assert_allclose(freq, want, atol=0.02)
  assert np.all(np.asarray(s2.plr.last)[freq > 0] == 5)
  # Then the mutants of that batch, in Theta and close to it in the box
  # (the easy interval [3.5, 31.5] is a third of it: du = dtheta / 42).
  s3, th3, m = propose(s2, jnp.int32(6))
  assert float(m['accel/branch']) == 2 and not bool(s3.mutate_next)
  assert _inside(task, th3).all()
  du = np.abs(np.asarray(th3) - np.asarray(th)) / 42.0
  assert 0 < du.max() < 6 * c.mutate_scale
  np.testing.assert_allclose(np.sqrt(np.mean(du**2)), c.mutate_scale,
                             rtol=0.1)
  # Mutants of every end of the reset intervals (box coordinates -1, +-1/3,
  # 1: clipped there, or carried across into the next interval, never into
  # a gap between them) and of a grid are points of Theta too.
  ends = np.asarray(toylevels.RESET, np.float32).reshape(-1, 1)
  rows = np.concatenate([ends, task.eval_thetas(60)])
  replayed = jnp.asarray(np.resize(rows, (E, 1)))
  _, th4, _ = propose(s3._replace(replayed=replayed,
                                  mutate_next=jnp.array(True)), jnp.int32(7))
  assert _inside(task, th4).all()
  assert np.mean(np.asarray(th4) != np.asarray(replayed)) > 0.5


# -- SFL ---------------------------------------------------------------------------
def test_sfl_keeps_the_success_rates_nearest_one_half():
  p = jnp.array([0.0, 0.1, 0.5, 1.0, 0.45, 0.9, 0.62, 0.2, 1.0, 0.0])
  theta = jnp.arange(10.0)[:, None]
  top, score = curricula.sfl_top_k(theta, p, 3)
  assert sorted(np.asarray(top[:, 0]).tolist()) == [2.0, 4.0, 6.0]
  np.testing.assert_allclose(score, [0.25, 0.2475, 0.2356], rtol=1e-4)
  assert float(curricula.learnability(jnp.array(1.0))) == 0.0


def test_first_failure_finds_the_failing_step():
  """`first_failure` against stepping the task by hand (do nothing: the
  impossible level's obstacle, the hard level's wall, the easy level
  never)."""
  task = toylevels.ToyLevels(horizon=200)
  theta = jnp.array([[47.0], [10.0], [40.0]])
  got = jax.jit(lambda th: base.first_failure(
      task, lambda o: jnp.zeros(o.shape[0], jnp.int32), th))(theta)
  want, step = [], jax.jit(task.step)
  for th in theta:
    s, t_fail = task.init_state(th), -1
    for t in range(task.horizon):
      s, failed, finished = step(s, jnp.int32(0))
      if bool(failed):
        t_fail = t
        break
      if bool(finished):
        break
    want.append(t_fail)
  np.testing.assert_array_equal(got, want)
  assert want[0] > 0 and want[1] == -1 and want[2] > 0


# -- VDS -------------------------------------------------------------------------
def test_vds_draws_in_proportion_to_the_disagreement():
  theta = jnp.arange(4.0)[:, None]
  std = jnp.array([0.0, 1.0, 3.0, 0.0])
  picks = jax.jit(curricula.vds_pick, static_argnums=3)(
      jax.random.key(0), theta, std, 20000)
  freq = np.bincount(np.asarray(picks[:, 0]).astype(int), minlength=4) / 2e4
  np.testing.assert_allclose(freq, [0.0, 0.25, 0.75, 0.0], atol=0.01)


# -- PAIRED ------------------------------------------------------------------------
def _release_regret(rew_a, done_a, rew_p, done_p, gamma):
  """The release's compute_regret on reward sequences [B, T]: discounted
  reward-to-go Q cut at episode ends; max of the antagonist's Q and mean of
  the protagonist's up to each one's last episode end."""
  def qvals(rew, done):
    q, out = 0.0, np.zeros_like(rew)
    for t in reversed(range(len(rew))):
      q = rew[t] + gamma * q * (1.0 - done[t])
      out[t] = q
    return out
  out = []
  for ra, da, rp, dp in zip(rew_a, done_a, rew_p, done_p):
    qa, qp = qvals(ra, da), qvals(rp, dp)
    ca = len(da) - 1 - np.argmax(da[::-1])
    cp = len(dp) - 1 - np.argmax(dp[::-1])
    out.append(qa[:ca + 1].max() - qp[:cp + 1].mean())
  return np.asarray(out)


def test_paired_regret_is_the_release_formula_with_the_right_sign():
  T, gamma = 30, 0.9
  t_a = np.array([-1, 5, -1, 12, 0, 29])
  t_p = np.array([7, -1, -1, 3, 0, 29])

  def seqs(t_fail):
    rew, done = np.zeros((len(t_fail), T)), np.zeros((len(t_fail), T))
    for i, t in enumerate(t_fail):
      end = T - 1 if t < 0 else t   # a safe episode ends at the horizon
      rew[i, end] = -1.0 if t >= 0 else 0.0
      done[i, end] = 1.0
    return rew, done

  want = _release_regret(*seqs(t_a), *seqs(t_p), gamma)
  got = np.asarray(curricula.paired_regret(jnp.asarray(t_a), jnp.asarray(t_p),
                                           gamma))
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
  # Antagonist safe, protagonist fails: positive; the reverse: negative;
  # both safe: zero.
  assert got[0] > 0 and got[1] < 0 and got[2] == 0


def test_paired_adversary_step_raises_the_regret_it_is_paid():
  """The adversary's clipped surrogate, with advantages that grow with z,
  has a gradient that moves the mean up (descent on the loss), and down
  with the advantages reversed."""

  @jax.jit
  def grad_mean(z, adv):
    params = {'mean': jnp.zeros((1,)), 'std': jnp.zeros((1,))}
    mb = {'z': z, 'logp': curricula.dist.tanh_gaussian_log_prob(
        z, params['mean'], curricula.adversary_log_std(params)),
          'adv': adv, 'eps': jnp.zeros_like(z)}
    return jax.grad(lambda p: curricula.adversary_loss(
        p, mb, 0.1, 5e-3)[0])(params)['mean'][0]

  z = jnp.linspace(-1.0, 1.0, 64)[:, None]
  assert float(grad_mean(z, z[:, 0])) < 0 < float(grad_mean(z, -z[:, 0]))


# -- a few trainer steps of each ---------------------------------------------------
NEW = ('accel', 'sfl', 'paired', 'vds')


def _side_by_side(samplers, num_envs):
  """One sampler running `samplers` together (a test device): each proposes
  for all envs and env i takes sampler i % n's theta; each updates on the
  whole rollout. One `make_trainer` compile then exercises every sampler
  inside the scanned, seed-vmapped loop."""
  n = len(samplers)
  pick = jnp.arange(num_envs) % n

  def init(key):
    return tuple(s.init(k) for s, k in zip(samplers, jax.random.split(key, n)))

  def propose(states, t):
    out = [s.propose(st, t) for s, st in zip(samplers, states)]
    theta = jnp.stack([o[1] for o in out])[pick, jnp.arange(num_envs)]
    return tuple(o[0] for o in out), theta, {
        k: v for o in out for k, v in o[2].items()}

  def update(states, batch, ps, t):
    out = [s.update(st, batch, ps, t) for s, st in zip(samplers, states)]
    return tuple(o[0] for o in out), {k: v for o in out for k, v in
                                      o[1].items()}

  return curricula.Sampler(init, propose, update)


@pytest.fixture(scope='module')
def trained():
  """4 jitted PPO iterations with ACCEL, SFL, PAIRED and VDS side by side
  on ToyLevels (2 seeds, horizon 40, 8 envs, one 8-unit layer): the initial
  and final states and the metrics."""
  c = fc.get_config('smoke')
  c.task_kwargs = {'horizon': 40}
  c.num_updates = 4
  c.eval_every = 2
  c.eval_points = 12
  c.ppo.hidden = (8,)
  c.ppo.num_envs = 8
  c.ppo.num_minibatches = 2
  c.ppo.num_epochs = 1
  c.accel.capacity = 16
  c.accel.min_fill = 0.25
  c.paired.regret_envs = 8
  c.paired.num_minibatches = 2
  c.sfl.every = 2
  c.sfl.candidates = 16
  c.sfl.buffer = 4
  c.sfl.rollouts = 3
  c.vds.candidates = 16
  c.vds.hidden = (8,)
  task = toylevels.ToyLevels(horizon=40)
  sampler = _side_by_side([fge_exp.make_sampler(m, task, c) for m in NEW],
                          c.ppo.num_envs)
  init, step, _ = curricula.make_trainer(task, c, sampler, c.num_updates)
  st0 = loop.init_states(init, loop.seed_keys(0, 2))
  st, m = loop.chunk_fn(step, 4, donate=False)(st0, jnp.int32(0))
  states = lambda x: dict(zip(NEW, x.sampler))
  return task, c, states(st0), states(st), st0.ppo, st.ppo, jax.tree.map(
      np.asarray, m)


def test_new_samplers_train_in_make_trainer(trained):
  task, c, st0, st, ppo0, ppo, m = trained
  for k, v in m.items():
    assert np.all(np.isfinite(v)), k
  assert m['coverage'].shape == (2, 4)
  moved = jax.tree.map(lambda a, b: np.abs(np.asarray(a) - b).max(),
                       ppo.params, ppo0.params)
  assert max(jax.tree.leaves(moved)) > 0
  # ACCEL: a buffer of Theta points; a replay iteration is followed by a
  # mutation one.
  buf = st['accel'].plr
  assert np.asarray(buf.filled).sum() > 0
  assert _inside(task, np.asarray(buf.theta)[np.asarray(buf.filled)]).all()
  b = m['accel/branch']
  assert np.all(b[:, 1:][b[:, :-1] == 1] == 2)
  # SFL: refreshed at t = 0 and 2: K Theta points of learnability p (1 - p)
  # for p in {0, 1/3, 2/3, 1} (3 rollouts each).
  assert np.all(np.asarray(st['sfl'].size) == c.sfl.buffer)
  assert _inside(task, np.asarray(st['sfl'].theta).reshape(-1, 1)).all()
  learn = np.asarray(st['sfl'].learnability)
  assert np.all(np.isclose(learn[..., None], [0.0, 2 / 9], atol=1e-6).any(-1))
  # PAIRED: the antagonist and the adversary trained.
  ant = jax.tree.map(lambda a, b: np.abs(np.asarray(a) - b).max(),
                     st['paired'].antagonist.params,
                     st0['paired'].antagonist.params)
  assert max(jax.tree.leaves(ant)) > 0
  assert np.all(np.asarray(st['paired'].params['mean']) != 0)
  assert np.all(np.abs(m['paired/regret']) <= 1.0)
  # VDS: the critics fit (and disagree somewhere).
  vds = jax.tree.map(lambda a, b: np.abs(np.asarray(a) - b).max(),
                     st['vds'].params, st0['vds'].params)
  assert max(jax.tree.leaves(vds)) > 0
  assert np.all(m['vds/std'] > 0)
