"""Clip-PPO with GAE: the project's PPO core (Schulman et al. 2017).

One `step` of `make_ppo` is one PPO iteration: a rollout of
`num_envs x num_steps` transitions, GAE advantages (bootstrapped from the
state reached at a time-limit cut, see `rl.rollout`), then `num_epochs`
passes of `num_minibatches` clipped-surrogate updates:

  L = -E[min(rho A, clip(rho, 1-eps, 1+eps) A)] + c_v/2 E[(V - V_targ)^2]
      - c_e E[H(pi)],     rho = pi(a|s) / pi_old(a|s).

The whole iteration is pure and scan-compiled; `core.loop` scans over
iterations, vmaps over seeds, and sweeps hyperparameters as a vmap axis:
`learning_rate`, `ent_coef` and `clip_eps` live in the state (`hparams`), so
`init(key, hparams)` with a batch of hparams trains one agent per point.
The learning-rate annealing horizon (`num_updates`) is a state entry too, so
one compiled step serves every training budget.
Discrete (categorical) and continuous (tanh-Gaussian) action spaces.

`c.value_lims = (lo, hi)` (optional, default None: off, so recorded results
stay valid) bounds the critic to lo + (hi - lo) sigmoid(v), the value head
of the FGE release (`src/fge/core/common/ppo_nets.py:161-167`: (-0.1, 1.1)
on its cost-to-go, i.e. (-1.1, 0.1) on the reward -1 at failure of
`rl.reach`). Advantages are normalised per minibatch (eps 1e-8), or with
`c.normalize_adv_rollout` once per rollout (eps 1e-5) as the FGE release
does (`bits/ppo_core.py:268-269`).

`c.value_learning_rate` (optional, default None: one Adam over all weights
on the joint loss) gives the actor and the critic their own optimisers, as
the FGE release does (`bits/ppo_core.py:180-186`, og `get_default_tx`):
Adam-W (eps 1e-5) at `learning_rate` with no weight decay on the actor and
at `value_learning_rate` with `value_weight_decay` on the critic's
weights (not its biases, the release's `wd_mask`), each
gradient clipped to `max_grad_norm` on its own (`clip_grad_pol`,
`clip_grad_V` = 1.0). The critic's gradient is then that of vf_coef x 1/2
MSE alone (the release's plain MSE is vf_coef = 2). Annealing, when on,
scales the actor's rate only (the release anneals no rate on ToyLevels).
The pixel encoder, shared by both heads, follows the actor's optimiser.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import optax

from iclrjax.core import config as cfg_lib
from iclrjax.rl import distributions as dist
from iclrjax.rl import envs as envs_lib
from iclrjax.rl import networks
from iclrjax.rl import rollout as ro

SWEEPABLE = ('learning_rate', 'ent_coef', 'clip_eps')


def config_schema(prefix: str = 'ppo.') -> dict[str, cfg_lib.Spec]:
  """Constraints of a PPO config section (nested under `prefix`); the
  section's fields and types come from the experiment's default config."""
  pos, nonneg = cfg_lib.Float(min=0.0, min_inclusive=False), cfg_lib.Float(
      min=0.0)
  fields = {
      'num_envs': cfg_lib.Int(min=1),
      'num_steps': cfg_lib.Int(min=1, help='rollout length per env'),
      'num_epochs': cfg_lib.Int(min=1),
      'num_minibatches': cfg_lib.Int(min=1),
      'gamma': cfg_lib.Float(min=0.0, max=1.0),
      'gae_lambda': cfg_lib.Float(min=0.0, max=1.0),
      'clip_eps': pos,
      'ent_coef': nonneg,
      'vf_coef': nonneg,
      'max_grad_norm': cfg_lib.Float(min=0.0, min_inclusive=False,
                                     nullable=True),
      'learning_rate': pos,
      'hidden': cfg_lib.Seq(item=cfg_lib.Int(min=1), min_len=1),
      'activation': cfg_lib.Choice(*networks.ACTIVATIONS),
      'value_lims': cfg_lib.Seq(item=cfg_lib.Float(), min_len=2, max_len=2,
                                required=False, nullable=True),
      'value_learning_rate': cfg_lib.Float(
          min=0.0, min_inclusive=False, required=False, nullable=True,
          help='the critic\'s own Adam-W rate (None: one joint optimiser)'),
      'value_weight_decay': cfg_lib.Float(min=0.0, required=False),
      'normalize_adv_rollout': cfg_lib.Bool(
          required=False, help='normalise advantages once per rollout (eps '
          '1e-5, the FGE release) instead of per minibatch'),
  }
  return {prefix + k: v for k, v in fields.items()}


def default_config(**overrides: Any) -> ml_collections.ConfigDict:
  """A PPO config section with documented defaults (CleanRL's discrete PPO:
  4 envs x 128 steps, 4 epochs of 4 minibatches, Adam 2.5e-4 annealed,
  clip 0.2, ent 0.01, gamma 0.99, lambda 0.95, 64 x 64 tanh MLPs), any
  field replaced by `overrides`. Example: `make_ppo(env,
  default_config(num_envs=64), num_updates=100)`."""
  c = ml_collections.ConfigDict(dict(
      num_envs=4, num_steps=128, num_epochs=4, num_minibatches=4,
      gamma=0.99, gae_lambda=0.95, clip_eps=0.2, ent_coef=0.01, vf_coef=0.5,
      max_grad_norm=0.5, learning_rate=2.5e-4, anneal_lr=True,
      hidden=(64, 64), activation='tanh', normalize_obs=False,
      normalize_adv=True, normalize_adv_rollout=False, shuffle=True,
      value_lims=ml_collections.config_dict.placeholder(tuple),
      value_learning_rate=ml_collections.config_dict.placeholder(float),
      value_weight_decay=0.0))
  for k, v in overrides.items():
    if k not in c:
      raise ValueError(f'ppo.{k}: no such field; the fields are {sorted(c)}')
    c[k] = v
  check_config(c)
  return c


def check_config(c: ml_collections.ConfigDict, prefix: str = 'ppo.') -> None:
  batch = c.num_envs * c.num_steps
  cfg_lib.check(batch % c.num_minibatches == 0, prefix + 'num_minibatches',
                c.num_minibatches,
                f'must divide num_envs * num_steps = {batch}')


class PPOState(NamedTuple):
  params: Any
  opt_state: Any
  env_state: Any
  obs: jax.Array          # [E, ...] current observations (raw)
  norm: ro.RunningNorm
  stats: ro.EpisodeStats
  key: jax.Array
  hparams: dict[str, jax.Array]
  solved_at: jax.Array    # env steps when the rolling return first passed
                          # the threshold (-1: not yet)


def actor_critic(spec: envs_lib.EnvSpec, c: ml_collections.ConfigDict
                 ) -> networks.ActorCritic:
  """The PPO network for `spec`: MLPs of `c.hidden`; on pixel observations
  (`spec.image_shape`) behind a CNN of `c.conv` layers (default
  `networks.DEFAULT_CONV`)."""
  return networks.ActorCritic(
      spec.num_actions, spec.discrete, tuple(c.hidden), c.activation,
      image_shape=spec.image_shape,
      conv=tuple(tuple(x) for x in c.get('conv', networks.DEFAULT_CONV)))


def squash_value(value: jax.Array, lims) -> jax.Array:
  """The bounded critic head: lo + (hi - lo) sigmoid(value) for
  `lims = (lo, hi)` (the FGE release's `ValueNet`); unchanged for None."""
  if lims is None:
    return value
  lo, hi = lims
  return lo + (hi - lo) * jax.nn.sigmoid(value)


def apply_fn(net: networks.ActorCritic, c: ml_collections.ConfigDict):
  """(params, obs) -> (policy output, value), `c.value_lims` applied."""
  lims = c.get('value_lims', None)
  lims = None if lims is None else tuple(float(x) for x in lims)

  def apply(params, obs):
    out, value = net.apply(params, obs)
    return out, squash_value(value, lims)

  return apply


def log_prob_entropy(spec: envs_lib.EnvSpec, out, action):
  """(log pi(a|s), entropy) of the network's policy output `out`."""
  if spec.discrete:
    return dist.categorical_log_prob(out, action), dist.categorical_entropy(
        out)
  mean, log_std = out
  return (dist.tanh_gaussian_log_prob(action, mean, log_std),
          dist.tanh_gaussian_entropy(action, log_std))


def make_loss_fn(spec: envs_lib.EnvSpec, c: ml_collections.ConfigDict):
  """loss(params, minibatch, hparams) -> (loss, info), the loss `make_ppo`
  minimises on each minibatch ({obs, action, log_prob, adv, target}):
  clipped surrogate + vf_coef x 1/2 MSE of the value - ent_coef x entropy."""
  apply = apply_fn(actor_critic(spec, c), c)

  def loss_fn(params, mb, hp):
    out, value = apply(params, mb['obs'])
    logp, entropy = log_prob_entropy(spec, out, mb['action'])
    ratio = jnp.exp(logp - mb['log_prob'])
    adv = mb['adv']
    if c.normalize_adv and not c.get('normalize_adv_rollout', False):
      adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    surrogate = jnp.minimum(
        ratio * adv,
        jnp.clip(ratio, 1.0 - hp['clip_eps'], 1.0 + hp['clip_eps']) * adv)
    pg_loss = -surrogate.mean()
    v_loss = 0.5 * jnp.mean((value - mb['target'])**2)
    ent = entropy.mean()
    loss = pg_loss + c.vf_coef * v_loss - hp['ent_coef'] * ent
    return loss, {'loss/policy': pg_loss, 'loss/value': v_loss,
                  'entropy': ent,
                  'approx_kl': jnp.mean((ratio - 1.0) - jnp.log(ratio))}

  return loss_fn


CRITIC = 'MLP_0'   # `networks.ActorCritic`'s value MLP (built first)


def param_labels(params) -> Any:
  """'critic' on the value MLP's weights, 'actor' on the rest."""
  return jax.tree_util.tree_map_with_path(
      lambda path, _: 'critic' if any(
          getattr(k, 'key', None) == CRITIC for k in path) else 'actor',
      params)


def decay_mask(params) -> Any:
  """True on weights, False on biases: Adam-W's decay mask in the FGE
  release (og `networks/optim.py` `wd_mask`)."""
  return jax.tree_util.tree_map_with_path(
      lambda path, _: not any(getattr(k, 'key', None) == 'bias'
                              for k in path), params)


def make_optimizer(c: ml_collections.ConfigDict
                   ) -> optax.GradientTransformation:
  """The PPO optimiser, its `learning_rate` injected (swept, annealed):
  one Adam on the joint loss, or with `c.value_learning_rate` the release's
  split Adam-W pair (see the module docstring)."""
  clip = lambda: (optax.clip_by_global_norm(c.max_grad_norm)
                  if c.max_grad_norm else optax.identity())
  value_lr = c.get('value_learning_rate', None)

  def make_tx(learning_rate):
    if value_lr is None:
      return optax.chain(clip(), optax.adam(learning_rate, eps=1e-5))
    return optax.multi_transform(
        {'actor': optax.chain(clip(), optax.adamw(
            learning_rate, eps=1e-5, weight_decay=0.0)),
         'critic': optax.chain(clip(), optax.adamw(
             float(value_lr), eps=1e-5,
             weight_decay=float(c.get('value_weight_decay', 0.0)),
             mask=decay_mask))},
        param_labels)

  return optax.inject_hyperparams(make_tx)(learning_rate=c.learning_rate)


def default_hparams(c: ml_collections.ConfigDict) -> dict[str, jax.Array]:
  return {k: jnp.asarray(c[k], jnp.float32) for k in SWEEPABLE}


def make_ppo(env: envs_lib.Env, c: ml_collections.ConfigDict, *,
             num_updates: int, return_window: int = 10,
             solve_threshold: float | None = None, with_batch: bool = False):
  """Returns (init(key, hparams) -> PPOState, step(state, t) -> (state, m)).

  With `with_batch`, `step` returns `(state, metrics, batch)`: the rollout
  (`rl.rollout.Batch`, incl. the env's `info`) for algorithms that learn
  from it besides PPO (e.g. FGE's feasibility buffers, `rl.fge`).
  """
  spec = env.spec
  net = actor_critic(spec, c)
  apply = apply_fn(net, c)
  batch_size = c.num_envs * c.num_steps

  tx = make_optimizer(c)

  def to_env_action(u):
    if spec.discrete:
      return u
    lo, hi = spec.action_low, spec.action_high
    return lo + (jnp.tanh(u) + 1.0) * 0.5 * (hi - lo)

  def policy(params, obs, key):
    out, value = apply(params, obs)
    if spec.discrete:
      a = dist.categorical_sample(key, out)
      return a, a, dist.categorical_log_prob(out, a), value, None
    mean, log_std = out
    u = dist.tanh_gaussian_sample(key, mean, log_std)
    return (to_env_action(u), u, dist.tanh_gaussian_log_prob(u, mean, log_std),
            value, None)

  def init(key: jax.Array, hparams: Mapping[str, jax.Array] | None = None
           ) -> PPOState:
    hparams = dict(hparams) if hparams is not None else default_hparams(c)
    hparams.setdefault('num_updates', jnp.float32(num_updates))
    k_net, k_env, k_run = jax.random.split(key, 3)
    obs, env_state = jax.vmap(env.reset)(jax.random.split(k_env, c.num_envs))
    params = net.init(k_net, obs[0])
    opt_state = tx.init(params)
    opt_state.hyperparams['learning_rate'] = hparams['learning_rate']
    return PPOState(params, opt_state, env_state, obs,
                    ro.RunningNorm.create(obs.shape[1:]),
                    ro.EpisodeStats.create(c.num_envs, return_window), k_run,
                    hparams, jnp.int32(-1))

  loss_fn = make_loss_fn(spec, c)

  def step(state: PPOState, t: jax.Array):
    key, k_roll, k_upd = jax.random.split(state.key, 3)
    norm = state.norm
    batch, env_state, obs, stats = ro.rollout(
        env, policy, state.params, state.env_state, state.obs, state.stats,
        norm, k_roll, c.num_steps, c.normalize_obs)
    if c.normalize_obs:
      # Stats for the next rollout, from all T x E observations of this one.
      norm = norm.update(batch.raw_obs)
    _, next_value = apply(state.params, batch.final_obs)
    done = batch.terminated | batch.truncated
    adv, target = ro.gae(batch.reward, batch.value, next_value,
                         batch.terminated.astype(jnp.float32),
                         done.astype(jnp.float32), c.gamma, c.gae_lambda)
    if c.normalize_adv and c.get('normalize_adv_rollout', False):
      adv = (adv - adv.mean()) / (adv.std() + 1e-5)
    data = {'obs': batch.obs, 'action': batch.action,
            'log_prob': batch.log_prob, 'adv': adv, 'target': target}
    hp = state.hparams
    lr = hp['learning_rate'] * (
        1.0 - t.astype(jnp.float32) / hp['num_updates'] if c.anneal_lr
        else 1.0)
    opt_state = state.opt_state
    opt_state.hyperparams['learning_rate'] = lr

    params, opt_state, info = ro.sgd_epochs(
        loss_fn, tx, state.params, opt_state, data, k_upd, c.num_epochs,
        c.num_minibatches, c.shuffle, hp, shard=c.num_envs > 1)
    env_steps = (t + 1) * batch_size
    ret, solved_at = ro.update_solved(stats, env_steps, state.solved_at,
                                      solve_threshold)
    metrics = {k: v.mean() for k, v in info.items()}
    metrics.update({'return': ret, 'env_steps': env_steps,
                    'solved_at': solved_at})
    new = PPOState(params, opt_state, env_state, obs, norm, stats, key, hp,
                   solved_at)
    if with_batch:
      return new, metrics, batch
    return new, metrics

  return init, step


def greedy_policy(spec: envs_lib.EnvSpec, c: ml_collections.ConfigDict):
  """act(params, norm, obs) -> the deterministic action of `make_ppo`'s actor
  (argmax of the logits; tanh of the Gaussian mean, scaled to the bounds)."""
  net = actor_critic(spec, c)

  def act(params, norm: ro.RunningNorm, obs: jax.Array) -> jax.Array:
    out, _ = net.apply(params, norm(obs, c.normalize_obs))
    if spec.discrete:
      return jnp.argmax(out, axis=-1)
    lo, hi = spec.action_low, spec.action_high
    return lo + (jnp.tanh(out[0]) + 1.0) * 0.5 * (hi - lo)

  return act


def sampling_policy(spec: envs_lib.EnvSpec, c: ml_collections.ConfigDict):
  """act(params, norm, obs, key) -> an action sampled from `make_ppo`'s
  actor, as its rollouts take them (categorical over the logits; tanh of a
  Gaussian sample, scaled to the bounds): the stochastic policy that
  curricula score levels with (SFL's success rates, PAIRED's regret)."""
  net = actor_critic(spec, c)

  def act(params, norm: ro.RunningNorm, obs: jax.Array, key: jax.Array
          ) -> jax.Array:
    out, _ = net.apply(params, norm(obs, c.normalize_obs))
    if spec.discrete:
      return dist.categorical_sample(key, out)
    u = dist.tanh_gaussian_sample(key, *out)
    lo, hi = spec.action_low, spec.action_high
    return lo + (jnp.tanh(u) + 1.0) * 0.5 * (hi - lo)

  return act
