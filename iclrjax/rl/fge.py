"""FGE: feasibility-guided exploration (So, Yu et al., arXiv 2602.15817).

Parameter-robust avoid problems (`rl.reach`): make a policy safe for as many
theta as possible when an unknown part of Theta is infeasible. FGE is an
initial-condition sampler (`rl.curricula.Sampler`) for the PPO core: at every
reset theta is drawn from the four-way mixture of the paper (Alg. 1, as its
code runs it, `src/fge/core/common/reset_buf.py`)

  theta ~ p_base rho + p_explore U(B_explore) + p_predci U(B_predci)
          + p_rehearse U(B_rehearse),                                 (mix)

with empty buffers' mass moved to the next term exactly as the code does
(`mixture_probs`). After every PPO iteration (`ppo_fge.py:131-231`):

1. certificates: every finished episode's theta goes into the on-policy
   buffer with its safe flag; a safe one enters the certified-feasible buffer
   D_f (one safe rollout proves theta in Theta*, so D_f has no false
   positives); an unsafe one enters the collide buffer until seen safe;
2. novelty: a density model of the visited starts is refit: a masked
   autoregressive flow with rational-quadratic spline transformers (flowjax,
   8 layers, width 50, 8 knots on [-4, 4], one full-batch Adam-W step per
   iteration on inputs standardised by a running mean and variance), or, as
   a named cheaper option, an exact Gaussian KDE;
3. the feasibility classifier q_psi(feasible | obs0) is fit by BCE with
   label smoothing on the mixture
     p_mix(f, theta) = alpha p*(f|theta) p_Df(theta)
                       + (1 - alpha) p^pi(f|theta) rho(theta)
   (positives from D_f, on-policy labels from the policy's own rollouts),
   once D_f is non-empty; labels smoothed to 1 - s / s as the release does.
   The release draws min(|D_f|, 512) of its 1024 examples from D_f and
   weighs all alike (`buf_custom.py:867-909`, the default its own comment
   calls incorrect), so its alpha grows to 1/2; here alpha is the config's
   and weighs the two halves (deliberate);
4. the policy-safety classifier P_pi(safe | obs0) is fit on the on-policy
   buffer;
5. explore (`buf_custom.py:407-570`): `explore_candidates` candidates, up to
   `collide_candidates` from the collide buffer, up to `prioq_candidates`
   from the priority queue (its top entries) and the rest from rho, in
   that order (argmin ties go to the first); each costs its log-density,
   or a large constant if q_psi >= threshold, or a smaller one if unsafe at
   t = 0; the argmin (the most novel candidate not predicted feasible)
   enters B_explore (`explore_candidates`, `explore_costs`,
   `explore_pick`). The queue's candidates and the pick enter the priority
   queue with their cost as priority; it keeps its highest-priority entries
   (`prio_q.py:48-63`, the release's ordering);
6. rehearse: from candidates drawn from D_f push argmin P_pi(safe) into
   B_rehearse (the best response over known-feasible theta; training on the
   history of best responses is the paper's FTRL scheme);
7. B_predci, once D_f is non-empty: rejection samples from rho with
   q_psi >= threshold, the shortfall filled from D_f (never a placeholder).

Ablations (`ABLATIONS`): without the feasibility classifier (no filter in
explore, no B_predci), without rehearsal, and explore only (neither).

Scale: the release pushes one explore pick and one rehearsal pick per
iteration of 1024 envs x 30 steps, so an explore pick trains for ~125
episodes. `pick_every = k` pushes both every k-th iteration instead, which
keeps those counts on k times fewer envs (the ratio-preserving CPU set-up,
configs/fge.py `ratio`); k = 1 is the release.

The classifiers train as the release's `CIClassifier` (`bits/classifier.py`:
1024 rows, one epoch of 4 shuffled minibatches): `clf_batch` rows from each
half of the mixture, `clf_steps` epochs of `clf_minibatches` minibatches.

Diagnostics (`fge/diag_*` metrics, cumulative per region of the task):
explore candidates offered, those the feasibility classifier filtered
(q_psi >= threshold), the picks, and the iteration of each region's first
certified theta (-1 until then).

The release declares a "sample each explore pick >= 4 times" rule
(`minsampletimes`) but never reads it (`buf_custom.py:95-101`), so one pick
is pushed per iteration here as there. Everything is a fixed-size array, so
one FGE iteration is a pure function that `core.loop` scans and vmaps.

PPO follows the release (oswinso/fge at feebe5b, `bits/ppo_core.py`;
tests/parity/test_fge.py) through `ppo_config`: 1 epoch, the actor's and the
critic's own Adam-W (4e-4 / 1e-3, weight decay 1e-4 on the critic's
weights, not its biases), the plain MSE, the value head clamped to the
release's (-0.1, 1.1) on cost, advantages normalised once per rollout. It
differs on purpose in one place: GAE is cut at every episode end, where the
release's trace stops only at termination and runs on across a time-limit
cut (`ppo_core.py:245-248`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import ml_collections
import optax

from iclrjax.core import config as cfg_lib
from iclrjax.core import extras
from iclrjax.rl import curricula
from iclrjax.rl import networks
from iclrjax.rl import ppo as ppo_lib
from iclrjax.rl import rollout as ro
from iclrjax.rl.curricula import Ring
from iclrjax.rl.reach import base

DENSITIES = ('flow', 'kde')
# The explore step's cumulative counts per region (`fge/diag_<what>/...`).
DIAGNOSTICS = ('offered', 'offered_rho', 'filtered', 'picked')
DENSITY_INPUTS = ('theta', 'obs0')
# The release's cost sentinels (`buf_custom.py:512-530`): predicted feasible
# costs more than unsafe at t = 0, and both more than any log-density.
COST_PREDICTED_FEASIBLE = 133742069.0
COST_UNSAFE_AT_START = 1337420.0
# method name -> overrides of the `fge` config section.
ABLATIONS = {
    'fge': {},
    'fge_no_classifier': {'use_classifier': False},
    'fge_no_rehearsal': {'use_rehearsal': False},
    'fge_explore_only': {'use_classifier': False, 'use_rehearsal': False},
}


def config_schema(prefix: str = 'fge.') -> dict[str, cfg_lib.Spec]:
  prob = cfg_lib.Float(min=0.0, max=1.0)
  pos_int = cfg_lib.Int(min=1)
  fields = {
      'p_base': prob, 'p_explore': prob, 'p_predci': prob,
      'frac_latest': prob,
      'threshold': cfg_lib.Float(min=0.0, max=1.0, min_inclusive=False,
                                 max_inclusive=False),
      'label_smoothing': cfg_lib.Float(min=0.0, max=1.0, max_inclusive=False),
      'alpha': prob,
      'explore_capacity': pos_int, 'rehearse_capacity': pos_int,
      'certified_capacity': pos_int, 'collide_capacity': pos_int,
      'onpol_capacity': pos_int, 'visited_capacity': pos_int,
      'predci_capacity': pos_int, 'predci_candidates': pos_int,
      'explore_candidates': pos_int,
      'rho_candidates': cfg_lib.Int(min=1, required=False, nullable=True),
      'collide_candidates': cfg_lib.Int(min=0),
      'prioq_capacity': pos_int, 'prioq_candidates': cfg_lib.Int(min=0),
      'rehearse_candidates': pos_int, 'max_episodes': pos_int,
      'density': cfg_lib.Choice(*DENSITIES),
      'density_input': cfg_lib.Choice(*DENSITY_INPUTS),
      'kde_bandwidth': cfg_lib.Float(min=0.0, min_inclusive=False),
      'flow_layers': pos_int, 'flow_width': pos_int, 'flow_knots': pos_int,
      'flow_interval': cfg_lib.Float(min=0.0, min_inclusive=False),
      'flow_lr': cfg_lib.Float(min=0.0, min_inclusive=False),
      'flow_weight_decay': cfg_lib.Float(min=0.0),
      'clf_hidden': cfg_lib.Seq(item=cfg_lib.Int(min=1), min_len=1),
      'clf_lr': cfg_lib.Float(min=0.0, min_inclusive=False),
      'clf_weight_decay': cfg_lib.Float(min=0.0, required=False),
      'clf_batch': pos_int, 'clf_steps': pos_int,
      'clf_minibatches': cfg_lib.Int(min=1, required=False),
      'pick_every': cfg_lib.Int(min=1, required=False),
      'rehearsal_only_frac': cfg_lib.Float(min=0.0, max=1.0, nullable=True),
  }
  return {prefix + k: v for k, v in fields.items()}


def check_config(f: ml_collections.ConfigDict, prefix: str = 'fge.') -> None:
  total = f.p_base + f.p_explore + f.p_predci
  cfg_lib.check(total <= 1.0 + 1e-9, prefix + 'p_base', f.p_base,
                f'p_base + p_explore + p_predci must be <= 1 (the rest is '
                f'p_rehearse), got {total:.3f}')
  n_buf = f.collide_candidates + f.prioq_candidates
  cfg_lib.check(n_buf < f.explore_candidates, prefix + 'collide_candidates',
                f.collide_candidates,
                f'collide_candidates + prioq_candidates must be < '
                f'explore_candidates={f.explore_candidates} (the rest come '
                'from rho)')
  cfg_lib.check(f.prioq_candidates <= f.prioq_capacity,
                prefix + 'prioq_candidates', f.prioq_candidates,
                f'must be <= prioq_capacity={f.prioq_capacity}')
  cfg_lib.check((2 * f.clf_batch) % f.get('clf_minibatches', 1) == 0,
                prefix + 'clf_minibatches', f.get('clf_minibatches', 1),
                f'must divide 2 * clf_batch = {2 * f.clf_batch}')
  for name in ('certified_capacity', 'collide_capacity', 'onpol_capacity',
               'visited_capacity'):
    cfg_lib.check(f[name] >= f.max_episodes, prefix + name, f[name],
                  f'must be >= max_episodes={f.max_episodes}')


def with_ablation(f: ml_collections.ConfigDict, method: str
                  ) -> ml_collections.ConfigDict:
  """The `fge` section with the overrides of `ABLATIONS[method]`."""
  f = ml_collections.ConfigDict(f.to_dict())
  f.update(ABLATIONS[method])
  return f


def _override(c: ml_collections.ConfigDict, section: str,
              overrides: dict[str, Any]) -> ml_collections.ConfigDict:
  for k, v in overrides.items():
    if k not in c:
      raise ValueError(f'{section}.{k}: no such field; the fields are '
                       f'{sorted(c)}')
    c[k] = v
  return c


def ppo_config(**overrides: Any) -> ml_collections.ConfigDict:
  """The PPO section as the FGE release runs it on ToyLevels
  (`scripts/toylevels/run_ppo_fge.py`, `bits/ppo_core.py`): clip 0.1, ent
  1e-3, gamma 0.995, lambda 0.95, 30-step rollouts in 30 minibatches, 1
  epoch, the actor's Adam-W at 4e-4 and the critic's at 1e-3 (weight decay
  1e-4) on the plain MSE (vf_coef 2 x 1/2 MSE), each clipped to norm 1, the
  value head clamped; 128 envs and 64 x 64 networks (the release: 1024,
  256 x 256). Any field replaced by `overrides`."""
  c = ml_collections.ConfigDict(dict(
      num_envs=128, num_steps=30, num_epochs=1, num_minibatches=30,
      gamma=0.995, gae_lambda=0.95, clip_eps=0.1, ent_coef=1e-3, vf_coef=2.0,
      max_grad_norm=1.0, learning_rate=4e-4, value_learning_rate=1e-3,
      value_weight_decay=1e-4, anneal_lr=False,
      hidden=(64, 64), activation='tanh', normalize_obs=False,
      normalize_adv=True, normalize_adv_rollout=True, shuffle=True,
      # (features, kernel, stride) of the CNN on pixel tasks (lander only).
      conv=((16, 8, 4), (32, 4, 2)),
      # The release's value head clamp (-0.1, 1.1) on the cost-to-go is
      # (-1.1, 0.1) on our reward -cost.
      value_lims=(-1.1, 0.1)))
  return _override(c, 'ppo', overrides)


def default_config(**overrides: Any) -> ml_collections.ConfigDict:
  """The `fge` section: the release's ToyLevels settings (mixture 0.02 /
  0.8 / 0.08 / 0.1, threshold 0.4, 256 explore candidates, the spline flow,
  the classifiers' 1024-row updates); any field replaced by `overrides`."""
  c = ml_collections.ConfigDict(dict(
      p_base=0.02, p_explore=0.8, p_predci=0.08, frac_latest=0.2,
      threshold=0.4, label_smoothing=0.05, alpha=0.5,
      explore_capacity=512, rehearse_capacity=1024, certified_capacity=4096,
      collide_capacity=2048, onpol_capacity=4096, visited_capacity=2048,
      predci_capacity=512, predci_candidates=2048,
      # The paper's 256 explore candidates: <= 128 from the collide
      # buffer, <= 64 from the priority queue, the rest from rho.
      explore_candidates=256, collide_candidates=128, prioq_candidates=64,
      prioq_capacity=1024, rehearse_candidates=256, max_episodes=256,
      # Novelty: the code's spline flow (8 layers, width 50, 8 knots on
      # [-4, 4], Adam-W 1e-3 / 1e-4), here on theta's box coordinates (the
      # code fits obs0, a function of theta; `paper` does too).
      density='flow', density_input='theta', kde_bandwidth=0.05,
      flow_layers=8, flow_width=50, flow_knots=8, flow_interval=4.0,
      flow_lr=1e-3, flow_weight_decay=1e-4,
      clf_hidden=(64, 64), clf_lr=1e-3, clf_weight_decay=1e-4,
      # The release's CIClassifier: 1024 rows (512 from each half of the
      # mixture here), one epoch of 4 shuffled minibatches.
      clf_batch=512, clf_steps=1, clf_minibatches=4,
      # One explore and one rehearsal pick every `pick_every` iterations
      # (the release: 1; see `ratio`).
      pick_every=1, rehearsal_only_frac=None,
      use_classifier=True, use_rehearsal=True))
  return _override(c, 'fge', overrides)


class Trained(NamedTuple):
  """`train`'s result: the final state (`curricula.TrainState`: PPO, FGE's
  buffers and classifiers), the per-iteration metrics [num_updates], and
  `safe(thetas [N, d]) -> [N]` bool, the greedy policy kept safe."""

  state: Any
  metrics: dict[str, jax.Array]
  safe: Any


def train(task: base.ReachTask, key: jax.Array, num_updates: int, *,
          ppo: ml_collections.ConfigDict | None = None,
          fge: ml_collections.ConfigDict | None = None,
          eval_every: int | None = None, eval_points: int = 200) -> Trained:
  """Trains PPO on `task` with FGE choosing theta: one `jit`-compiled
  `lax.scan` over `num_updates` iterations. `ppo` and `fge` default to
  `ppo_config()` and `default_config()`; the coverage of `eval_points`
  theta is logged every `eval_every` iterations (default: at the end).

  Example (a user's gymnax environment: Pendulum started at rest at angle
  theta, failing once it leans past 1 rad; its torque can hold it only
  below ~0.4 rad, so part of the box is infeasible):

    ```python
    import gymnax, jax, jax.numpy as jnp
    from iclrjax.rl import fge, ppo, reach

    env, params = gymnax.make('Pendulum-v1')
    task = reach.GymnaxTask(
        env, params, theta_low=[-0.6], theta_high=[0.6],
        initial_state=lambda th: env.reset_env(jax.random.key(0), params)[1]
        .replace(theta=th[0], theta_dot=0.0),
        failed=lambda s: jnp.abs(s.theta) > 1.0, horizon=20)
    out = fge.train(task, jax.random.key(0), num_updates=8,
                    ppo=fge.ppo_config(num_envs=16, num_minibatches=4),
                    fge=fge.default_config(density='kde'))
    print('certified theta:', out.metrics['fge/certified'][-1])
    print('safe:', out.safe(jnp.linspace(-0.6, 0.6, 7)[:, None]))
    ```
  """
  ppo_c = ppo or ppo_config()
  f = fge or default_config()
  ppo_lib.check_config(ppo_c)
  check_config(f)
  c = ml_collections.ConfigDict(dict(
      ppo=ppo_c, eval_every=eval_every or num_updates,
      eval_points=eval_points))
  sampler = fge_sampler(task, f, ppo_c.num_envs, num_updates)
  init, step, evaluate = curricula.make_trainer(task, c, sampler,
                                                num_updates)

  @jax.jit
  def run(k):
    return jax.lax.scan(lambda s, t: step(s, t), init(k),
                        jnp.arange(num_updates))

  state, metrics = run(key)
  safe = lambda thetas: evaluate(
      jax.tree.map(lambda x: x[None], state), jnp.asarray(thetas))[0]
  return Trained(state, metrics, safe)


def mixture_probs(p_base, p_explore, p_predci, n_explore, n_rehearse,
                  n_predci):
  """The code's redistribution when buffers are empty (ResetBuf)."""
  p_predci = jnp.where(n_predci == 0, 0.0, p_predci)
  p_reh = jnp.where(n_rehearse == 0, 0.0, 1.0 - (p_explore + p_base + p_predci))
  p_exp = jnp.where(n_explore == 0, 0.0, 1.0 - (p_base + p_reh + p_predci))
  p_base = 1.0 - (p_reh + p_exp + p_predci)
  return jnp.stack([p_base, p_exp, p_predci, p_reh])


# -- pieces -------------------------------------------------------------------------
def bce(logits: jax.Array, labels: jax.Array, weights: jax.Array,
        smoothing: float) -> jax.Array:
  """Weighted BCE with the release's label smoothing: positives target
  1 - s, negatives s (`src/fge/core/common/update_fn.py:119-120`; the
  optax-style y (1 - s) + s / 2 would halve the configured 0.05)."""
  y = labels * (1.0 - smoothing) + (1.0 - labels) * smoothing
  loss = optax.sigmoid_binary_cross_entropy(logits, y)
  return jnp.sum(loss * weights) / jnp.maximum(jnp.sum(weights), 1e-8)


def kde_log_density(points: jax.Array, centres: jax.Array, mask: jax.Array,
                    bandwidth: float) -> jax.Array:
  """log of the Gaussian KDE (bandwidth h) of the masked centres at points."""
  d = points.shape[-1]
  sq = jnp.sum((points[:, None] - centres[None]) ** 2, axis=-1)
  logk = jnp.where(mask[None], -0.5 * sq / bandwidth**2, -jnp.inf)
  n = jnp.maximum(jnp.sum(mask), 1)
  return (jax.scipy.special.logsumexp(logk, axis=1) - jnp.log(n)
          - 0.5 * d * jnp.log(2 * jnp.pi * bandwidth**2))


class SplineFlow:
  """A masked autoregressive flow with rational-quadratic spline transformers
  (flowjax; the official code's novelty model, `bits/nsf.py`) over
  standardised inputs. The flow's trainable arrays are a pytree (`init`), so
  they live in the scanned, seed-vmapped training state; the structure
  (incl. its random permutations) is fixed once."""

  def __init__(self, dim: int, layers: int, width: int, knots: int,
               interval: float, lr: float, weight_decay: float):
    # Imported here: only the flow needs them, and flowjax is slow to import.
    # pylint: disable=g-import-not-at-top
    paramax = extras.require('paramax', 'rl')
    bijections = extras.require('flowjax.bijections', 'rl')
    distributions = extras.require('flowjax.distributions', 'rl')
    flows = extras.require('flowjax.flows', 'rl')
    losses = extras.require('flowjax.train.losses', 'rl')

    def build(key):
      return flows.masked_autoregressive_flow(
          key, base_dist=distributions.Normal(jnp.zeros(dim)),
          transformer=bijections.RationalQuadraticSpline(
              knots=knots, interval=interval),
          flow_layers=layers, nn_width=width)

    self._partition = lambda flow: eqx.partition(
        flow, eqx.is_inexact_array,
        is_leaf=lambda leaf: isinstance(leaf, paramax.NonTrainable))
    self._build = build
    self._static = self._partition(build(jax.random.key(0)))[1]
    self._unwrap = paramax.unwrap
    self._nll = losses.MaximumLikelihoodLoss()
    self.tx = optax.adamw(lr, eps=1e-5, weight_decay=weight_decay)
    self.dim = dim

  def init(self, key: jax.Array) -> tuple[Any, Any, ro.RunningNorm]:
    params = self._partition(self._build(key))[0]
    return params, self.tx.init(params), ro.RunningNorm.create((self.dim,))

  def fit(self, state, x_NxD: jax.Array):
    """One full-batch step on the NLL of x (after updating the running
    standardisation with x); returns (state, loss)."""
    params, opt, norm = state
    norm = norm.update(x_NxD)
    z = (x_NxD - norm.mean) / jnp.sqrt(norm.var + 1e-8)
    loss, g = jax.value_and_grad(self._nll)(params, self._static, z)
    upd, opt = self.tx.update(g, opt, params)
    return (eqx.apply_updates(params, upd), opt, norm), loss

  def log_prob(self, state, x_NxD: jax.Array) -> jax.Array:
    params, _, norm = state
    z = (x_NxD - norm.mean) / jnp.sqrt(norm.var + 1e-8)
    flow = self._unwrap(eqx.combine(params, self._static))
    return flow.log_prob(z)


def _rank(ok: jax.Array, priority: jax.Array) -> jax.Array:
  """Sort keys: the priority of a valid row (a -inf one clamped to the
  lowest finite value, so it still ranks above every invalid row), -inf
  for the rest."""
  low = jnp.finfo(priority.dtype).min
  return jnp.where(ok, jnp.maximum(priority, low), -jnp.inf)


class PriorityQueue(NamedTuple):
  """Past explore candidates with a priority each (`fge/core/bits/prio_q.py`):
  a row re-added replaces its priority; the highest `capacity` are kept,
  in descending order. Among equal priorities the earlier row comes first
  here; the release's np.argsort (not stable) leaves that order open."""

  theta: jax.Array      # [Q, d]
  priority: jax.Array   # [Q]
  filled: jax.Array     # [Q] bool

  @classmethod
  def create(cls, capacity: int, d: int) -> PriorityQueue:
    return cls(jnp.zeros((capacity, d)), jnp.zeros((capacity,)),
               jnp.zeros((capacity,), bool))

  def top(self, k: int) -> tuple[jax.Array, jax.Array]:
    """The k highest-priority rows [k, d] and whether each is filled."""
    _, idx = jax.lax.top_k(_rank(self.filled, self.priority), k)
    return self.theta[idx], self.filled[idx]

  def add(self, theta: jax.Array, priority: jax.Array, mask: jax.Array
          ) -> PriorityQueue:
    """Adds (or updates) the masked rows; the last copy of a row wins."""
    q = self.theta.shape[0]
    later = jnp.triu(jnp.ones((len(theta),) * 2, bool), k=1)
    same = jnp.all(theta[:, None] == theta[None], -1)
    mask = mask & ~jnp.any(same & later & mask[None], axis=1)
    replaced = jnp.any(jnp.all(self.theta[:, None] == theta[None], -1)
                       & mask[None], axis=1)
    keep = self.filled & ~replaced
    all_theta = jnp.concatenate([self.theta, theta])
    all_prio = jnp.concatenate([self.priority, priority])
    all_ok = jnp.concatenate([keep, mask])
    _, idx = jax.lax.top_k(_rank(all_ok, all_prio), q)
    return PriorityQueue(all_theta[idx], all_prio[idx], all_ok[idx])


def explore_candidates(col_theta: jax.Array, col_ok: jax.Array,
                       prioq: PriorityQueue, n_pq: int, rho_theta: jax.Array,
                       rho_cap: int | None = None
                       ) -> tuple[jax.Array, jax.Array, jax.Array]:
  """The explore candidates in the release's order (`buf_custom.py:407-458`):
  collide-buffer rows, then the queue's top `n_pq`, then draws from rho,
  of which only the first `len(rho) - taken` count (at most `rho_cap`, a
  scale knob: None is the release). Returns (cand, ok, from_buffer) over
  [n_col + n_pq + n_rho] rows; argmin ties go to the first valid row, as
  there."""
  n_rho = rho_theta.shape[0]
  parts, oks = [], []
  if col_theta.shape[0]:
    parts.append(col_theta)
    oks.append(col_ok)
  if n_pq:
    th_pq, ok_pq = prioq.top(n_pq)
    parts.append(th_pq)
    oks.append(ok_pq)
  taken = sum((jnp.sum(o) for o in oks), jnp.zeros((), jnp.int32))
  n_ok = n_rho - taken
  if rho_cap is not None:
    n_ok = jnp.minimum(n_ok, rho_cap)
  ok_rho = jnp.arange(n_rho) < n_ok
  cand = jnp.concatenate(parts + [rho_theta])
  ok = jnp.concatenate(oks + [ok_rho])
  from_buf = jnp.concatenate(
      [jnp.ones((cand.shape[0] - n_rho,), bool), jnp.zeros((n_rho,), bool)])
  return cand, ok, from_buf


def explore_costs(log_density: jax.Array, q: jax.Array,
                  failed_at_start: jax.Array, threshold: float,
                  use_classifier: bool = True) -> jax.Array:
  """Each candidate's cost (`buf_custom.py:524-532`): its log-density, the
  large sentinel where q_psi >= threshold, the smaller one where the state
  is already unsafe. A NaN log-density costs COST_UNSAFE_AT_START / 10 here;
  the release's np.argmin would pick the NaN row (deliberate)."""
  cost = jnp.where(jnp.isnan(log_density), COST_UNSAFE_AT_START / 10,
                   log_density)
  if use_classifier:
    cost = jnp.where(q >= threshold, COST_PREDICTED_FEASIBLE, cost)
  return jnp.where(failed_at_start, COST_UNSAFE_AT_START, cost)


def explore_pick(cand: jax.Array, cost: jax.Array, ok: jax.Array,
                 from_buf: jax.Array, prioq: PriorityQueue,
                 use_queue: bool = True) -> tuple[jax.Array, PriorityQueue]:
  """argmin of the valid costs, and the queue after its candidates and the
  pick are (re-)entered with their cost as priority (`buf_custom.py:
  545-570`). The release gives a picked buffer row a new reset id
  (`if reset_idx_opt:`, line 552, is true for every id but 0, though its
  comment says -1 only), so a picked queue row enters a second time beside its stale
  copy; here a row is its theta and is updated in place (deliberate)."""
  pick = jnp.argmin(jnp.where(ok, cost, jnp.inf))
  if use_queue:
    is_pick = jnp.arange(cand.shape[0]) == pick
    prioq = prioq.add(cand, cost, (from_buf & ok) | is_pick)
  return pick, prioq


class Classifier(NamedTuple):
  params: Any
  opt_state: Any


class FGEState(NamedTuple):
  certified: Ring       # [C, d] D_f: theta seen safe (no false positives)
  collide: Ring         # [C, d] theta seen unsafe
  collide_alive: jax.Array  # [C] not since seen safe
  onpol_theta: Ring     # [C, d]
  onpol_safe: Ring      # [C]
  visited: Ring         # [C, D] density inputs of finished episodes' starts
  explore: Ring
  rehearse: Ring
  predci: jax.Array     # [P, d]
  predci_size: jax.Array
  prioq: PriorityQueue
  density: Any          # the flow's (params, opt_state, norm); () for a KDE
  feas: Classifier      # q_psi(feasible | obs0)
  polsafe: Classifier   # P_pi(safe | obs0)
  key: jax.Array
  diag: jax.Array       # [R, 4] cumulative (offered, of them from rho,
                        # filtered, picked)
  first_cert: jax.Array  # [R] iteration of the first certificate (-1)


def buffer_thetas(s: FGEState) -> dict[str, tuple[jax.Array, jax.Array]]:
  """{buffer: (theta [C, d], filled [C])} of every theta-valued buffer,
  for checks that each holds only points of Theta."""
  return {
      'certified': (s.certified.data, s.certified.filled()),
      'collide': (s.collide.data, s.collide.filled()),
      'onpol': (s.onpol_theta.data, s.onpol_theta.filled()),
      'explore': (s.explore.data, s.explore.filled()),
      'rehearse': (s.rehearse.data, s.rehearse.filled()),
      'predci': (s.predci, jnp.arange(s.predci.shape[0]) < s.predci_size),
      'prioq': (s.prioq.theta, s.prioq.filled),
  }


def _classifier(task: base.ReachTask, f: ml_collections.ConfigDict):
  net = networks.MLP(tuple(f.clf_hidden), 1, 'tanh')
  obs0 = lambda th: base.initial_obs(task, th)
  return net, lambda p, th: net.apply(p, obs0(th))[..., 0]


def feasibility_fn(task: base.ReachTask, f: ml_collections.ConfigDict):
  """(sampler state, theta [N, d]) -> q_psi(feasible | theta) [N]."""
  _, logit = _classifier(task, f)
  return lambda s, th: jax.nn.sigmoid(logit(s.feas.params, th))


def fge_sampler(task: base.ReachTask, f: ml_collections.ConfigDict,
                num_envs: int, num_updates: int) -> curricula.Sampler:
  """FGE as a `curricula.Sampler` (`f` = the `fge` config section)."""
  E, d = num_envs, task.theta_dim
  nominal = jax.vmap(task.sample_nominal)
  clf_net, clf_logit = _classifier(task, f)
  # The release's `get_default_tx`: Adam-W, eps 1e-5, no decay on biases.
  clf_tx = optax.adamw(f.clf_lr, eps=1e-5,
                       weight_decay=f.get('clf_weight_decay', 0.0),
                       mask=ppo_lib.decay_mask)
  to_box = jax.vmap(task.to_box)
  use_clf, use_reh = bool(f.use_classifier), bool(f.use_rehearsal)
  if f.density_input == 'theta':
    density_x, dx = to_box, d
  else:
    density_x = lambda th: base.initial_obs(task, th)
    dx = int(task.feature_dim)
  flow = (SplineFlow(dx, f.flow_layers, f.flow_width, f.flow_knots,
                     f.flow_interval, f.flow_lr, f.flow_weight_decay)
          if f.density == 'flow' else None)
  n_col, n_pq = f.collide_candidates, f.prioq_candidates
  n_rho = f.explore_candidates
  every = int(f.get('pick_every', 1))
  R = len(task.region_names)
  region_of = jax.vmap(task.region_of)
  per_region = lambda th, m: jnp.sum(
      (region_of(th)[:, None] == jnp.arange(R)) & m[:, None], 0)

  def log_density(s: FGEState, th):
    x = density_x(th)
    if flow is not None:
      return flow.log_prob(s.density, x)
    return kde_log_density(x, s.visited.data, s.visited.filled(),
                           f.kde_bandwidth)

  def new_classifier(key):
    params = clf_net.init(key, jnp.zeros((int(task.feature_dim),)))
    return Classifier(params, clf_tx.init(params))

  n_mb = int(f.get('clf_minibatches', 1))

  def fit(clf: Classifier, theta, labels, weights, key
          ) -> tuple[Classifier, Any]:
    """`clf_steps` epochs of `clf_minibatches` shuffled minibatches."""
    def one(carry, mb):
      params, opt = carry
      th, y, w = mb
      loss, g = jax.value_and_grad(lambda p: bce(
          clf_logit(p, th), y, w, f.label_smoothing))(params)
      upd, opt = clf_tx.update(g, opt, params)
      return (optax.apply_updates(params, upd), opt), loss

    def epoch(carry, k):
      perm = (jax.random.permutation(k, theta.shape[0]) if n_mb > 1
              else jnp.arange(theta.shape[0]))
      mbs = jax.tree.map(lambda x: x[perm].reshape(n_mb, -1, *x.shape[1:]),
                         (theta, labels, weights))
      return jax.lax.scan(one, carry, mbs)

    (params, opt), losses = jax.lax.scan(
        epoch, tuple(clf), jax.random.split(key, f.clf_steps))
    return Classifier(params, opt), losses[-1, -1]

  def init(key):
    k1, k2, k3, k4 = jax.random.split(key, 4)
    return FGEState(
        Ring.create(f.certified_capacity, (d,)),
        Ring.create(f.collide_capacity, (d,)),
        jnp.zeros((f.collide_capacity,), bool),
        Ring.create(f.onpol_capacity, (d,)),
        Ring.create(f.onpol_capacity, (), jnp.float32),
        Ring.create(f.visited_capacity, (dx,)),
        Ring.create(f.explore_capacity, (d,)),
        Ring.create(f.rehearse_capacity, (d,)),
        jnp.zeros((f.predci_capacity, d)), jnp.zeros((), jnp.int32),
        PriorityQueue.create(f.prioq_capacity, d),
        flow.init(k4) if flow is not None else (),
        new_classifier(k1), new_classifier(k2), k3,
        jnp.zeros((R, len(DIAGNOSTICS))), jnp.full((R,), -1, jnp.int32))

  def propose(s: FGEState, t):
    key, k_type, k_base, k_exp, k_pred, k_reh, k_lat = jax.random.split(
        s.key, 7)
    p_explore = f.p_explore
    if f.rehearsal_only_frac is not None:
      p_explore = jnp.where(
          t >= int((1.0 - f.rehearsal_only_frac) * num_updates), 0.0,
          p_explore)
    p = mixture_probs(f.p_base, p_explore, f.p_predci, s.explore.size,
                      s.rehearse.size, s.predci_size)
    kind = jax.random.choice(k_type, 4, (E,), p=p)
    idx = jax.random.randint(k_pred, (E,), 0, jnp.maximum(s.predci_size, 1))
    reh = jnp.where((jax.random.uniform(k_lat, (E, 1)) < f.frac_latest),
                    s.rehearse.newest()[None], s.rehearse.sample(k_reh, E))
    cands = jnp.stack([nominal(jax.random.split(k_base, E)),
                       s.explore.sample(k_exp, E), s.predci[idx], reh])
    theta = jnp.take_along_axis(cands, kind[None, :, None], 0)[0]
    return s._replace(key=key), theta, {
        'mix/p_base': p[0], 'mix/p_explore': p[1], 'mix/p_predci': p[2],
        'mix/p_rehearse': p[3]}

  def update(s: FGEState, batch: ro.Batch, ps, t):
    del ps
    t = jnp.asarray(t, jnp.int32)
    (key, k_fc, k_fo, k_po, k_cand, k_col, k_ci, k_pred, k_pf,
     k_vis, k_f1, k_f2) = jax.random.split(s.key, 12)
    ep = curricula.ended_episodes(batch, f.max_episodes)
    # 1. certificates.
    new_cert = curricula.first_occurrence(
        ep.theta, ep.safe) & ~s.certified.contains(ep.theta)
    certified = s.certified.push(ep.theta, new_cert)
    unsafe = ep.valid & ~ep.safe
    new_col = curricula.first_occurrence(
        ep.theta, unsafe) & ~s.collide.contains(
            ep.theta) & ~certified.contains(ep.theta)
    pos = s.collide.count + jnp.cumsum(new_col) - 1
    slot = jnp.where(new_col, pos % s.collide.capacity, s.collide.capacity)
    alive = s.collide_alive.at[slot].set(True, mode='drop')
    collide = s.collide.push(ep.theta, new_col)
    seen_safe = jnp.any(
        jnp.all(collide.data[:, None] == ep.theta[None], -1) & ep.safe[None],
        axis=1)
    alive = alive & ~seen_safe
    onpol_theta = s.onpol_theta.push(ep.theta, ep.valid)
    onpol_safe = s.onpol_safe.push(ep.safe.astype(jnp.float32), ep.valid)
    visited = s.visited.push(density_x(ep.theta), ep.valid)
    has_c = certified.size > 0
    # 2. novelty: one full-batch step of the flow on the visited starts
    # (resampled to the buffer's capacity while it fills).
    density, loss_d = s.density, jnp.zeros(())
    if flow is not None:
      fitted, loss_d = flow.fit(s.density,
                                visited.sample(k_vis, f.visited_capacity))
      density = jax.tree.map(
          lambda new, old: jnp.where(visited.size > 0, new, old), fitted,
          s.density)
    s = s._replace(density=density, visited=visited)
    # 3. feasibility classifier on the alpha-mixture, once D_f is non-empty.
    B = f.clf_batch
    th_c = certified.sample(k_fc, B)
    io = jax.random.randint(k_fo, (B,), 0, jnp.maximum(onpol_theta.size, 1))
    th_o, y_o = onpol_theta.data[io], onpol_safe.data[io]
    has_o = (onpol_theta.size > 0).astype(jnp.float32)
    alpha = jnp.where(has_o > 0, f.alpha, 1.0)
    feas, loss_f = fit(
        s.feas, jnp.concatenate([th_c, th_o]),
        jnp.concatenate([jnp.ones((B,)), y_o]),
        jnp.concatenate([jnp.full((B,), alpha),
                         jnp.full((B,), (1.0 - alpha) * has_o)]), k_f1)
    feas = jax.tree.map(lambda new, old: jnp.where(has_c, new, old), feas,
                        s.feas)
    # 4. policy-safety classifier on the on-policy labels.
    io2 = jax.random.randint(k_po, (2 * B,), 0,
                             jnp.maximum(onpol_theta.size, 1))
    polsafe, loss_p = fit(s.polsafe, onpol_theta.data[io2],
                          onpol_safe.data[io2], jnp.full((2 * B,), has_o),
                          k_f2)
    # 5. explore: the most novel candidate not predicted feasible. Collide
    # candidates (without replacement, once any episode has ended) and the
    # queue's top entries take their slots from the rho candidates.
    th_rho = nominal(jax.random.split(k_cand, n_rho))
    if n_col:
      gumbel = jax.random.gumbel(k_col, alive.shape)
      _, ic = jax.lax.top_k(jnp.where(alive, gumbel, -jnp.inf), n_col)
      col_theta = collide.data[ic]
      col_ok = alive[ic] & (onpol_theta.size > 0)
    else:
      col_theta, col_ok = jnp.zeros((0, d)), jnp.zeros((0,), bool)
    cand, cand_ok, from_buf = explore_candidates(
        col_theta, col_ok, s.prioq, n_pq, th_rho, f.get('rho_candidates'))
    q = jax.nn.sigmoid(clf_logit(feas.params, cand))
    cost = explore_costs(log_density(s, cand), q,
                         jax.vmap(task.failed_at_start)(cand), f.threshold,
                         use_clf)
    pick, prioq = explore_pick(cand, cost, cand_ok, from_buf, s.prioq,
                               bool(n_col or n_pq))
    picking = (t % every) == 0
    if every > 1:
      prioq = jax.tree.map(lambda new, old: jnp.where(picking, new, old),
                           prioq, s.prioq)
    explore = s.explore.push(cand[pick][None], picking[None])
    filtered = cand_ok & (q >= f.threshold) if use_clf else jnp.zeros_like(
        cand_ok)
    is_pick = (jnp.arange(cand.shape[0]) == pick) & picking
    diag = s.diag + jnp.where(picking, jnp.stack(
        [per_region(cand, cand_ok), per_region(cand, cand_ok & ~from_buf),
         per_region(cand, filtered), per_region(cand, is_pick)], 1),
                              0).astype(jnp.float32)
    first_cert = jnp.where((s.first_cert < 0)
                           & (per_region(ep.theta, new_cert) > 0),
                           t.astype(jnp.int32), s.first_cert)
    # 6. rehearse: the worst known-feasible theta under P_pi(safe).
    th_ci = certified.sample(k_ci, f.rehearse_candidates)
    psafe = jax.nn.sigmoid(clf_logit(polsafe.params, th_ci))
    rehearse = s.rehearse
    if use_reh:
      rehearse = rehearse.push(th_ci[jnp.argmin(psafe)][None],
                               (has_c & picking)[None])
    # 7. predicted-feasible buffer: rejection sampling from rho, the
    # shortfall filled from D_f; empty until D_f is non-empty.
    predci, predci_size = s.predci, s.predci_size
    pred_frac = jnp.zeros(())
    if use_clf:
      th_p = nominal(jax.random.split(k_pred, f.predci_candidates))
      pred_ok = jax.nn.sigmoid(clf_logit(feas.params, th_p)) >= f.threshold
      order = jnp.argsort(~pred_ok, stable=True)[:f.predci_capacity]
      keep = pred_ok[order]
      predci = jnp.where(keep[:, None], th_p[order],
                         certified.sample(k_pf, f.predci_capacity))
      predci = jnp.where(has_c, predci, s.predci)
      predci_size = jnp.where(has_c, f.predci_capacity,
                              s.predci_size).astype(jnp.int32)
      pred_frac = jnp.mean(pred_ok.astype(jnp.float32))
    new = FGEState(certified, collide, alive, onpol_theta, onpol_safe,
                   visited, explore, rehearse, predci, predci_size, prioq,
                   density, feas, polsafe, key, diag, first_cert)
    diag_m = {}
    for i, name in enumerate(task.region_names):
      for j, what in enumerate(DIAGNOSTICS):
        diag_m[f'fge/diag_{what}/{name}'] = diag[i, j]
      diag_m[f'fge/diag_first_cert/{name}'] = first_cert[i].astype(
          jnp.float32)
    return new, diag_m | {'fge/certified': certified.size.astype(jnp.float32),
                 'fge/collide': jnp.sum(alive).astype(jnp.float32),
                 'fge/predci_frac': pred_frac,
                 'fge/loss_feas': loss_f, 'fge/loss_polsafe': loss_p,
                 'fge/loss_density': loss_d,
                 'fge/explore_theta': jnp.where(picking, cand[pick][0],
                                                jnp.nan),
                 'fge/explore_cost': jnp.where(picking, cost[pick], jnp.nan),
                 'fge/rehearse_psafe': jnp.min(psafe)}

  return curricula.Sampler(init, propose, update)
