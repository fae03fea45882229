"""FGE against its release (oswinso/fge): the priority queue, the explore
selection, the feasibility classifier's loss and the PPO loss with the
release's bounded value head, on the fixture `generate/fge.py` wrote by
running the release's code."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from iclrjax.rl import envs as envs_lib
from iclrjax.rl import fge
from iclrjax.rl import networks
from iclrjax.rl import ppo as ppo_lib
from iclrjax.rl import rollout as ro
from tests.parity import common

PAPER = 'FGE: feasibility-guided exploration (arXiv 2602.15817)'
FIXTURE = 'fge'

# float32 arithmetic on O(1) numbers (the sentinels ~1e8 are compared
# exactly: both sides store them as the same float32).
TOL = 1e-5
SCENARIOS = ('s1', 's2', 's3', 's4')
N_COL_MAX, N_PQ_MAX, THRESHOLD = 3, 2, 0.4
Q_COL, LOGP_COL, UNSAFE_COL = 2, 3, 4
GAMMA, LAMBDA, CLIP, ENT_CF = 0.995, 0.95, 0.1, 0.05
VF_COEF = 0.5
# The release's value clamp (-0.1, 1.1) is on the cost-to-go; ours learns
# the reward (-cost) to go, so the same head is (-1.1, 0.1) with the output
# layer negated.
OUR_LIMS = (-1.1, 0.1)


@functools.cache
def _fixture():
  return common.load(FIXTURE)[0]


def _check(quantity, ours, theirs, tol):
  """common.check, but a shape mismatch (e.g. a different number of rows
  entered into the queue) is a failed check rather than an error."""
  if np.shape(ours) != np.shape(theirs):
    return common.Check(quantity + ' (shape differs)', np.inf, tol)
  return common.check(quantity, ours, theirs, tol)


def _queue(theta, prio, cap):
  n, d = theta.shape
  pad = cap - n
  return fge.PriorityQueue(
      jnp.asarray(np.concatenate([theta, np.zeros((pad, d), np.float32)])),
      jnp.asarray(np.concatenate([prio, np.zeros(pad, np.float32)])),
      jnp.arange(cap) < n)


def _filled(q: fge.PriorityQueue):
  m = np.asarray(q.filled)
  return np.asarray(q.theta)[m], np.asarray(q.priority)[m]


def _as_set(theta, prio):
  """Rows with their priority, sorted (ties leave the order to the sort)."""
  rows = np.concatenate([prio[:, None].astype(np.float64), theta], 1)
  return rows[np.lexsort(rows.T[::-1])]


# -- the priority queue ----------------------------------------------------------
def _pq_ours(f):
  """Ours: the three adds (rows padded to 5, masked) and the top 4."""
  q = fge.PriorityQueue.create(6, 3)
  outs = []
  for k in range(3):
    th_in, pr_in = f[f'pq_in{k}_theta'], f[f'pq_in{k}_prio']
    pad = 5 - len(pr_in)
    q = q.add(jnp.concatenate([th_in, jnp.zeros((pad, 3))]),
              jnp.concatenate([pr_in, jnp.zeros(pad)]),
              jnp.arange(5) < len(pr_in))
    outs.append(q)
  return outs, q.top(4)


def _priority_queue_checks(f, ours):
  out = []
  queues, (th_top, ok_top) = ours['pq']
  for k in range(3):
    th, pr = _filled(queues[k])
    want_th, want_pr = f[f'pq_out{k}_theta'], f[f'pq_out{k}_prio']
    out.append(_check(f'queue after add {k}: rows, in order',
                            th, want_th, 0.0))
    out.append(_check(f'queue after add {k}: priorities, in order',
                            pr, want_pr, 0.0))
  out.append(_check('queue top-4 rows', np.asarray(th_top),
                          f['pq_top4_theta'], 0.0))
  out.append(common.Check('queue top-4 all filled',
                          float(not np.all(np.asarray(ok_top))), 0.0))
  return out


# -- explore selection -----------------------------------------------------------
def _explore_inputs(f, s):
  """The release's collide rows (in the order it drew them, padded to
  N_COL_MAX), its queue before, and the environment's draws."""
  cand_rel = f[f'ex_{s}_cand']
  collide = f[f'ex_{s}_collide']
  is_col = np.array([np.any(np.all(r == collide, 1)) for r in cand_rel])
  n_col = int(np.argmin(is_col)) if not is_col.all() else len(is_col)
  col = np.zeros((N_COL_MAX, cand_rel.shape[1]), np.float32)
  col[:n_col] = cand_rel[:n_col]
  queue = _queue(f[f'ex_{s}_queue_in_theta'], f[f'ex_{s}_queue_in_prio'],
                 int(f[f'ex_{s}_queue_cap']))
  return (jnp.asarray(col), jnp.arange(N_COL_MAX) < n_col, queue,
          jnp.asarray(f[f'ex_{s}_env']))


def _explore_ours(col, col_ok, queue, env):
  """Ours on the release's candidates: (cand, ok, from_buf, cost, pick,
  queue out)."""
  cand, ok, from_buf = fge.explore_candidates(col, col_ok, queue, N_PQ_MAX,
                                              env)
  cost = fge.explore_costs(cand[:, LOGP_COL], cand[:, Q_COL],
                           cand[:, UNSAFE_COL] > 0.5, THRESHOLD)
  pick, q_out = fge.explore_pick(cand, cost, ok, from_buf, queue)
  return cand, ok, from_buf, cost, pick, q_out


def _explore(ours, s):
  cand, ok, from_buf, cost, pick, q_out = ours['explore'][s]
  return (np.asarray(cand), np.asarray(ok), np.asarray(from_buf),
          np.asarray(cost), int(pick), q_out)


def _explore_checks(f, ours):
  out = []
  for s in SCENARIOS:
    cand, ok, from_buf, cost, pick, q_out = _explore(ours, s)
    out.append(_check(f'explore {s}: candidates (collide, queue, rho)',
                            cand[ok], f[f'ex_{s}_cand'], 0.0))
    out.append(_check(f'explore {s}: the pick', cand[pick],
                            f[f'ex_{s}_pick'], 0.0))
    queued = (from_buf & ok) | (np.arange(len(cand)) == pick)
    out.append(_check(f'explore {s}: rows entered into the queue',
                            cand[queued], f[f'ex_{s}_queued_theta'], 0.0))
    out.append(_check(f'explore {s}: their costs', cost[queued],
                            f[f'ex_{s}_queued_cost'], 0.0))
    if s == 's2':
      continue  # the release's duplicate: test_deliberate_queue_row_identity
    th, pr = _filled(q_out)
    want_th, want_pr = f[f'ex_{s}_queue_out_theta'], f[f'ex_{s}_queue_out_prio']
    if s == 's1':  # distinct priorities: the order too
      out.append(_check(f'explore {s}: queue out, in order',
                              np.c_[pr, th], np.c_[want_pr, want_th], 0.0))
    else:  # ties at the sentinel: the same rows and priorities
      out.append(_check(f'explore {s}: queue out (as a set)',
                              _as_set(th, pr), _as_set(want_th, want_pr),
                              0.0))
  return out


def _queue_identity_check(f, ours):
  """The release re-ids a picked queue row (`if reset_idx_opt:`), so its
  queue keeps a stale copy beside the updated row; ours updates the row."""
  q_out = _explore(ours, 's2')[-1]
  th, pr = _filled(q_out)
  want_th, want_pr = f['ex_s2_queue_out_theta'], f['ex_s2_queue_out_prio']
  pick_row = f['ex_s2_pick']
  copies = np.all(want_th == pick_row, 1)
  # The stale copy: the pick's row at its old priority (the input queue's).
  old = f['ex_s2_queue_in_prio'][np.all(f['ex_s2_queue_in_theta'] == pick_row,
                                        1)]
  stale = copies & np.isin(want_pr, old)
  diff = common.max_diff(_as_set(th, pr),
                         _as_set(want_th[~stale], want_pr[~stale]))
  if not (copies.sum() == 2 and stale.sum() == 1):
    diff = np.inf
  return common.Check('deliberate: a picked queue row is updated in place '
                      '(the release adds a re-id-ed copy)', diff, 0.0)


# -- the feasibility classifier's loss ------------------------------------------
def _classifier_ours(f):
  g = lambda k: f['clf/' + k]
  params = {'params': {
      'Dense_0': {'kernel': g('MLP_0/Dense_0/kernel'),
                  'bias': g('MLP_0/Dense_0/bias')},
      'Dense_1': {'kernel': g('MLP_0/Dense_1/kernel'),
                  'bias': g('MLP_0/Dense_1/bias')},
      'Dense_2': {'kernel': g('Dense_0/kernel'), 'bias': g('Dense_0/bias')}}}
  net = networks.MLP((8, 8), 1, 'tanh')
  obs = f['clf_obs']
  labels = f['clf_labels'].astype(jnp.float32)
  smooth = f['clf_smooth']

  def loss(p):
    logits = net.apply(p, obs)[..., 0]
    return fge.bce(logits, labels, jnp.ones_like(labels), smooth), logits

  (val, logits), grads = jax.value_and_grad(loss, has_aux=True)(params)
  # The optax-style smoothing (labels to 1/2 by s) is what ours had.
  y_half = labels * (1 - smooth) + 0.5 * smooth
  old = jnp.mean(optax.sigmoid_binary_cross_entropy(logits, y_half))
  return val, logits, grads, old


def _classifier_checks(f, ours):
  val, logits, grads, _ = ours['clf']
  gd = grads['params']
  ours_g = np.concatenate([np.ravel(gd[a][b]) for a, b in (
      ('Dense_0', 'kernel'), ('Dense_0', 'bias'), ('Dense_1', 'kernel'),
      ('Dense_1', 'bias'), ('Dense_2', 'kernel'), ('Dense_2', 'bias'))])
  theirs_g = np.concatenate([np.ravel(f['clf_grad/' + k]) for k in (
      'MLP_0/Dense_0/kernel', 'MLP_0/Dense_0/bias', 'MLP_0/Dense_1/kernel',
      'MLP_0/Dense_1/bias', 'Dense_0/kernel', 'Dense_0/bias')])
  return [
      common.check('classifier logits', logits, f['clf_logits'], TOL),
      common.check('classifier BCE, label smoothing 0.05', val,
                   f['clf_loss'], TOL),
      common.check('classifier BCE gradient', ours_g, theirs_g, TOL),
  ]


# -- PPO ----------------------------------------------------------------------------
def _ppo_config(normalize_adv: bool):
  return ml_collections.ConfigDict(dict(
      hidden=(8, 8), activation='tanh', vf_coef=VF_COEF,
      normalize_adv=normalize_adv, value_lims=OUR_LIMS))


SPEC = envs_lib.EnvSpec('fixture', (5,), True, 3, None, None, 1000)
HP = {'clip_eps': jnp.float32(CLIP), 'ent_coef': jnp.float32(ENT_CF)}
# ours (ActorCritic: critic MLP_0, actor MLP_1) <- the release's path.
_ACTOR = {'Dense_0': 'pol/MLP_0/Dense_0', 'Dense_1': 'pol/MLP_0/Dense_1',
          'Dense_2': 'pol/OutLogit'}
_CRITIC = {'Dense_0': 'val/MLP_0/Dense_0', 'Dense_1': 'val/MLP_0/Dense_1',
           'Dense_2': 'val/Dense_0'}


def _ppo_params(f):
  def layers(m, flip_head):
    return {ours: {k: jnp.asarray(
        (-1.0 if flip_head and ours == 'Dense_2' else 1.0)
        * f[f'{theirs}/{k}']) for k in ('kernel', 'bias')}
            for ours, theirs in m.items()}
  return {'params': {'MLP_0': layers(_CRITIC, True),
                     'MLP_1': layers(_ACTOR, False)}}


def _ppo_grads_flat(grads, f, scale_critic):
  """[ours, theirs] gradients flattened, theirs mapped to our parameters
  (the critic's: x vf_coef / 2 for ours' 1/2-MSE term, head negated)."""
  ours, theirs = [], []
  for mlp, m, pre in (('MLP_1', _ACTOR, 'ppo_pol_grad'),
                      ('MLP_0', _CRITIC, 'ppo_val_grad')):
    for layer, path in m.items():
      for k in ('kernel', 'bias'):
        ours.append(np.ravel(grads['params'][mlp][layer][k]))
        t = f[pre + path[3:] + '/' + k]
        if mlp == 'MLP_0':
          t = t * scale_critic * (-1.0 if layer == 'Dense_2' else 1.0)
        theirs.append(np.ravel(t))
  return np.concatenate(ours), np.concatenate(theirs)


def _ppo_ours(f):
  params = _ppo_params(f)
  apply = ppo_lib.apply_fn(ppo_lib.actor_critic(SPEC, _ppo_config(False)),
                           _ppo_config(False))
  # GAE on our reward convention (reward = -cost), [T, E] as ours lays out.
  tr = lambda x: jnp.swapaxes(x, 0, 1)
  _, v_now = apply(params, tr(f['ppo_obs_now']))
  _, v_next = apply(params, tr(f['ppo_obs_nxt']))
  term, trunc = f['ppo_term'], f['ppo_trunc']
  adv, target = ro.gae(tr(f['ppo_reward']), v_now, v_next,
                       tr(term.astype(jnp.float32)),
                       tr((term | trunc).astype(jnp.float32)), GAMMA, LAMBDA)
  flat = lambda x: jnp.reshape(x, (-1,) + x.shape[2:])
  mb = {'obs': flat(f['ppo_obs_now']), 'action': flat(f['ppo_action']),
        'log_prob': flat(f['ppo_logp_old']),
        'adv': -flat(f['ppo_adv_norm']), 'target': -flat(f['ppo_q_target'])}
  loss_fn = ppo_lib.make_loss_fn(SPEC, _ppo_config(False))
  (_, info), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, mb, HP)
  # Ours normalising per minibatch: each half of the batch, raw advantages.
  loss_norm = ppo_lib.make_loss_fn(SPEC, _ppo_config(True))
  raw = -flat(f['ppo_adv_raw'])
  halves = []
  n = raw.shape[0]
  for sl in (slice(0, n // 2), slice(n // 2, n)):
    half = jax.tree.map(lambda x, sl=sl: x[sl], dict(mb, adv=raw))
    halves.append(loss_norm(params, half, HP)[1])
  return dict(v_now=v_now, adv=adv, target=target, info=info, grads=grads,
              halves=halves)


def _ppo_checks(f, ours):
  r = ours['ppo']
  out = []
  # The bounded head on the same weights: ours is -(the release's value).
  out.append(common.check('value head lo + (hi - lo) sigmoid(v) (mirrored)',
                          r['v_now'], -np.swapaxes(f['ppo_value_now'], 0, 1),
                          TOL))
  # GAE: equal wherever no truncation precedes within the rollout.
  keep = ~_leaked(f)
  out.append(common.check('GAE advantages (no truncation ahead)',
                          r['adv'][keep],
                          -np.swapaxes(f['ppo_adv_raw'], 0, 1)[keep], TOL))
  out.append(common.check('value targets (no truncation ahead)',
                          r['target'][keep],
                          -np.swapaxes(f['ppo_q_target'], 0, 1)[keep], TOL))
  info = r['info']
  pg_theirs = f['ppo_pol_loss'] + ENT_CF * f['ppo_entropy']
  out.append(common.check('clipped surrogate (policy term)',
                          info['loss/policy'], pg_theirs, TOL))
  out.append(common.check('policy entropy', info['entropy'],
                          f['ppo_entropy'], TOL))
  out.append(common.check(
      'value loss, clamped head (deliberate: ours 1/2 MSE x vf_coef in one '
      'joint loss, the release the MSE; compared as 2 x ours)',
      2 * info['loss/value'], f['ppo_v_loss'], TOL))
  ours_g, theirs_g = _ppo_grads_flat(r['grads'], f, VF_COEF / 2)
  out.append(common.check('gradients: actor (policy term), critic (value '
                          'term x vf_coef / 2)', ours_g, theirs_g, TOL))
  for h, half in enumerate(r['halves']):
    theirs = (f[f'ppo_half{h}_pol_loss_minibatch_norm']
              + ENT_CF * f[f'ppo_half{h}_entropy'])
    out.append(common.check(
        f'deliberate: advantages normalised per minibatch, eps 1e-8 (the '
        f'release: per rollout, eps 1e-5): policy term on minibatch {h}',
        half['loss/policy'], theirs, TOL))
  out.append(_gae_truncation_check(f, r))
  return out


def _gae_truncation_check(f, r):
  """Before a truncation at step s the release's advantage carries the
  next episode's: A_t(release) = A_t(ours) + (gamma lam)^(s + 1 - t)
  A_{s+1}, for the steps t <= s with no episode end in between."""
  theirs = -np.swapaxes(f['ppo_adv_raw'], 0, 1)
  leak = _leaked(f)
  trunc = np.swapaxes(f['ppo_trunc'], 0, 1)
  want = np.array(r['adv'], np.float64)
  for t, e in zip(*np.nonzero(leak)):
    s = t + int(np.argmax(trunc[t:, e]))
    want[t, e] += (GAMMA * LAMBDA)**(s + 1 - t) * theirs[s + 1, e]
  diff = common.max_diff(want[leak], theirs[leak]) if leak.any() else np.inf
  return common.Check('deliberate: GAE cut at a truncation (the release runs '
                      'on into the next episode): the carried term exactly',
                      diff, TOL)


def _leaked(f):
  """[T, E]: steps whose release GAE runs across a later truncation in the
  same env (its trace is cut only at termination, `bits/ppo_core.py:245-248`)."""
  trunc = np.swapaxes(f['ppo_trunc'], 0, 1)
  term = np.swapaxes(f['ppo_term'], 0, 1)
  leak = np.zeros_like(trunc)
  for e in range(trunc.shape[1]):
    for t in range(trunc.shape[0]):
      later = np.arange(trunc.shape[0]) >= t
      first_end = np.argmax((trunc[:, e] | term[:, e]) & later)
      leak[t, e] = ((trunc[:, e] | term[:, e]) & later).any() and trunc[
          first_end, e]
  return leak


@functools.cache
def _ours():
  """Everything of ours on the fixture's inputs, as one compiled program."""
  f = _fixture()
  ex_in = {s: _explore_inputs(f, s) for s in SCENARIOS}

  @jax.jit
  def run(f, ex_in):
    return {'pq': _pq_ours(f),
            'explore': {s: _explore_ours(*ex_in[s]) for s in SCENARIOS},
            'clf': _classifier_ours(f), 'ppo': _ppo_ours(f)}

  return jax.tree.map(np.asarray, run(dict(f), ex_in))


def checks() -> list[common.Check]:
  f, ours = _fixture(), _ours()
  return (_priority_queue_checks(f, ours) + _explore_checks(f, ours)
          + [_queue_identity_check(f, ours)] + _classifier_checks(f, ours)
          + _ppo_checks(f, ours))


def test_matches_reference():
  common.assert_checks(checks())


def test_deliberate_queue_row_identity():
  """A picked queue row: the release's `if reset_idx_opt:`
  (`buf_custom.py:552`, true for every id but 0 though its comment means
  -1) gives it a new id, so the queue holds it twice (old and new
  priority); ours keys rows by theta and updates it (`fge.explore_pick`)."""
  c = _queue_identity_check(_fixture(), _ours())
  assert c.ok, c


def test_deliberate_gae_cut_at_truncation():
  """The release's GAE trace runs on across a time-limit cut (`ppo_core.py:
  245-248` passes only ~terminated); ours (`rollout.gae`) cuts it at every
  episode end. Exactly the steps before the truncation differ."""
  f = _fixture()
  r = _ours()['ppo']
  leak = _leaked(f)
  theirs = -np.swapaxes(f['ppo_adv_raw'], 0, 1)
  assert leak.any()
  assert np.all(np.abs(r['adv'] - theirs)[leak] > 1e-3)
  assert common.max_diff(r['adv'][~leak], theirs[~leak]) <= TOL
  c = _gae_truncation_check(f, r)
  assert c.ok, c


def test_deliberate_advantage_normalisation_scope():
  """Ours normalises advantages per minibatch; the release once per
  rollout (`ppo_core.py:268-269`). On a half-batch minibatch the policy
  terms differ (and match the release given within-minibatch advantages,
  checked in test_matches_reference)."""
  f = _fixture()
  r = _ours()['ppo']
  for h, half in enumerate(r['halves']):
    theirs = (f[f'ppo_half{h}_pol_loss_rollout_norm']
              + ENT_CF * f[f'ppo_half{h}_entropy'])
    assert abs(float(half['loss/policy']) - float(theirs)) > 1e-2


def test_label_smoothing_is_the_release_convention():
  """Targets 1 - s / s (`update_fn.py:119-120`); the optax-style
  y (1 - s) + s / 2 ours had before would be off by more than float error."""
  f = _fixture()
  old = _ours()['clf'][3]
  assert abs(float(old) - float(f['clf_loss'])) > 1e-3
