"""Parity fixture for FGE (So, Yu et al., arXiv 2602.15817) from the
release oswinso/fge (JAX).

  python tests/parity/generate/fge.py --ref <checkout of oswinso/fge>

Environment (the release pins Python >= 3.12 and these versions): jax and
jaxlib 0.8.0 (CPU), flax 0.12.0, optax 0.2.6, equinox 0.13.2, numpy 2.2.6,
tfp-nightly[jax] 0.26.0.dev20251113, jax_dataclasses 1.6.2, jaxtyping
0.3.2, einops 0.8.1, attrs, cattrs, loguru, cyclopts, gymnasium 1.1.1, the
release's helper package `og` (oswinso/og at 31b8e51, the commit its
pyproject pins, installed from a local copy with --no-deps) and jax-jumpy
1.0.0 (PyPI) for og's imports. Modules the compared functions never call
(the normalising flow, RND, the collector, plotting, ipdb) are stubbed.

Runs the release's own code on NumPy-drawn inputs:
* `PrioQ.add_or_update` / `get_top_k` (`bits/prio_q.py`): three adds;
* `BufCustom.update_resets_lean` (`algos/buf_custom.py`), its explore half,
  on four constructed states: the environment's draws, the novelty (NSF
  log-prob) and the classifier's probabilities are given per candidate (a
  candidate's state vector carries them: [theta0, theta1, q, logp,
  unsafe]); the CI half is skipped (empty CI buffer);
* `update_bce` (`common/update_fn.py`) on `ScalarValueNet(MLP)`
  (`bits/classifier.py`'s classifier): loss and raw gradients;
* `SumPPO.make_bT_dset` (`bits/ppo_core.py`: GAE on costs, Q targets,
  advantage normalisation), then `SumPPO.update_value` / `update_policy`
  (`update_mse` / `update_policy_ppo`) with the value clamp
  `ValueNet(lims=(-0.1, 1.1))` (`common/ppo_nets.py`): losses and raw
  gradients (gradient clipping off to compare them).
"""

from __future__ import annotations

import dataclasses
import functools as ft
import types

import numpy as np

import _common

ARGS = _common.cli(__doc__)
_common.add_path(ARGS.ref, 'src')


_stub = _common.stub


def _placeholder(name: str):
  return type(name, (), {'Rollout': object})


# Imported by the release's modules but never called by the compared code.
_stub('ipdb')
_stub('matplotlib')
_stub('matplotlib.pyplot', Axes=_placeholder('Axes'),
      Figure=_placeholder('Figure'))
_stub('fge.core.common.merge_cnn', MergeCNN=_placeholder('MergeCNN'))
_stub('fge.core.algos.reset_tracker',
      ResetTracker=_placeholder('ResetTracker'))
_stub('fge.core.bits.collector', Collector=_placeholder('Collector'),
      ResetFn=_placeholder('ResetFn'),
      RolloutOutput=_placeholder('RolloutOutput'))
_stub('fge.core.bits.intrinsic_ppo',
      IntrinsicSumPPO=_placeholder('IntrinsicSumPPO'))
_stub('fge.core.bits.nsf', NSF=_placeholder('NSF'))
_stub('fge.core.bits.rnd', RND=_placeholder('RND'))

# pylint: disable=g-import-not-at-top,wrong-import-position
import jax
import jax.numpy as jnp
import jax.random as jr
from flax import struct
from og.jax_utils import merge01
from og.networks.network_utils import get_act_from_str
from og.train_state import TrainState

from fge.core.algos.buf_custom import BufCustom, BufCustomCfg
from fge.core.bits.ppo_core import SumPPO, SumPPOCfg, SumPPOTrainCfg
from fge.core.bits.ppo_core import SumPPOUpdateData
from fge.core.bits.prio_q import PrioQ
from fge.core.bits.reset_id_provider import ResetIDProvider
from fge.core.common.ppo_nets import MLP, ScalarValueNet, SoftmaxDiscrete
from fge.core.common.ppo_nets import ValueNet
from fge.core.common.update_fn import update_bce

# The release puts its arrays on jax.devices('gpu')[0]; here that is the CPU.
_devices = jax.devices
jax.devices = lambda backend=None: _devices(
    'cpu' if backend == 'gpu' else backend)

OUT: dict[str, np.ndarray] = {}
f32 = np.float32


# -- 1. the priority queue -----------------------------------------------------
def priority_queue():
  rng = np.random.default_rng(11)
  d, cap = 3, 6
  theta_of = rng.normal(size=(20, d)).astype(f32)   # row id -> its state
  adds = [[0, 1, 2, 3, 4], [3, 5, 6, 7], [1, 8, 9, 10, 2]]
  q = PrioQ(cap)
  for k, ids in enumerate(adds):
    ids = np.asarray(ids, np.int32)
    prio = rng.normal(size=len(ids)).astype(f32)
    q.add_or_update(ids, prio, [theta_of[i] for i in ids])
    OUT[f'pq_in{k}_theta'] = theta_of[ids]
    OUT[f'pq_in{k}_prio'] = prio
    OUT[f'pq_out{k}_theta'] = np.stack(q.values)
    OUT[f'pq_out{k}_prio'] = q.priority.copy()
  _, prio_top, vals_top = q.get_top_k(4)
  OUT['pq_top4_theta'] = np.stack(vals_top)
  OUT['pq_top4_prio'] = prio_top.copy()


# -- 2. explore selection (update_resets_lean) ---------------------------------
# A candidate's state is [theta0, theta1, q, logp, unsafe]: the task, the
# classifier and the flow below only read its columns.
Q_COL, LOGP_COL, UNSAFE_COL = 2, 3, 4
N_EXPLORE, N_COL_MAX, N_PQ_MAX = 12, 3, 2


class _Task:
  """The JaxTask methods update_resets_lean calls; a state is its vector."""
  use_ic_obs = False

  def get_minstate(self, x):
    return x

  def from_minstate(self, x):
    return jnp.asarray(x)

  def minstate_to_leaf(self, x):
    return (x,)

  def leaf_to_minstate(self, leaf):
    return leaf[0]

  def get_obs(self, x):
    return x

  def to_icval(self, x):
    return np.asarray(x)[..., :2]

  def is_unsafe_custom(self, x):
    return x[UNSAFE_COL] > 0.5


class _Column(struct.PyTreeNode):
  """The flow's log_prob / the classifier's get_probs: a column of obs."""
  col: int = struct.field(pytree_node=False)

  def log_prob(self, obs):
    return obs[self.col]

  def get_probs(self, obs):
    return obs[self.col]


class _ResetBuf(struct.PyTreeNode):
  """What update_resets_lean reads of its ResetBuf (no CI half here)."""
  id_provider: ResetIDProvider
  p_explore: float = struct.field(pytree_node=False, default=0.8)
  p_base: float = struct.field(pytree_node=False, default=0.02)
  p_predci: float = struct.field(pytree_node=False, default=0.08)


def _row(rng, q, logp, unsafe=0.0):
  th = rng.uniform(-1, 1, size=2)
  return np.array([th[0], th[1], q, logp, unsafe], f32)


def run_explore(name: str, env_x, collide, queue, queue_cap, next_id, seed):
  """One update_resets_lean call (explore half) on a constructed state."""
  buf = object.__new__(BufCustom)
  buf.task = _Task()
  buf.cfg = BufCustomCfg(
      n_sample_colbuf_max=N_COL_MAX, n_sample_prioq_max=N_PQ_MAX,
      n_sample_explore=N_EXPLORE, prioq_capacity=queue_cap,
      pred_ci_thresh=0.4, use_nsf_explore=True)
  buf.in_ci = {i: False for i in collide}
  buf.collide_x0tup = {i: ((x,), x) for i, x in collide.items()}
  buf.prioq = PrioQ(queue_cap)
  if queue:
    buf.prioq.add_or_update(np.array([i for i, _, _ in queue], np.int32),
                            np.array([p for _, p, _ in queue], f32),
                            [(x,) for _, _, x in queue])
  buf.rng = np.random.default_rng(seed)
  buf.sample_iters = 0
  buf.ci_buf = types.SimpleNamespace(size=0)
  buf._buffer = _ResetBuf(ResetIDProvider(jnp.int32(next_id)))  # pylint: disable=protected-access
  # Wiring: the environment's draws are the given rows; the candidates, the
  # costs handed to the queue and the pick are recorded as they pass.
  rec = {}
  buf.sample_from_env_min = lambda it: jnp.asarray(env_x)
  sample_states = buf.sample_states

  def recording_sample_states():
    b_x, b_id = sample_states()
    rec['cand'] = np.array(b_x)
    return b_x, b_id

  buf.sample_states = recording_sample_states
  update_prioq = buf.update_prioq

  def recording_update_prioq(b_id, b_x, b_prio):
    rec['queued_theta'] = np.array(b_x[0])
    rec['queued_cost'] = np.array(b_prio)
    return update_prioq(b_id, b_x, b_prio)

  buf.update_prioq = recording_update_prioq
  buf.add_explore_argmax = lambda st, ic: rec.update(
      pick=np.array(st.state), pick_id=int(st.reset_id))
  buf.update_resets_lean(_Column(LOGP_COL), _Column(Q_COL),
                         _Column(Q_COL))
  OUT[f'ex_{name}_env'] = np.asarray(env_x, f32)
  OUT[f'ex_{name}_queue_in_theta'] = (
      np.stack([x for _, _, x in queue]) if queue else np.zeros((0, 5), f32))
  OUT[f'ex_{name}_queue_in_prio'] = np.array([p for _, p, _ in queue], f32)
  OUT[f'ex_{name}_collide'] = np.stack(list(collide.values()))
  OUT[f'ex_{name}_cand'] = rec['cand']
  OUT[f'ex_{name}_queued_theta'] = rec['queued_theta']
  OUT[f'ex_{name}_queued_cost'] = rec['queued_cost']
  OUT[f'ex_{name}_pick'] = rec['pick']
  OUT[f'ex_{name}_queue_out_theta'] = np.stack(
      [v[0] for v in buf.prioq.values])
  OUT[f'ex_{name}_queue_out_prio'] = buf.prioq.priority.copy()
  OUT[f'ex_{name}_queue_cap'] = np.int32(queue_cap)


def explore_selection():
  rng = np.random.default_rng(22)
  # s1: the pick is a fresh draw from rho; the queue overflows. Buffer rows
  # are not predicted feasible, so every priority is a distinct log-prob.
  env = [_row(rng, rng.uniform(0, 1), rng.uniform(-5, -1)) for _ in range(12)]
  env[4] = _row(rng, 0.1, -9.0)          # the most novel valid draw
  env[10] = _row(rng, 0.1, -20.0)        # more novel, but past n_env
  env[1] = _row(rng, 0.9, -15.0)         # predicted feasible
  env[6] = _row(rng, 0.1, -12.0, 1.0)    # unsafe at t = 0
  collide = {11: _row(rng, 0.2, -3.0), 12: _row(rng, 0.3, -4.5)}
  queue = [(21, 5.0, _row(rng, 0.1, -2.0)), (22, 4.0, _row(rng, 0.2, -3.5)),
           (23, 3.0, _row(rng, 0.3, -1.5)), (24, 2.0, _row(rng, 0.1, -0.5))]
  run_explore('s1', np.stack(env), collide, queue, 6, 100, 1)
  # s2: the pick is the queue's top row (its log-prob the lowest).
  env = [_row(rng, rng.uniform(0, 1), rng.uniform(-5, -1)) for _ in range(12)]
  collide = {31: _row(rng, 0.2, -3.0), 32: _row(rng, 0.1, -2.0),
             33: _row(rng, 0.3, -4.0), 34: _row(rng, 0.1, -1.0)}
  queue = [(41, 7.0, _row(rng, 0.1, -30.0)), (42, 6.0, _row(rng, 0.2, -2.5)),
           (43, 1.0, _row(rng, 0.3, -1.0))]
  run_explore('s2', np.stack(env), collide, queue, 10, 100, 2)
  # s3: every candidate predicted feasible: all tie at the sentinel.
  env = [_row(rng, rng.uniform(0.5, 1), rng.uniform(-5, -1))
         for _ in range(12)]
  collide = {51: _row(rng, 0.8, -3.0), 52: _row(rng, 0.6, -2.0)}
  queue = [(61, 9.0, _row(rng, 0.7, -2.0)), (62, 8.0, _row(rng, 0.9, -3.0))]
  run_explore('s3', np.stack(env), collide, queue, 10, 100, 3)
  # s4: as s3 but two draws are unsafe at t = 0 (the smaller sentinel).
  env = [_row(rng, rng.uniform(0.5, 1), rng.uniform(-5, -1))
         for _ in range(12)]
  env[3][UNSAFE_COL] = 1.0
  env[5][UNSAFE_COL] = 1.0
  collide = {71: _row(rng, 0.8, -3.0)}
  queue = [(81, 9.0, _row(rng, 0.7, -2.0))]
  run_explore('s4', np.stack(env), collide, queue, 10, 100, 4)


# -- 3./4. networks with NumPy weights -----------------------------------------
class _GradState(TrainState):
  """Wiring: apply_gradients keeps the raw gradients as `params` (the loss
  and the gradient are what is compared, not the optimiser step)."""

  def apply_gradients(self, grads, **kwargs):
    return self.replace(params=grads)


def _numpy_params(net_def, obs, rng, prefix):
  """The module's parameter tree with every leaf drawn by NumPy (saved
  under `prefix/<path>`)."""
  tree = net_def.init(jr.PRNGKey(0), obs)['params']
  flat = {}

  def draw(path, leaf):
    key = prefix + '/' + '/'.join(p.key for p in path)
    flat[key] = (0.6 * rng.normal(size=leaf.shape)).astype(f32)
    return jnp.asarray(flat[key])

  tree = jax.tree_util.tree_map_with_path(draw, tree)
  OUT.update(flat)
  return tree


def _flat_grads(tree, prefix):
  jax.tree_util.tree_map_with_path(
      lambda path, g: OUT.__setitem__(
          prefix + '/' + '/'.join(p.key for p in path), np.asarray(g, f32)),
      tree)


OBS_DIM, HIDS, N_ACT = 5, (8, 8), 3


def classifier():
  rng = np.random.default_rng(33)
  n, smooth = 16, 0.05
  obs = rng.normal(size=(n, OBS_DIM)).astype(f32)
  labels = rng.uniform(size=n) < 0.5
  net_def = ScalarValueNet(
      ft.partial(MLP, hid_sizes=HIDS, act=get_act_from_str('tanh')), lims=None)
  params = _numpy_params(net_def, obs[0], rng, 'clf')
  state = _GradState.create(net_def.apply, params, tx=None)
  grads_state, info = update_bce(state, jnp.asarray(obs), jnp.asarray(labels),
                                 name='CIClassify', smooth=smooth)
  OUT['clf_obs'] = obs
  OUT['clf_labels'] = labels
  OUT['clf_smooth'] = f32(smooth)
  OUT['clf_logits'] = np.asarray(jax.vmap(state.apply)(jnp.asarray(obs)))
  OUT['clf_loss'] = np.asarray(info['CIClassify/Loss'])
  _flat_grads(grads_state.params, 'clf_grad')


GAMMA, LAMBDA, CLIP, ENT_CF, LIMS = 0.995, 0.95, 0.1, 0.05, (-0.1, 1.1)


class _ObsTask:
  """The JaxTask methods SumPPO.make_bT_dset calls (array observations)."""

  def leaf_to_obs(self, x):
    return x


def ppo():
  rng = np.random.default_rng(44)
  b, t = 4, 6
  mlp = ft.partial(MLP, act=get_act_from_str('tanh'), hid_sizes=HIDS)
  pol_def = SoftmaxDiscrete(mlp, N_ACT)
  val_def = ValueNet(mlp, 1, lims=LIMS)
  obs_now = rng.normal(size=(b, t, OBS_DIM)).astype(f32)
  obs_nxt = rng.normal(size=(b, t, OBS_DIM)).astype(f32)
  pol_params = _numpy_params(pol_def, obs_now[0, 0], rng, 'pol')
  val_params = _numpy_params(val_def, obs_now[0, 0], rng, 'val')
  policy = _GradState.create(pol_def.apply, pol_params, tx=None)
  vl = _GradState.create(val_def.apply, val_params, tx=None)
  control = rng.integers(0, N_ACT, size=(b, t)).astype(np.int32)
  logp_now = np.asarray(jax.vmap(jax.vmap(
      lambda o, a: policy.apply(o).log_prob(a)))(obs_now, control))
  logp_old = (logp_now + 0.3 * rng.normal(size=(b, t))).astype(f32)
  # Failure (reward -1, terminal) in envs 0 and 2; env 3 is cut by the
  # time limit at t = 2 (truncated, not terminal); env 1 runs on.
  term = np.zeros((b, t), bool)
  trunc = np.zeros((b, t), bool)
  term[0, 2] = term[2, 4] = True
  trunc[3, 2] = True
  rew = -term.astype(f32)
  data = SumPPOUpdateData(obs_now, obs_nxt, control, logp_old, rew, trunc,
                          term)

  def make(normalize_adv):
    train_cfg = SumPPOTrainCfg(
        gae_lambda=LAMBDA, n_batches=1, rollout_T=t, n_update_epochs=1,
        clip_ratio=CLIP, normalize_adv=normalize_adv, clip_grad_pol=None,
        clip_grad_V=None)
    cfg = SumPPOCfg(pol_lr=1e-3, val_lr=1e-3, entropy_cf=ENT_CF,
                    disc_gamma=GAMMA, pol_hids=HIDS, val_hids=HIDS,
                    value_lims=LIMS, train_cfg=train_cfg)
    alg = object.__new__(SumPPO)
    for k, v in dict(update_idx=jnp.int32(0), key_shuffle=jr.PRNGKey(1),
                     key_entropy=jr.PRNGKey(2), policy=policy, Vl=vl,
                     ent_cf_sched=lambda i: ENT_CF,
                     pol_lr_sched=lambda i: 1e-3, task=_ObsTask(),
                     cfg=cfg).items():
      object.__setattr__(alg, k, v)
    return alg

  raw, _ = make(False).make_bT_dset(data)
  alg = make(True)
  bt_batch, _ = alg.make_bT_dset(data)
  batch = jax.tree.map(merge01, bt_batch)
  alg_v, info_v = alg.update_value(batch)
  alg_p, info_p = alg.update_policy(batch)
  OUT.update(ppo_obs_now=obs_now, ppo_obs_nxt=obs_nxt, ppo_action=control,
             ppo_logp_old=logp_old, ppo_reward=rew, ppo_term=term,
             ppo_trunc=trunc)
  OUT['ppo_adv_raw'] = np.asarray(raw.b_Al)          # [b, t], costs
  OUT['ppo_q_target'] = np.asarray(raw.b_Ql)
  OUT['ppo_adv_norm'] = np.asarray(bt_batch.b_Al)
  OUT['ppo_value_now'] = np.asarray(
      jax.vmap(jax.vmap(vl.apply))(obs_now))[..., 0]
  OUT['ppo_v_loss'] = np.asarray(info_v['V/Loss'])
  OUT['ppo_pol_loss'] = np.asarray(info_p['Pol/Loss'])
  OUT['ppo_entropy'] = np.asarray(info_p['Pol/entropy'])
  _flat_grads(alg_v.Vl.params, 'ppo_val_grad')
  _flat_grads(alg_p.policy.params, 'ppo_pol_grad')
  # The same loss on each half of the batch, once with the release's
  # per-rollout normalised advantages and once with the advantages
  # normalised within the half (eps 1e-8, glue): a minibatch of ours.
  n = batch.b_Al.shape[0]
  for h, sl in enumerate((slice(0, n // 2), slice(n // 2, n))):
    half = jax.tree.map(lambda x, sl=sl: x[sl], batch)
    _, info_rollout = alg.update_policy(half)
    a = merge01(raw.b_Al)[sl]
    a = (a - jnp.mean(a)) / (jnp.std(a) + 1e-8)
    _, info_mb = alg.update_policy(half._replace(b_Al=a))
    OUT[f'ppo_half{h}_pol_loss_rollout_norm'] = np.asarray(
        info_rollout['Pol/Loss'])
    OUT[f'ppo_half{h}_pol_loss_minibatch_norm'] = np.asarray(
        info_mb['Pol/Loss'])
    OUT[f'ppo_half{h}_entropy'] = np.asarray(info_mb['Pol/entropy'])


priority_queue()
explore_selection()
classifier()
ppo()
_common.write(
    'fge', OUT, args=ARGS, repo='oswinso/fge',
    files=['src/fge/core/bits/prio_q.py', 'src/fge/core/algos/buf_custom.py',
           'src/fge/core/common/update_fn.py',
           'src/fge/core/bits/classifier.py',
           'src/fge/core/bits/ppo_core.py', 'src/fge/core/bits/gae.py',
           'src/fge/core/common/ppo_nets.py'],
    what=('priority-queue updates; the explore selection of '
          'update_resets_lean on four constructed states (candidates, '
          'queue in/out, pick); the classifier BCE with label smoothing '
          '(loss, gradients); PPO: GAE targets and advantages, the '
          'clamped value loss and the policy loss (losses, gradients)'),
    packages=('numpy', 'jax', 'jaxlib', 'flax', 'optax',
              'tfp-nightly', 'jax_dataclasses', 'og', 'jax-jumpy'),
    notes=('og (oswinso/og) at 31b8e51, the commit the release pins, '
           'installed from a local copy; gradient clipping off (the '
           'release clips each network to norm 1.0) so raw gradients are '
           'compared; jax.devices("gpu") is mapped to the CPU.'))
