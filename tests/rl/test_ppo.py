"""PPO core pieces: GAE, normalisation, episode stats, distributions."""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest
import scipy.stats

from configs import kernel_ppo as kc
from iclrjax.core import loop
from iclrjax.rl import distributions as dist
from iclrjax.rl import envs
from iclrjax.rl import networks
from iclrjax.rl import ppo
from iclrjax.rl import rollout as ro


def _gae_reference(r, v, v_next, term, trunc, gamma, lam):
  """Plain loop over time, per env (independent of the scan version)."""
  T, E = r.shape
  adv = np.zeros((T, E))
  for e in range(E):
    running = 0.0
    for t in reversed(range(T)):
      if term[t, e] or trunc[t, e]:
        running = 0.0  # the trace stops at an episode end
      bootstrap = 0.0 if term[t, e] else v_next[t, e]
      delta = r[t, e] + gamma * bootstrap - v[t, e]
      running = delta + gamma * lam * running
      adv[t, e] = running
  return adv


def test_gae_matches_reference_with_truncation():
  rng = np.random.default_rng(0)
  T, E = 12, 3
  r, v, v_next = (rng.normal(size=(T, E)) for _ in range(3))
  term = rng.uniform(size=(T, E)) < 0.15
  trunc = (rng.uniform(size=(T, E)) < 0.15) & ~term
  adv, target = ro.gae(jnp.asarray(r), jnp.asarray(v), jnp.asarray(v_next),
                       jnp.asarray(term, jnp.float32),
                       jnp.asarray(term | trunc, jnp.float32), 0.99, 0.9)
  want = _gae_reference(r, v, v_next, term, trunc, 0.99, 0.9)
  np.testing.assert_allclose(adv, want, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(target, want + v, rtol=1e-5, atol=1e-5)
  # A truncated step bootstraps from V(final_obs); a terminated one does not.
  t, e = np.argwhere(trunc)[0]
  assert abs(want[t, e] - (r[t, e] + 0.99 * v_next[t, e] - v[t, e])) < 1e-12


def test_running_norm_matches_numpy():
  rng = np.random.default_rng(1)
  chunks = [rng.normal(3.0, 2.0, size=(50, 4)) for _ in range(5)]
  norm = ro.RunningNorm.create((4,))
  for c in chunks:
    norm = norm.update(jnp.asarray(c))
  data = np.concatenate(chunks)
  np.testing.assert_allclose(norm.mean, data.mean(0), rtol=1e-4)
  np.testing.assert_allclose(norm.var, data.var(0), rtol=1e-3)


def test_episode_stats_ring_buffer():
  s = ro.EpisodeStats.create(num_envs=2, window=3)
  s = s.update(jnp.array([1.0, 2.0]), jnp.array([False, False]))
  s = s.update(jnp.array([1.0, 2.0]), jnp.array([True, False]))
  assert float(s.rolling_mean()) == 2.0 and int(s.count) == 1
  s = s.update(jnp.array([5.0, 2.0]), jnp.array([True, True]))
  assert sorted(np.asarray(s.recent).tolist()) == [2.0, 5.0, 6.0]
  s = s.update(jnp.array([7.0, 1.0]), jnp.array([True, False]))
  assert int(s.count) == 4 and bool(s.full())
  assert sorted(np.asarray(s.recent).tolist()) == [5.0, 6.0, 7.0]


def test_tanh_gaussian_density_change_of_variables():
  u = jnp.array([[0.3, -1.2], [2.0, 0.1]])
  mean, log_std = jnp.array([0.1, -0.5]), jnp.array([-0.3, 0.2])
  lp = dist.tanh_gaussian_log_prob(u, mean, log_std)
  want = (scipy.stats.norm.logpdf(u, mean, np.exp(log_std))
          - np.log(1 - np.tanh(u)**2)).sum(-1)
  np.testing.assert_allclose(lp, want, rtol=1e-5)
  logits = jnp.array([0.2, -1.0, 0.5])
  p = np.exp(logits) / np.exp(logits).sum()
  np.testing.assert_allclose(dist.categorical_entropy(logits),
                             -(p * np.log(p)).sum(), rtol=1e-6)


def test_batched_push_equals_one_update_per_step():
  rng = np.random.default_rng(0)
  reward = jnp.asarray(rng.normal(size=(40, 6)), jnp.float32)
  done = jnp.asarray(rng.random((40, 6)) < 0.4)  # > K episodes per step too
  seq = ro.EpisodeStats.create(num_envs=6, window=4)
  for t in range(40):
    seq = seq.update(reward[t], done[t])
  bat, rets = ro.EpisodeStats.create(num_envs=6, window=4), []
  for t in range(40):
    bat, r = bat.advance(reward[t], done[t])
    rets.append(r)
  bat = bat.push(done, jnp.stack(rets))
  for a, b in zip(seq, bat):
    np.testing.assert_allclose(a, b, rtol=1e-6)
  # the buffer holds the last 4 finished returns (time-major, env order)
  r_all = []
  run = np.zeros(6)
  for t in range(40):
    run = run + np.asarray(reward[t])
    r_all += [run[e] for e in range(6) if done[t, e]]
    run = np.where(np.asarray(done[t]), 0.0, run)
  np.testing.assert_allclose(sorted(np.asarray(bat.recent)), sorted(r_all[-4:]),
                             rtol=1e-5)


def test_rollout_inactive_steps_do_not_advance():
  env = envs.make('CartPole-v1')
  obs, st = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(0), 2))
  policy = lambda p, o, k: (jnp.zeros(o.shape[0], jnp.int32),) * 2 + (
      jnp.zeros(o.shape[0]),) * 2 + (None,)
  stats = ro.EpisodeStats.create(2, 5)
  active = jnp.arange(6) < 3
  _, st_a, obs_a, stats_a = ro.rollout(env, policy, None, st, obs, stats,
                                       ro.RunningNorm.create(obs.shape[1:]),
                                       jax.random.PRNGKey(1), 6, False,
                                       active=active)
  _, st_b, obs_b, _ = ro.rollout(env, policy, None, st, obs, stats,
                                 ro.RunningNorm.create(obs.shape[1:]),
                                 jax.random.PRNGKey(1), 3, False)
  np.testing.assert_allclose(obs_a, obs_b)
  np.testing.assert_array_equal(stats_a.ep_length, [3, 3])


def test_rollout_episode_stats_equal_one_update_per_step():
  """The rollout's episode statistics (ends taken from the batch after the
  scan) equal `EpisodeStats.update` once per step on the batch's own
  rewards and ends, masked steps excluded."""
  env = envs.make('CartPole-v1')
  num_envs, num_steps = 4, 60
  obs, st = jax.vmap(env.reset)(
      jax.random.split(jax.random.PRNGKey(0), num_envs))
  policy = ro.random_policy(env.spec)
  norm = ro.RunningNorm.create(obs.shape[1:])
  for active in (None, jnp.arange(num_steps) % 3 != 1):
    stats0 = ro.EpisodeStats.create(num_envs, 4)
    batch, _, _, stats = ro.rollout(env, policy, None, st, obs, stats0, norm,
                                    jax.random.PRNGKey(1), num_steps, False,
                                    active=active)
    live = np.ones(num_steps, bool) if active is None else np.asarray(active)
    ref = stats0
    for t in range(num_steps):
      if live[t]:
        ref = ref.update(batch.reward[t],
                         batch.terminated[t] | batch.truncated[t])
    assert int(ref.count) >= 5  # episodes ended, the ring buffer wrapped
    for a, b in zip(ref, stats):
      np.testing.assert_array_equal(a, b)


def test_ppo_runs_on_continuous_actions():
  """Tanh-Gaussian PPO on Pendulum-v1 (discrete PPO runs in
  test_kernel_ppo.py's claim test and the launcher smoke run)."""
  name = 'Pendulum-v1'
  c = kc.get_config('smoke').ppo
  c.num_envs, c.num_steps = 4, 16
  env = envs.make(name)
  init, step = ppo.make_ppo(env, c, num_updates=3)
  state = loop.init_states(lambda k: init(k), loop.seed_keys(0, 2))
  f = loop.chunk_fn(step, 3)
  state, m = f(state, jnp.int32(0))
  for k in ('loss/policy', 'loss/value', 'entropy', 'approx_kl'):
    assert np.all(np.isfinite(np.asarray(m[k]))), k
  assert int(np.asarray(m['env_steps'])[0, -1]) == 3 * 4 * 16


def test_observation_normaliser_sees_every_rollout_observation():
  """After one iteration the running stats count all T x E observations the
  rollout acted on (not only the E observations it ended in)."""
  c = kc.get_config('smoke').ppo
  c.num_envs, c.num_steps, c.normalize_obs = 4, 8, True
  env = envs.make('CartPole-v1')
  init, step = ppo.make_ppo(env, c, num_updates=1, with_batch=True)
  st = init(jax.random.PRNGKey(0))
  # The annealing horizon is state, not a constant of the compiled step.
  assert float(st.hparams['num_updates']) == 1.0
  st2, _, batch = jax.jit(step)(st, jnp.int32(0))
  np.testing.assert_allclose(float(st2.norm.count), 32 + 1e-4, rtol=1e-6)
  raw = np.asarray(batch.raw_obs).reshape(-1, 4)
  w_old = 1e-4 / (32 + 1e-4)
  np.testing.assert_allclose(np.asarray(st2.norm.mean),
                             (1 - w_old) * raw.mean(0), rtol=1e-3, atol=1e-6)


BRAX_TEST_UPDATES = 80  # x 64 envs x 32 steps = 164k env steps


@pytest.mark.slow
def test_ppo_learns_brax_mjx_inverted_pendulum():
  """Clip-PPO (tanh-Gaussian actions) at configs/kernel_ppo.py:brax's
  settings on MJX inverted_pendulum: within 164k steps both seeds' rolling
  return passes 200 of 1000 (a uniform-random policy scores 6.1 there,
  measured in the `brax` variant, whose claims run 600k steps x 5 seeds;
  test_kernel_ppo.py::test_brax_variant_claims). The losses stay finite
  and the observation normaliser counts all T x E observations of every
  rollout. ~40 s, almost all MJX compile: `slow` to keep the RL tests
  within their share of the default suite."""
  c = kc.get_config('brax').ppo
  assert c.normalize_obs
  env = envs.make('brax:inverted_pendulum')
  init, step = ppo.make_ppo(env, c, num_updates=BRAX_TEST_UPDATES)
  state = loop.init_states(lambda k: init(k), loop.seed_keys(0, 2))
  state, m = loop.chunk_fn(step, BRAX_TEST_UPDATES)(state, jnp.int32(0))
  final = np.asarray(m['return'])[:, -5:].mean(1)
  assert np.all(final >= 200.0), final
  for k in ('loss/policy', 'loss/value', 'entropy', 'approx_kl'):
    assert np.all(np.isfinite(np.asarray(m[k]))), k
  batch = c.num_envs * c.num_steps
  np.testing.assert_array_equal(np.asarray(m['env_steps'])[:, -1],
                                BRAX_TEST_UPDATES * batch)
  np.testing.assert_allclose(np.asarray(state.norm.count),
                             BRAX_TEST_UPDATES * batch + 1e-4, rtol=1e-6)


def test_value_lims_bound_the_critic_and_default_off():
  """`value_lims` squashes the critic to lo + (hi - lo) sigmoid(v) (the FGE
  release's head); without it the loss is unchanged."""
  v = jnp.array([-50.0, 0.0, 50.0])
  np.testing.assert_allclose(ppo.squash_value(v, (-1.1, 0.1)),
                             [-1.1, -0.5, 0.1], atol=1e-6)
  assert ppo.squash_value(v, None) is v
  spec = envs.EnvSpec('t', (3,), True, 2, None, None, 10)
  base = dict(hidden=(4,), activation='tanh', vf_coef=0.5,
              normalize_adv=False)
  c0 = ml_collections.ConfigDict(base)
  c1 = ml_collections.ConfigDict(dict(base, value_lims=(-1.1, 0.1)))
  net = ppo.actor_critic(spec, c0)
  params = net.init(jax.random.key(0), jnp.zeros(3))
  obs = jax.random.normal(jax.random.key(1), (5, 3))
  mb = {'obs': obs, 'action': jnp.zeros(5, jnp.int32),
        'log_prob': jnp.zeros(5), 'adv': jnp.ones(5), 'target': jnp.ones(5)}
  hp = {'clip_eps': 0.2, 'ent_coef': 0.0}
  raw = net.apply(params, obs)[1]
  l0 = ppo.make_loss_fn(spec, c0)(params, mb, hp)[1]['loss/value']
  l1 = ppo.make_loss_fn(spec, c1)(params, mb, hp)[1]['loss/value']
  np.testing.assert_allclose(l0, 0.5 * jnp.mean((raw - 1.0)**2), rtol=1e-6)
  np.testing.assert_allclose(
      l1, 0.5 * jnp.mean((ppo.squash_value(raw, (-1.1, 0.1)) - 1.0)**2),
      rtol=1e-6)


def test_split_optimiser_is_two_independent_adamw_steps():
  """With `value_learning_rate`, the critic's gradient is the plain MSE's
  (vf_coef 2 x 1/2 MSE) and the actor's the surrogate's and entropy's; three
  updates equal the release's pair of optimisers written out independently:
  Adam-W (wd 0) at learning_rate on the actor and Adam-W at
  value_learning_rate with weight decay on the critic's weights (not its
  biases), each clipped to max_grad_norm on its own."""
  spec = envs.EnvSpec('t', (3,), True, 2, None, None, 10)
  c = ml_collections.ConfigDict(dict(
      hidden=(4,), activation='tanh', vf_coef=2.0, normalize_adv=False,
      max_grad_norm=0.05, learning_rate=4e-3, value_learning_rate=1e-2,
      value_weight_decay=0.5))
  net = ppo.actor_critic(spec, c)
  params = net.init(jax.random.key(0), jnp.zeros(3))

  def minibatch(i):
    k1, k2 = jax.random.split(jax.random.key(i))
    return {'obs': jax.random.normal(k1, (6, 3)),
            'action': jnp.array([0, 1, 1, 0, 1, 0]),
            'log_prob': jnp.full(6, -0.7), 'adv': jax.random.normal(k2, (6,)),
            'target': jnp.linspace(-1.0, 0.0, 6) * i}

  hp = {'clip_eps': 0.1, 'ent_coef': 1e-3}
  loss = ppo.make_loss_fn(spec, c)
  labels = ppo.param_labels(params)
  assert labels['params']['MLP_0']['Dense_0']['kernel'] == 'critic'
  assert labels['params']['MLP_1']['Dense_0']['kernel'] == 'actor'
  split = lambda p: ({'params': {k: v for k, v in p['params'].items()
                                 if k != 'MLP_0'}},
                     {'params': {'MLP_0': p['params']['MLP_0']}})
  join = lambda a, cr: {'params': dict(a['params'], **cr['params'])}
  mse = lambda cr, a, mb: jnp.mean((net.apply(join(a, cr), mb['obs'])[1]
                                    - mb['target'])**2)
  pol = lambda a, cr, mb: loss(join(a, cr), mb, hp)[0] - mse(cr, a, mb)
  # The gradient that reaches each branch.
  act, crit = split(params)
  g = jax.grad(lambda p: loss(p, minibatch(1), hp)[0])(params)
  g_act, g_crit = split(g)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-7),
               g_crit, jax.grad(mse)(crit, act, minibatch(1)))
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-7),
               g_act, jax.grad(pol)(act, crit, minibatch(1)))
  # Three updates against the independent pair.
  tx = ppo.make_optimizer(c)
  ours, opt = params, tx.init(params)
  mask = lambda p: jax.tree_util.tree_map_with_path(
      lambda path, _: path[-1].key != 'bias', p)
  t_act = optax.chain(optax.clip_by_global_norm(0.05),
                      optax.adamw(4e-3, eps=1e-5, weight_decay=0.0))
  t_crit = optax.chain(optax.clip_by_global_norm(0.05),
                       optax.adamw(1e-2, eps=1e-5, weight_decay=0.5,
                                   mask=mask))
  o_act, o_crit = t_act.init(act), t_crit.init(crit)
  for i in (1, 2, 3):
    mb = minibatch(i)
    upd, opt = tx.update(jax.grad(lambda p: loss(p, mb, hp)[0])(ours), opt,
                         ours)
    ours = optax.apply_updates(ours, upd)
    u_a, o_act = t_act.update(jax.grad(pol)(act, crit, mb), o_act, act)
    u_c, o_crit = t_crit.update(jax.grad(mse)(crit, act, mb), o_crit, crit)
    act, crit = optax.apply_updates(act, u_a), optax.apply_updates(crit, u_c)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-6),
               ours, join(act, crit))
  # Controls: no decay, or decay on the biases too, end elsewhere.
  for wd_mask in (None, lambda p: jax.tree.map(lambda _: True, p)):
    c2 = ml_collections.ConfigDict(c.to_dict())
    if wd_mask is None:
      c2.value_weight_decay = 0.0
    else:
      old = ppo.decay_mask
      ppo.decay_mask = wd_mask
    try:
      tx2 = ppo.make_optimizer(c2)
      p2, o2 = params, tx2.init(params)
      for i in (1, 2, 3):
        mb = minibatch(i)
        u, o2 = tx2.update(jax.grad(lambda p: loss(p, mb, hp)[0])(p2), o2,
                           p2)
        p2 = optax.apply_updates(p2, u)
    finally:
      if wd_mask is not None:
        ppo.decay_mask = old
    crit_ours, crit_p2 = split(ours)[1], split(p2)[1]
    diff = jax.tree.map(lambda a, b: float(jnp.max(jnp.abs(a - b))),
                        crit_ours, crit_p2)
    assert max(jax.tree.leaves(diff)) > 1e-5, diff


def test_rollout_advantage_normalisation_is_the_releases():
  """`normalize_adv_rollout`: advantages normalised once per rollout (eps
  1e-5), left as they are in every minibatch's loss."""
  spec = envs.EnvSpec('t', (3,), True, 2, None, None, 10)
  base = dict(hidden=(4,), activation='tanh', vf_coef=0.5, normalize_adv=True)
  net = ppo.actor_critic(spec, ml_collections.ConfigDict(base))
  params = net.init(jax.random.key(0), jnp.zeros(3))
  mb = {'obs': jax.random.normal(jax.random.key(1), (5, 3)),
        'action': jnp.zeros(5, jnp.int32), 'log_prob': jnp.zeros(5),
        'adv': jnp.array([3.0, 1.0, 2.0, 5.0, 4.0]), 'target': jnp.ones(5)}
  hp = {'clip_eps': 0.2, 'ent_coef': 0.0}
  per_mb = ppo.make_loss_fn(spec, ml_collections.ConfigDict(base))
  rollout = ppo.make_loss_fn(spec, ml_collections.ConfigDict(
      dict(base, normalize_adv_rollout=True)))
  a = mb['adv']
  normed = dict(mb, adv=(a - a.mean()) / (a.std() + 1e-8))
  np.testing.assert_allclose(rollout(params, normed, hp)[0],
                             per_mb(params, mb, hp)[0], rtol=1e-6)
  assert abs(float(rollout(params, mb, hp)[0] - per_mb(params, mb, hp)[0])
             ) > 1e-3


def test_pixel_encoder_reads_the_image_and_appends_the_extras():
  """`PixelEncoder` reshapes the first H W C entries to the image, runs the
  CNN, appends the extras unchanged; any leading dims; a pixel change moves
  the features and the PPO network built from a pixel spec uses it."""
  shape = (12, 12, 2)
  n = int(np.prod(shape))
  enc = networks.PixelEncoder(shape, ((4, 4, 2), (3, 3, 1)))
  obs = jax.random.uniform(jax.random.key(0), (2, 5, n + 3))
  params = enc.init(jax.random.key(1), obs[0, 0])
  out = enc.apply(params, obs)
  # 12 -> 5 -> 3 (VALID convolutions), 3 features: 27, then the 3 extras.
  assert out.shape == (2, 5, 27 + 3)
  np.testing.assert_array_equal(out[..., -3:], obs[..., -3:])
  np.testing.assert_allclose(out[1, 2], enc.apply(params, obs[1, 2]),
                             rtol=1e-6, atol=1e-6)
  # The image is the first H W C entries in HWC order: a one-layer encoder's
  # first 4 features are relu of the kernels against the top-left 4 x 4
  # patch (biases start at 0).
  one = networks.PixelEncoder(shape, ((4, 4, 2),))
  p1 = one.init(jax.random.key(3), obs[0, 0])
  img = obs[0, 0, :n].reshape(shape)
  pre = jnp.sum(img[:4, :4, :, None] * p1['params']['Conv_0']['kernel'],
                (0, 1, 2))
  f1 = one.apply(p1, obs[0, 0])
  assert f1.shape == (5 * 5 * 4 + 3,) and (pre > 0).any()
  np.testing.assert_allclose(f1[:4], jax.nn.relu(pre), rtol=1e-5, atol=1e-6)
  moved = obs.at[0, 0, 5].add(1.0)
  assert not np.allclose(enc.apply(params, moved)[0, 0, :-3], out[0, 0, :-3])
  spec = envs.EnvSpec('pix', (n + 3,), True, 4, None, None, 10,
                      image_shape=shape)
  cfg = kc.get_config('smoke').ppo
  net = ppo.actor_critic(spec, cfg)
  assert net.image_shape == shape
  logits, value = net.apply(net.init(jax.random.key(2), obs[0, 0]), obs)
  assert logits.shape == (2, 5, 4) and value.shape == (2, 5)
