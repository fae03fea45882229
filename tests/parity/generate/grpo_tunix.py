"""GRPO fixture: google-tunix's group advantages and GRPO loss.

Runs google/tunix at tag v0.1.7 (the checkout's `tunix` package on the path,
in a venv with `pip install google-tunix==0.1.7`, whose tunix/rl is the
same code; CPU jax):

* `tunix.rl.algo_core.compute_advantages` on 0/1 rewards in groups of 8 (one
  group all equal) and on Gaussian rewards;
* `tunix.rl.algo_core.grpo_loss_fn` (loss and its gradient) with a
  `tunix.rl.grpo.grpo_learner.GRPOConfig`, for the 'sequence-mean-token-mean'
  and 'token-mean' aggregations, on a "model" whose logits are one
  `nnx.Param` [N, P + T, V] (drawn here; it ignores its inputs), so the
  gradient is with respect to the logits and covers tunix's own
  `common.compute_per_token_logps` (the completion slice and the log-softmax).
  Old and reference log-probabilities are tunix's log-probabilities plus
  noise (the clip is active on some tokens), k3 KL ('low_var_kl'), beta
  0.04, epsilon 0.2, completions padded (pad 0) after their answer.
* The same at temperature 0.7 (tunix divides the logits by it); with one
  completion all padding (an empty row); with one log-ratio of 25 and a
  negative advantage (tunix clips log-ratios to +-20); and with the
  config's default KL mode ('kl', the k1 estimator).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

SEED = 1707
G = 8
N, P, T, V = 8, 5, 4, 16
BETA, EPS = 0.04, 0.2
AGGS = ('sequence-mean-token-mean', 'token-mean')


def main():
  args = _common.cli(__doc__)
  _common.add_path(args.ref)
  import os
  os.environ.setdefault('JAX_PLATFORMS', 'cpu')
  import jax.numpy as jnp
  from flax import nnx
  from tunix.rl import algo_core
  from tunix.rl import common
  from tunix.rl.grpo import grpo_learner
  assert Path(algo_core.__file__).resolve().is_relative_to(
      args.ref.resolve()), algo_core.__file__

  rng = np.random.default_rng(SEED)
  out = {}
  r01 = rng.integers(0, 2, 8 * G).astype(np.float32)
  r01[:G] = 1.0                     # one all-equal group
  rnorm = rng.normal(size=4 * G).astype(np.float32)
  for name, r in (('r01', r01), ('rnorm', rnorm)):
    out[f'rewards_{name}'] = r
    out[f'adv_{name}'] = np.asarray(algo_core.compute_advantages(r, G))

  class Logits(nnx.Module):
    """Logits as a parameter: the model's output whatever its input."""

    def __init__(self, logits):
      self.logits = nnx.Param(jnp.asarray(logits))

    def __call__(self, tokens, positions=None, cache=None,
                 attention_mask=None, **kwargs):
      del tokens, positions, cache, attention_mask, kwargs
      return self.logits[...], None

  logits = (1.5 * rng.normal(size=(N, P + T, V))).astype(np.float32)
  prompts = rng.integers(3, V, (N, P)).astype(np.int32)
  comp = rng.integers(3, V, (N, T)).astype(np.int32)
  comp[0, 2:] = 0
  comp[3, 1:] = 0                   # padding after the answer
  mask = (comp != 0).astype(np.float32)
  model = Logits(logits)
  logp = np.asarray(common.compute_per_token_logps(
      *nnx.split(model), prompt_tokens=jnp.asarray(prompts),
      completion_tokens=jnp.asarray(comp), pad_id=0, eos_id=2))
  old = (logp + 0.2 * rng.normal(size=(N, T))).astype(np.float32)
  ref = (logp + 0.3 * rng.normal(size=(N, T))).astype(np.float32)
  adv = rng.normal(size=N).astype(np.float32)
  out.update(logits=logits, prompts=prompts, comp=comp, mask=mask,
             logp=logp, old=old, ref=ref, adv=adv)

  def run(tag, agg, comp_=comp, mask_=mask, old_=old, temperature=1.0,
          **cfg_kw):
    cfg = grpo_learner.GRPOConfig(
        num_generations=G, beta=BETA, epsilon=EPS, loss_agg_mode=agg,
        **({'kl_loss_mode': 'low_var_kl'} | cfg_kw))
    cfg.temperature = temperature     # as GRPOLearner sets it (rollout's)
    example = common.TrainExample(
        prompt_ids=jnp.asarray(prompts),
        prompt_mask=jnp.asarray(prompts != 0),
        completion_ids=jnp.asarray(comp_), completion_mask=jnp.asarray(mask_),
        advantages=jnp.asarray(adv), ref_per_token_logps=jnp.asarray(ref),
        old_per_token_logps=jnp.asarray(old_))
    loss, grad = nnx.value_and_grad(
        lambda m: algo_core.grpo_loss_fn(m, example, cfg, pad_id=0,
                                         eos_id=2)[0])(Logits(logits))
    out[f'{tag}/loss'] = np.float32(loss)
    out[f'{tag}/grad'] = np.asarray(grad['logits'][...])

  for agg in AGGS:
    run(agg, agg)
    run(f'{agg}/temperature', agg, temperature=0.7)
    run(f'{agg}/default_kl', agg, kl_loss_mode=grpo_learner.GRPOConfig(
        num_generations=G).kl_loss_mode)
  out['temperature'] = np.float32(0.7)

  comp_e = comp.copy()
  comp_e[5] = 0                     # an empty completion
  mask_e = (comp_e != 0).astype(np.float32)
  out.update(comp_empty=comp_e, mask_empty=mask_e)
  for agg in AGGS:
    run(f'{agg}/empty_row', agg, comp_=comp_e, mask_=mask_e)

  old_c = old.copy()
  row = int(np.flatnonzero(adv < 0)[0])
  old_c[row, 0] = logp[row, 0] - 25.0   # log-ratio 25 > tunix's clip 20
  out['old_clip'] = old_c
  run('token-mean/log_ratio_25', 'token-mean', old_=old_c)

  _common.write(
      'grpo_tunix', out, args=args, repo='google/tunix',
      files=['tunix/rl/algo_core.py', 'tunix/rl/common.py',
             'tunix/rl/grpo/grpo_learner.py'],
      what=('algo_core.compute_advantages; algo_core.grpo_loss_fn loss and '
            'gradient w.r.t. the logits (sequence-mean-token-mean, '
            'token-mean), also at temperature 0.7, with an empty '
            'completion, a log-ratio of 25, and the default KL mode'),
      packages=('numpy', 'jax', 'flax', 'google-tunix'),
      notes=('tag v0.1.7; tunix imported from the checkout (its tunix/rl '
             'equals PyPI google-tunix 0.1.7)'))


if __name__ == '__main__':
  main()
