"""PPO in function space with a kernel-TD critic (Zou et al., "Sampling
Complexity of TD and PPO in RKHS", arXiv 2509.24991), both forms.

Notation: omega = (s, a); at outer iteration k the agent collects n one-step
tuples (s0, a0, r, s1) with pi_k and uses Delta_k = k^{-p} (p = 0.2, 0.5,
1.5 in the paper's schedules; `delta_schedule`).

RKHS form (the theory; `make_rkhs`):
  * Kernel-TD critic (Sec. 3): the fixed point of kernel ridge TD,
      Q = K(., omega0) b,  b = [K + lam n I - gamma C]^{-1} r,
      K_ij = K(omega0_i, omega0_j), C_ij = K(omega1_i, omega0_j),
    reached without the O(n^3) solve by the functional gradient
      f <- f - eta [ (1/n) sum_i (f(omega0_i) - r_i - gamma f(omega1_i))
                                K(omega0_i, .) + lam f ]
    (`kernel_td_iterate` in coefficients, `td_feature_step` in features;
    f(omega1) is the expectation over a1 ~ pi_k(.|s1)).
  * The kernel is k_s(s, s') 1[a = a'] with k_s an RBF kernel through random
    Fourier features or a Nystrom dictionary (`iclrjax.kernels.features`),
    so f(s, a) = w_a . phi(s) and the functional gradient is exact in
    feature space.
  * KL-regularised natural-gradient policy step (explicit PPO / NPG):
      pi_{k+1} = argmax_pi E[Delta_k <f_k(s, .), pi> - KL(pi || pi_k)]
               = pi_k exp(Delta_k f_k) / Z  (`npg_policy_step`),
    i.e. policy logits theta_{k+1} = theta_k + Delta_k w_k.
  * Sample-size and ridge rule (Cor. 14): n(k) = min(n_max, ceil(n0
    (k+1)^q)) (`sample_size`) and lambda(k) = lambda0 (n(k) / n0)^{-r}
    (`ridge_schedule`): the paper's kernel-specific table is not
    reproduced here, so n0, q, lambda0 and r are config.

Network form (the paper's experiments; `make_network`): one MLP f_theta(s)
in R^{|A|} is both the critic Q(s, a) = f(s)_a and the policy
pi = softmax(f). Per minibatch

  L = -E_s[ sum_a pi(a|s) sg(Q(s,a)) - (1/Delta_k) KL(pi(.|s) || pi_old(.|s)) ]
      + c_v E[(Q(s,a) - r - gamma (1-d) sum_a' w(a') sg(Q(s',a')))^2]
      - c_e E[H(pi(.|s))]

with the expected-SARSA weights w = pi(.|s') (or the reference code's
w = pi(.|s), `target_weights='reference'`), Delta_0 = `beta0`, and s' the
state reached (bootstrapped at time limits unless `truncation_as_terminal`,
which the reference code does), and r the env reward times `reward_scale`
(default 1, the release's). Q is in reward units and pi = softmax(Q) at
temperature 1, so the reward scale sets how greedy the policy is: at
Acrobot's -1 per step, Q ~ -100 with action gaps of tens, and the policy
collapses to near-determinism (docs/papers/kernel_ppo.md, "Acrobot
pilots").

Against the released code (conniemessi/TD-and-PPO-in-RKHS main_discrete.py
at e34e34b; tests/parity/test_kernel_ppo.py runs it): with
target_weights='reference' the loss, its gradients, the Adam steps and the
beta_k schedule match (names: policy_params = `beta0`, schedule_pow =
-`power`, vf_loss_coef = `value_coef`, entropy_coef = `ent_coef`, T =
`num_epochs`, n_update / batchsize = `num_minibatches`). Deliberate
differences: the TD target weights pi(.|s') by default (theirs pi(.|s),
main_discrete.py:154); bootstrapping through time limits by default (theirs
stores done = terminated or truncated, :335); pi_old of the first update is
the rollout policy (theirs a separately initialised actor_old, :182/:188,
synced with the current network only after each update, :292); and our
orthogonal initialisation (theirs torch's default Linear init).
`reward_scale` is ours (the release has none; its default 1 reproduces it),
and so is the continuous form (the release is discrete only).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import optax

from iclrjax.core import config as cfg_lib
from iclrjax.core import distributed
from iclrjax.kernels import features as features_lib
from iclrjax.rl import distributions as dist
from iclrjax.rl import envs as envs_lib
from iclrjax.rl import networks
from iclrjax.rl import rollout as ro


# ---------------------------------------------------------------------------
# The math of the paper, as small pure functions (tested against closed forms).


def delta_schedule(k: jax.Array, power: jax.Array, beta0: float) -> jax.Array:
  """Delta_k = k^{-power} for k >= 1, and `beta0` at the first update k=0."""
  k = jnp.asarray(k, jnp.float32)
  return jnp.where(k < 1, beta0, jnp.maximum(k, 1.0) ** (-power))


def kernel_td_closed_form(K: jax.Array, C: jax.Array, r: jax.Array,
                          lam: float) -> jax.Array:
  """b = [K + lam n I - gamma C]^{-1} r (C already carries gamma)."""
  n = K.shape[0]
  return jnp.linalg.solve(K + lam * n * jnp.eye(n, dtype=K.dtype) - C, r)


def kernel_td_iterate(K: jax.Array, C: jax.Array, r: jax.Array, lam: float,
                      eta: float, num_iters: int,
                      b0: jax.Array | None = None) -> jax.Array:
  """Functional TD gradient in coefficients:

    b <- b - eta [ (1/n)(K b - r - C b) + lam b ],

  whose fixed point is `kernel_td_closed_form`. Converges when the spectral
  radius of I - eta ((K - C)/n + lam I) is below 1.
  """
  n = K.shape[0]
  b = jnp.zeros_like(r) if b0 is None else b0

  def body(b, _):
    return b - eta * ((K @ b - r - C @ b) / n + lam * b), None

  return jax.lax.scan(body, b, None, length=num_iters)[0]


def td_feature_step(w: jax.Array, phi0: jax.Array, q_next: jax.Array,
                    r: jax.Array, lam: float, eta: float,
                    weight: jax.Array | None = None) -> jax.Array:
  """One functional TD step in feature space, f = <w, phi>.

  Args:
    w: [D] weights of f.
    phi0: [n, D] features of omega0.
    q_next: [n] gamma (1 - terminal) f(omega1) (expected over a1), computed
      with the current w by the caller.
    r: [n] rewards.
    lam, eta: ridge and step size.
    weight: optional [n] 0/1 mask of valid samples (n = its sum).

  Returns:
    w - eta [ (1/n) sum_i delta_i phi0_i + lam w ],
    delta_i = f(omega0_i) - r_i - q_next_i. With K = phi0 phi0^T and
    C = Phi1 phi0^T this is `kernel_td_iterate` mapped through phi0^T.
  """
  if weight is None:
    weight = jnp.ones_like(r)
  n = jnp.maximum(weight.sum(), 1.0)
  delta = (phi0 @ w - r - q_next) * weight
  return w - eta * (phi0.T @ delta / n + lam * w)


def npg_policy_step(logits: jax.Array, f: jax.Array,
                    delta: jax.Array) -> jax.Array:
  """Logits of pi_{k+1} = pi_k exp(Delta f) / Z, the maximiser of
  Delta <f, pi> - KL(pi || pi_k) over the simplex."""
  return jax.nn.log_softmax(logits + delta * f)


def sample_size(k: jax.Array, n0: int, q: float, n_max: int) -> jax.Array:
  """n(k) = min(n_max, ceil(n0 (k + 1)^q)): the growing sample-size rule."""
  k = jnp.asarray(k, jnp.float32)
  return jnp.minimum(jnp.ceil(n0 * (k + 1.0) ** q), n_max).astype(jnp.int32)


# ---------------------------------------------------------------------------
# Configs.


def network_schema(prefix: str = 'npg.') -> dict[str, cfg_lib.Spec]:
  pos = cfg_lib.Float(min=0.0, min_inclusive=False)
  fields = {
      'num_envs': cfg_lib.Int(min=1),
      'num_steps': cfg_lib.Int(min=1),
      'num_epochs': cfg_lib.Int(min=1),
      'num_minibatches': cfg_lib.Int(min=1),
      'gamma': cfg_lib.Float(min=0.0, max=1.0),
      'learning_rate': pos,
      'hidden': cfg_lib.Seq(item=cfg_lib.Int(min=1), min_len=1),
      'activation': cfg_lib.Choice(*networks.ACTIVATIONS),
      'value_coef': cfg_lib.Float(min=0.0),
      'ent_coef': cfg_lib.Float(min=0.0),
      'beta0': pos,
      'reward_scale': cfg_lib.Float(min=0.0, min_inclusive=False,
                                    help='rewards are multiplied by it '
                                    'before the TD target: the softmax-of-Q '
                                    'policy\'s inverse temperature'),
      'target_weights': cfg_lib.Choice('next_state', 'reference'),
      'num_action_samples': cfg_lib.Int(min=1, help='continuous actions: '
                                        'samples per state of the NPG step '
                                        'and the TD target'),
  }
  return {prefix + k: v for k, v in fields.items()}


def default_config() -> ml_collections.ConfigDict:
  """The network form's documented defaults, for `make_network(env)` on any
  `envs.Env` (gymnax, Brax or your own): the released code's setting
  (main_discrete.py:362-380 at e34e34b: 1 env x 128 steps per update, 4
  epochs x 4 minibatches of 32, Adam 1e-3, 2x64 ReLU, gamma 0.99, c_v 1,
  c_e 0.05, beta0 = 20) with our deliberate differences (module docstring):
  the expected-SARSA target under pi(.|s') and bootstrapping through time
  limits. configs/kernel_ppo.py's `npg` section is this config.

  Fields (`network_schema`): num_envs, num_steps (rollout per update),
  num_epochs, num_minibatches, gamma, learning_rate, hidden, activation,
  value_coef (c_v), ent_coef (c_e), beta0 (Delta_0), reward_scale (rewards
  are multiplied by it before the TD target; the discrete policy is
  softmax(Q), so this is its inverse temperature), target_weights
  ('next_state' | 'reference'), num_action_samples (continuous actions: M),
  truncation_as_terminal, shuffle (minibatch order).
  """
  return ml_collections.ConfigDict(dict(
      num_envs=1, num_steps=128, num_epochs=4, num_minibatches=4,
      gamma=0.99, learning_rate=1e-3, hidden=(64, 64), activation='relu',
      value_coef=1.0, ent_coef=0.05, beta0=20.0, reward_scale=1.0,
      target_weights='next_state', num_action_samples=8,
      truncation_as_terminal=False, shuffle=False))


def rkhs_schema(prefix: str = 'rkhs.') -> dict[str, cfg_lib.Spec]:
  pos = cfg_lib.Float(min=0.0, min_inclusive=False)
  fields = {
      'num_envs': cfg_lib.Int(min=1),
      'num_steps': cfg_lib.Int(min=1, help='n_max / num_envs'),
      'gamma': cfg_lib.Float(min=0.0, max=1.0),
      'features': cfg_lib.Choice('rff', 'nystrom'),
      'num_features': cfg_lib.Int(min=1),
      'lengthscale': pos,
      'td_iters': cfg_lib.Int(min=1),
      'td_lr': pos,
      'ridge': cfg_lib.Float(min=0.0),
      'ridge_power': cfg_lib.Float(min=0.0),
      'step_scale': cfg_lib.Float(min=0.0, min_inclusive=False,
                                  help='Delta_k = step_scale k^-p for k >= 1'),
      'beta0': pos,
      'n0': cfg_lib.Int(min=1),
      'sample_power': cfg_lib.Float(min=0.0),
  }
  return {prefix + k: v for k, v in fields.items()}


class AgentState(NamedTuple):
  """State of either form; `params` is the network or (w, theta, features)."""

  params: Any
  opt_state: Any
  env_state: Any
  obs: jax.Array
  stats: ro.EpisodeStats
  key: jax.Array
  power: jax.Array       # the step-size exponent p of Delta_k = k^-p (a sweep
                         # axis: one agent per schedule)
  env_steps: jax.Array   # env interactions so far
  solved_at: jax.Array   # env steps when the rolling return first passed
                         # the threshold (-1: not yet)


def _no_norm() -> ro.RunningNorm:
  """Identity statistics: observations are used raw here. A function, not a
  module constant, so that importing this module does no JAX work."""
  return ro.RunningNorm.create(())


# ---------------------------------------------------------------------------
# Network form: what the paper's experiments run.


def gaussian_npg_objective(mean: jax.Array, log_std: jax.Array,
                           old_mean: jax.Array, old_log_std: jax.Array,
                           q_fn, eps_MxA: jax.Array,
                           inv_delta: jax.Array) -> jax.Array:
  """The KL-regularised NPG step for a Gaussian policy, sampled:

    -E_{u ~ pi}[f(u)] + (1/Delta) KL(pi || pi_k),  u = mean + std eps,

  with the expectation over the M reparameterised samples `eps_MxA` and the
  Gaussian KL in closed form. Its minimiser over all distributions is the
  closed-form step pi_k exp(Delta f) / Z (`npg_policy_step`); over
  Gaussians it is that tilted density's Gaussian projection (exact when f
  is quadratic). `q_fn(u [M, A]) -> [M]`.
  """
  u = mean + jnp.exp(log_std) * eps_MxA
  return (-jnp.mean(q_fn(u))
          + inv_delta * dist.gaussian_kl(mean, log_std, old_mean, old_log_std))


def _proximal_update(state: AgentState, k: jax.Array, data: Any, loss_fn,
                     tx: optax.GradientTransformation,
                     c: ml_collections.ConfigDict, key: jax.Array,
                     solve_threshold: float | None):
  """The network form's update from one rollout `data` (state already
  carries the env after it): the proximal loss with 1 / Delta_k for
  `num_epochs` x `num_minibatches` steps, then the step counters."""
  delta = delta_schedule(k, state.power, c.beta0)
  params, opt_state, info = ro.sgd_epochs(
      loss_fn, tx, state.params, state.opt_state, data, key, c.num_epochs,
      c.num_minibatches, c.shuffle, 1.0 / delta, shard=c.num_envs > 1)
  env_steps = state.env_steps + c.num_envs * c.num_steps
  ret, solved_at = ro.update_solved(state.stats, env_steps, state.solved_at,
                                    solve_threshold)
  metrics = {n: v.mean() for n, v in info.items()}
  metrics.update({'return': ret, 'env_steps': env_steps,
                  'solved_at': solved_at, 'delta': delta})
  return state._replace(params=params, opt_state=opt_state,
                        env_steps=env_steps, solved_at=solved_at), metrics


def network_loss_fn(net: nn.Module, c: ml_collections.ConfigDict):
  """The discrete network form's minibatch loss `loss_fn(params, mb,
  inv_delta) -> (loss, info)` (module docstring), what `make_network`
  trains. `mb` holds obs, action, old_logits (pi_k's logits at the rollout),
  reward, next_obs and cont (1 - terminal, `continuation`)."""

  def loss_fn(params, mb, inv_delta):
    logits = net.apply(params, mb['obs'])
    pi = jax.nn.softmax(logits)
    q = logits
    # Policy: maximise <pi, sg(Q)> with a KL(pi || pi_old) proximal penalty.
    pg = -jnp.sum(pi * jax.lax.stop_gradient(q), -1)
    kl = dist.categorical_kl(logits, mb['old_logits'])
    # Critic: one-step expected-SARSA TD on the same logits.
    next_q = jax.lax.stop_gradient(net.apply(params, mb['next_obs']))
    w = jax.nn.softmax(next_q if c.target_weights == 'next_state' else logits)
    target = mb['reward'] + c.gamma * mb['cont'] * jnp.sum(
        jax.lax.stop_gradient(w) * next_q, -1)
    q_sa = jnp.take_along_axis(q, mb['action'][:, None], -1)[:, 0]
    td = jnp.mean((q_sa - target)**2)
    ent = dist.categorical_entropy(logits).mean()
    loss = jnp.mean(pg + inv_delta * kl) + c.value_coef * td - c.ent_coef * ent
    return loss, {'loss/policy': pg.mean(), 'kl': kl.mean(), 'loss/td': td,
                  'entropy': ent}

  return loss_fn


def continuation(terminated: jax.Array, truncated: jax.Array,
                 truncation_as_terminal: bool) -> jax.Array:
  """1 - d of the TD target: 0 at a true termination, and also at a time
  limit when `truncation_as_terminal` (the reference code stores done =
  terminated or truncated, main_discrete.py:335 at e34e34b); by default we
  bootstrap through time limits."""
  end = terminated | truncated if truncation_as_terminal else terminated
  return 1.0 - end.astype(jnp.float32)


def make_network(env: envs_lib.Env,
                 c: ml_collections.ConfigDict | None = None, *,
                 return_window: int = 10,
                 solve_threshold: float | None = None):
  """(init(key, power) -> AgentState, step(state, k) -> (state, metrics)).

  `power` is p of Delta_k = k^-p (a float, or a batch of them under vmap);
  `k` counts updates from 0. `c` defaults to `default_config()`.
  Discrete actions: one MLP is policy logits and Q (the paper's code).
  Continuous actions: `make_network_continuous`.
  """
  c = default_config() if c is None else c
  spec = env.spec
  if not spec.discrete:
    return make_network_continuous(env, c, return_window=return_window,
                                   solve_threshold=solve_threshold)
  net = networks.MLP(tuple(c.hidden), spec.num_actions, c.activation,
                     head_scale=1.0)
  tx = optax.adam(c.learning_rate)

  def policy(params, obs, key):
    logits = net.apply(params, obs)
    a = dist.categorical_sample(key, logits)
    return a, a, dist.categorical_log_prob(logits, a), jnp.zeros(
        a.shape), logits

  def init(key: jax.Array, power: jax.Array) -> AgentState:
    k_net, k_env, k_run = jax.random.split(key, 3)
    obs, env_state = jax.vmap(env.reset)(jax.random.split(k_env, c.num_envs))
    params = net.init(k_net, obs[0])
    return AgentState(params, tx.init(params), env_state, obs,
                      ro.EpisodeStats.create(c.num_envs, return_window),
                      k_run, jnp.asarray(power, jnp.float32), jnp.int32(0),
                      jnp.int32(-1))

  loss_fn = network_loss_fn(net, c)

  def step(state: AgentState, k: jax.Array):
    key, k_roll, k_upd = jax.random.split(state.key, 3)
    batch, env_state, obs, stats = ro.rollout(
        env, policy, state.params, state.env_state, state.obs, state.stats,
        _no_norm(), k_roll, c.num_steps, normalize_obs=False)
    data = {'obs': batch.obs, 'action': batch.action,
            'old_logits': batch.extra,
            'reward': c.get('reward_scale', 1.0) * batch.reward,
            'next_obs': batch.final_obs,
            'cont': continuation(batch.terminated, batch.truncated,
                                 c.truncation_as_terminal)}
    return _proximal_update(state._replace(env_state=env_state, obs=obs,
                                           stats=stats, key=key),
                            k, data, loss_fn, tx, c, k_upd, solve_threshold)

  return init, step


class ContinuousNet(nn.Module):
  """Gaussian actor over the pre-squash action u (mean MLP, state-
  independent log-std) and a critic MLP Q(s, tanh u)."""

  num_actions: int
  hidden: tuple[int, ...]
  activation: str

  def setup(self):
    self.actor = networks.MLP(self.hidden, self.num_actions, self.activation,
                              head_scale=0.01)
    self.critic = networks.MLP(self.hidden, 1, self.activation)
    self.log_std = self.param('log_std', nn.initializers.zeros,
                              (self.num_actions,))

  def __call__(self, obs, u):
    return self.policy(obs), self.q(obs, u)

  def policy(self, obs):
    mean = self.actor(obs)
    return mean, jnp.broadcast_to(self.log_std, mean.shape)

  def q(self, obs, u):
    # On the squashed action in [-1, 1]: beyond saturation the value is flat.
    return self.critic(jnp.concatenate([obs, jnp.tanh(u)], -1))[..., 0]


def make_network_continuous(env: envs_lib.Env,
                            c: ml_collections.ConfigDict | None = None,
                            *, return_window: int = 10,
                            solve_threshold: float | None = None):
  """The network form for continuous actions: a tanh-Gaussian policy over
  the action box and a separate critic Q(s, tanh u) (u the pre-squash
  action).
  Per minibatch, with Delta = Delta_k and M = `num_action_samples`:

    L = E_s[ gaussian_npg_objective(pi(.|s), pi_old(.|s), sg-params Q) ]
        + c_v E[(Q(s, u) - r - gamma (1-d) (1/M) sum_j sg Q(s', u'_j))^2]
        - c_e E[H(pi(.|s))],    u'_j ~ pi_old(.|s').

  r is the env reward times `reward_scale`; `c` defaults to
  `default_config()`.
  """
  c = default_config() if c is None else c
  spec = env.spec
  A = spec.num_actions
  net = ContinuousNet(A, tuple(c.hidden), c.activation)
  tx = optax.adam(c.learning_rate)
  M = c.num_action_samples
  lo, hi = spec.action_low, spec.action_high

  def policy(params, obs, key):
    mean, log_std = net.apply(params, obs, method=ContinuousNet.policy)
    u = dist.tanh_gaussian_sample(key, mean, log_std)
    a = lo + (jnp.tanh(u) + 1.0) * 0.5 * (hi - lo)
    return a, u, dist.gaussian_log_prob(u, mean, log_std), jnp.zeros(
        u.shape[:-1]), (mean, log_std)

  def init(key: jax.Array, power: jax.Array) -> AgentState:
    k_net, k_env, k_run = jax.random.split(key, 3)
    obs, env_state = jax.vmap(env.reset)(jax.random.split(k_env, c.num_envs))
    params = net.init(k_net, obs[0], jnp.zeros((A,)))
    return AgentState(params, tx.init(params), env_state, obs,
                      ro.EpisodeStats.create(c.num_envs, return_window),
                      k_run, jnp.asarray(power, jnp.float32), jnp.int32(0),
                      jnp.int32(-1))

  def loss_fn(params, mb, inv_delta):
    mean, log_std = net.apply(params, mb['obs'], method=ContinuousNet.policy)
    old_mean, old_log_std = mb['old_mean'], mb['old_log_std']
    q_sg = lambda obs, u: net.apply(jax.lax.stop_gradient(params), obs, u,
                                    method=ContinuousNet.q)
    obj = jax.vmap(lambda m, ls, om, ols, o, e: gaussian_npg_objective(
        m, ls, om, ols, lambda uu: q_sg(jnp.broadcast_to(o, (M,) + o.shape),
                                        uu), e, inv_delta))(
                                            mean, log_std, old_mean,
                                            old_log_std, mb['obs'], mb['eps'])
    kl = dist.gaussian_kl(mean, log_std, old_mean, old_log_std)
    u_next = (mb['next_mean'][:, None] + jnp.exp(mb['next_log_std'])[:, None]
              * mb['eps_next'])                              # [B, M, A]
    next_obs = jnp.broadcast_to(mb['next_obs'][:, None],
                                (u_next.shape[0], M, mb['next_obs'].shape[-1]))
    v_next = q_sg(next_obs, u_next).mean(-1)
    target = mb['reward'] + c.gamma * mb['cont'] * v_next
    q_sa = net.apply(params, mb['obs'], mb['action'], method=ContinuousNet.q)
    td = jnp.mean((q_sa - target)**2)
    ent = jnp.sum(log_std, -1).mean()  # Gaussian entropy up to a constant
    loss = obj.mean() + c.value_coef * td - c.ent_coef * ent
    return loss, {'loss/policy': obj.mean(), 'kl': kl.mean(), 'loss/td': td,
                  'entropy': ent}

  def step(state: AgentState, k: jax.Array):
    key, k_roll, k_upd, k_eps = jax.random.split(state.key, 4)
    batch, env_state, obs, stats = ro.rollout(
        env, policy, state.params, state.env_state, state.obs, state.stats,
        _no_norm(), k_roll, c.num_steps, normalize_obs=False)
    next_mean, next_log_std = net.apply(state.params, batch.final_obs,
                                        method=ContinuousNet.policy)
    k1, k2 = jax.random.split(k_eps)
    T, E = batch.reward.shape
    data = {'obs': batch.obs, 'action': batch.action,
            'old_mean': batch.extra[0], 'old_log_std': batch.extra[1],
            'reward': c.get('reward_scale', 1.0) * batch.reward,
            'next_obs': batch.final_obs, 'next_mean': next_mean, 'next_log_std': next_log_std,
            'eps': jax.random.normal(k1, (T, E, M, A)),
            'eps_next': jax.random.normal(k2, (T, E, M, A)),
            'cont': continuation(batch.terminated, batch.truncated,
                                 c.truncation_as_terminal)}
    return _proximal_update(state._replace(env_state=env_state, obs=obs,
                                           stats=stats, key=key),
                            k, data, loss_fn, tx, c, k_upd, solve_threshold)

  return init, step


# ---------------------------------------------------------------------------
# RKHS form: kernel-TD critic + closed-form NPG policy step.


class RKHSParams(NamedTuple):
  w: jax.Array        # [A, D] critic f_k(s, a) = w_a . phi(s)
  theta: jax.Array    # [A, D] policy logits = sum_j Delta_j w_j
  fmap: features_lib.FeatureMap  # phi: RFF or a Nystrom dictionary
  obs_mean: jax.Array  # [d] the kernel sees (s - mean) / std, fixed from
  obs_std: jax.Array   # [d] states of a uniform-random policy (one
                       # lengthscale per standardised dimension)


def ridge_schedule(n_k: jax.Array, ridge: float, n0: int,
                   power: float) -> jax.Array:
  """lambda(k) = ridge (n(k) / n0)^{-power}: the ridge shrinks as the
  per-iteration sample grows (power = 0: a constant ridge)."""
  return ridge * (jnp.asarray(n_k, jnp.float32) / n0) ** (-power)


def make_rkhs(env: envs_lib.Env, c: ml_collections.ConfigDict, *,
              return_window: int = 10,
              solve_threshold: float | None = None):
  """(init(key, power) -> AgentState, step(state, k) -> (state, metrics))."""
  spec = env.spec
  if not spec.discrete:
    raise ValueError(f'{spec.name}: the RKHS form needs discrete actions')
  A, D = spec.num_actions, c.num_features
  n_max = c.num_envs * c.num_steps

  def feats(p, obs):
    return features_lib.apply(p.fmap, (obs - p.obs_mean) / p.obs_std,
                              c.features, c.lengthscale)

  def policy(p, obs, key):
    logits = feats(p, obs) @ p.theta.T
    a = dist.categorical_sample(key, logits)
    return a, a, dist.categorical_log_prob(logits, a), jnp.zeros(
        a.shape), logits

  def init(key: jax.Array, power: jax.Array) -> AgentState:
    k_feat, k_env, k_run, k_states = jax.random.split(key, 4)
    obs, env_state = jax.vmap(env.reset)(jax.random.split(k_env, c.num_envs))
    states = _random_policy_states(env, k_states, max(D, 1024))
    mean, std = states.mean(0), states.std(0) + 1e-3
    if c.features == 'rff':
      fmap = features_lib.random_fourier(k_feat, obs.shape[-1], D,
                                         c.lengthscale)
    else:
      # Nystrom centres: states visited by a uniform-random policy.
      fmap = features_lib.nystrom((states[:D] - mean) / std, c.lengthscale)
    p = RKHSParams(jnp.zeros((A, D)), jnp.zeros((A, D)), fmap, mean, std)
    return AgentState(p, (), env_state, obs,
                      ro.EpisodeStats.create(c.num_envs, return_window),
                      k_run, jnp.asarray(power, jnp.float32), jnp.int32(0),
                      jnp.int32(-1))

  def step(state: AgentState, k: jax.Array):
    key, k_roll = jax.random.split(state.key)
    p = state.params
    if c.sample_rule:
      n_k = sample_size(k, c.n0, c.sample_power, n_max)
      steps_k = -(-n_k // c.num_envs)  # ceil
      ridge = ridge_schedule(steps_k * c.num_envs, c.ridge, c.n0,
                             c.ridge_power)
    else:
      steps_k = jnp.int32(c.num_steps)
      ridge = jnp.asarray(c.ridge, jnp.float32)
    active = jnp.arange(c.num_steps) < steps_k
    # The few envs stay whole (they need not divide the mesh); the batch
    # split over 'data' is the n_max = num_steps x num_envs samples the
    # kernel-TD iterations run on.
    batch, env_state, obs, stats = ro.rollout(
        env, policy, p, state.env_state, state.obs, state.stats, _no_norm(),
        k_roll, c.num_steps, normalize_obs=False, active=active, shard=False)
    flat = lambda x: x.reshape(-1, *x.shape[2:])
    s0, s1, a0, term, r, valid = distributed.shard_batch((
        flat(batch.obs), flat(batch.final_obs), flat(batch.action),
        flat(batch.terminated), flat(batch.reward),
        jnp.repeat(active, c.num_envs).astype(jnp.float32)))
    phi0 = feats(p, s0)                                    # [n, D]
    phi1 = feats(p, s1)                                    # [n, D]
    onehot = jax.nn.one_hot(a0, A)                         # [n, A]
    pi1 = jax.nn.softmax(phi1 @ p.theta.T)                 # pi_k(.|s1)
    cont = 1.0 - term.astype(jnp.float32)
    # Joint features of omega0 = (s0, a0): onehot(a0) (x) phi(s0).
    phi_sa = (onehot[:, :, None] * phi0[:, None, :]).reshape(-1, A * D)

    def td_iter(w_flat, _):
      w = w_flat.reshape(A, D)
      q_next = c.gamma * cont * jnp.sum(pi1 * (phi1 @ w.T), -1)
      return td_feature_step(w_flat, phi_sa, q_next, r, ridge, c.td_lr,
                             valid), None

    w0 = p.w if c.warm_start else jnp.zeros_like(p.w)
    w = jax.lax.scan(td_iter, w0.reshape(-1), None,
                     length=c.td_iters)[0].reshape(A, D)
    delta = delta_schedule(k, state.power, c.beta0) * jnp.where(
        k < 1, 1.0, c.step_scale)
    new_p = p._replace(w=w, theta=p.theta + delta * w)
    env_steps = state.env_steps + steps_k * c.num_envs
    ret, solved_at = ro.update_solved(stats, env_steps, state.solved_at,
                                      solve_threshold)
    q0 = jnp.sum(onehot * (phi0 @ w.T), -1)
    metrics = {'return': ret, 'env_steps': env_steps, 'solved_at': solved_at,
               'delta': delta, 'samples': steps_k * c.num_envs,
               'ridge': ridge,
               'td_error': jnp.sum(valid * (q0 - r - c.gamma * cont * jnp.sum(
                   pi1 * (phi1 @ w.T), -1))**2) / valid.sum()}
    return AgentState(new_p, (), env_state, obs, stats, key, state.power,
                      env_steps, solved_at), metrics

  return init, step


def _random_policy_states(env: envs_lib.Env, key: jax.Array,
                          n: int) -> jax.Array:
  """n states visited by a uniform-random policy (Nystrom dictionary)."""
  k_reset, k_run = jax.random.split(key)
  obs, state = env.reset(k_reset)

  def body(carry, k):
    obs, state = carry
    k_a, k_s = jax.random.split(k)
    a = jax.random.randint(k_a, (), 0, env.spec.num_actions)
    state, out = env.step(k_s, state, a)
    return (out.obs, state), obs

  return jax.lax.scan(body, (obs, state), jax.random.split(k_run, n))[1]
