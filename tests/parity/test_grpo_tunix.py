"""GRPO (iclrjax/lm/grpo.py) against google-tunix v0.1.7 (fixture:
generate/grpo_tunix.py).

Compared on the same inputs: `grpo.group_advantages` (ddof 1, eps 1e-6)
against `algo_core.compute_advantages`; the per-token log-probabilities of
`grpo.completion_logprobs` against tunix's `common.compute_per_token_logps`;
`grpo.policy_loss` ('sequence', 'token') against `algo_core.grpo_loss_fn`
('sequence-mean-token-mean', 'token-mean'): the loss and its gradient with
respect to the logits (a "model" whose output is its parameter), at
temperature 1 and 0.7, with the clip active on some tokens and the k3 KL.

Deliberate differences, each asserted exactly (grpo.py's docstring):
  * advantages: our default eps 1e-4 (tunix 1e-6);
  * tunix clips each log-ratio to [-20, 20] before exp: ours equals it once
    the old log-probability is moved to within 20 nats;
  * 'sequence' with an empty completion: tunix divides by the non-empty
    rows, ours by N (theirs = ours x N / non-empty);
  * tunix's `GRPOConfig` default KL is k1 (log pi - log pi_ref): theirs =
    ours + beta (agg(k1) - agg(k3)).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from iclrjax.lm import grpo
from tests.parity import common

PAPER = ('DeepSeekMath: pushing the limits of mathematical reasoning '
         '(GRPO, arXiv 2402.03300), against google-tunix')
FIXTURE = 'grpo_tunix'
G, BETA, EPS = 8, 0.04, 0.2
AGGS = {'sequence': 'sequence-mean-token-mean', 'token': 'token-mean'}
# float32 both sides (another summation order), relative to the quantity's
# scale: measured max 5e-7 (log-probs of scale 5), 2.4e-7 (advantages),
# 1.5e-7 (losses), 3e-8 (gradients of scale 0.1).
TOL = 1e-5


class _Logits:
  """A stand-in for `lm.model.Model`: its logits are its parameters."""

  def apply(self, params, tokens, mask=None):
    del tokens, mask
    return params


@functools.lru_cache(maxsize=None)
def _fixture():
  return common.load(FIXTURE)[0]


@functools.partial(jax.jit, static_argnames='agg')
def _loss_grad(logits, prompts, comp, mask, old, ref, adv, temperature, agg):
  def loss(lg):
    lp = grpo.completion_logprobs(_Logits(), lg, prompts, comp, temperature)
    return grpo.policy_loss(lp, old, ref, adv, mask, clip_eps=EPS,
                            kl_beta=BETA, loss_aggregation=agg)[0]
  return jax.value_and_grad(loss)(logits)


def _ours(agg, comp='comp', mask='mask', old='old', temperature=1.0):
  a = _fixture()
  return _loss_grad(a['logits'], a['prompts'], a[comp], a[mask], a[old],
                    a['ref'], a['adv'], temperature, agg)


def _scaled(quantity, ours, theirs, tol=TOL):
  """max |diff| against tol x max(0.1, max |theirs|) (the losses' terms and
  the gradients are O(0.1-1))."""
  scale = max(0.1, float(np.max(np.abs(theirs))))
  return common.check(quantity, ours, theirs, tol * scale)


def _agg(x, mask, how):
  """Our aggregation of a per-token quantity (numpy)."""
  if how == 'token':
    return (x * mask).sum() / max(mask.sum(), 1.0)
  return ((x * mask).sum(-1) / np.maximum(mask.sum(-1), 1.0)).mean()


@functools.lru_cache(maxsize=None)
def _results():
  a = _fixture()
  out = {}
  for ours in AGGS:
    out[ours] = _ours(ours)
    out[ours, 'temperature'] = _ours(ours, temperature=float(a['temperature']))
    out[ours, 'empty'] = _ours(ours, 'comp_empty', 'mask_empty')
  out['token', 'clip'] = _ours('token', old='old_clip')
  moved = np.maximum(a['old_clip'], a['logp'] - 20.0)
  out['token', 'moved'] = _loss_grad(
      a['logits'], a['prompts'], a['comp'], a['mask'], moved, a['ref'],
      a['adv'], 1.0, 'token')
  out['logp'] = grpo.completion_logprobs(_Logits(), a['logits'],
                                         a['prompts'], a['comp'])
  return out


def checks() -> list[common.Check]:
  a = _fixture()
  res = _results()
  out = []
  for r in ('r01', 'rnorm'):
    out.append(_scaled(
        f'group advantages ({r}; ddof 1, eps 1e-6)',
        grpo.group_advantages(jnp.asarray(a[f'rewards_{r}']), G, ddof=1,
                              eps=1e-6), a[f'adv_{r}']))
  mask = a['mask'] > 0
  out.append(_scaled('per-token log-probs of the completions (masked)',
                     np.asarray(res['logp'])[mask], a['logp'][mask]))
  for ours, theirs in AGGS.items():
    for tag, key, label in (('', ours, ''),
                            ('/temperature', (ours, 'temperature'),
                             ', temperature 0.7')):
      loss, grad = res[key]
      out.append(_scaled(f'GRPO loss, {theirs}{label}', loss,
                         a[f'{theirs}{tag}/loss']))
      out.append(_scaled(f'GRPO loss gradient w.r.t. the logits, '
                         f'{theirs}{label}', grad, a[f'{theirs}{tag}/grad']))
  loss, grad = res['token', 'empty']
  out.append(_scaled('GRPO loss, token-mean, an empty completion', loss,
                     a['token-mean/empty_row/loss']))
  out.append(_scaled('GRPO loss gradient, token-mean, an empty completion',
                     grad, a['token-mean/empty_row/grad']))
  # deliberate differences
  n = len(a['adv'])
  rows = float((a['mask_empty'].sum(-1) > 0).sum())
  loss, grad = res['sequence', 'empty']
  out.append(_scaled(
      'deliberate: sequence-mean with an empty completion, tunix averages '
      'the non-empty rows: ours x N / non-empty (loss)', loss * n / rows,
      a['sequence-mean-token-mean/empty_row/loss']))
  out.append(_scaled(
      'deliberate: same, gradient', grad * n / rows,
      a['sequence-mean-token-mean/empty_row/grad']))
  theirs = float(a['token-mean/log_ratio_25/loss'])
  out.append(common.Check(
      'deliberate: tunix clips log-ratios to +-20: ours with old moved to '
      'within 20 nats (relative loss)',
      abs(float(res['token', 'moved'][0]) - theirs) / abs(theirs), TOL))
  lp = np.asarray(res['logp'], np.float64)
  for ours, theirs in AGGS.items():
    k1 = _agg(lp - a['ref'], a['mask'], ours)
    k3 = _agg(np.asarray(grpo.k3_kl(res['logp'], a['ref'])), a['mask'], ours)
    out.append(_scaled(
        f'deliberate: tunix GRPOConfig default KL k1, ours k3: ours + beta '
        f'(k1 - k3), {theirs}', float(res[ours][0]) + BETA * (k1 - k3),
        a[f'{theirs}/default_kl/loss']))
  r = a['rewards_r01'].reshape(-1, G)
  std = np.repeat(r.std(-1, ddof=1), G)
  out.append(_scaled(
      'deliberate: advantage eps 1e-4 (tunix 1e-6): ours x (std + 1e-4) / '
      '(std + 1e-6)',
      np.asarray(grpo.group_advantages(jnp.asarray(a['rewards_r01']), G))
      * (std + 1e-4) / (std + 1e-6), a['adv_r01']))
  return out


def test_matches_reference():
  common.assert_checks(checks())


def test_deliberate_differences_are_real():
  """Without the stated adjustments ours and tunix differ (by more than
  float error) where the differences say."""
  a = _fixture()
  res = _results()
  n = len(a['adv'])
  rows = float((a['mask_empty'].sum(-1) > 0).sum())
  assert rows < n
  seq = float(res['sequence', 'empty'][0])
  assert abs(seq - float(a['sequence-mean-token-mean/empty_row/loss'])) > 1e-3
  clip = float(res['token', 'clip'][0])
  theirs = float(a['token-mean/log_ratio_25/loss'])
  assert abs(clip - theirs) / abs(theirs) > 1.0
  for ours, theirs in AGGS.items():
    assert abs(float(res[ours][0])
               - float(a[f'{theirs}/default_kl/loss'])) > 1e-4
  adv = np.asarray(grpo.group_advantages(jnp.asarray(a['rewards_r01']), G))
  assert np.max(np.abs(adv - a['adv_r01'])) > 1e-5
