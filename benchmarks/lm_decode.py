"""KV-cached decoding vs full recompute (`iclrjax/lm/sample.py`), and GRPO
advantages against google-tunix's where it installs.

  python -m benchmarks.lm_decode [--lengths=256,1024] [--batch=8]
      [--repeats=5] [--budget_s=60]

(recompute at 1024 tokens and batch 8 takes ~10 min a call on 2 CPU cores:
benchmarks/README.md ran it with --batch=1)

Table 1: tokens per second of `lm.sample.sample` generating `length - 8`
new tokens after an 8-token prompt, greedy, for `--batch` sequences, with
the KV cache (prefill once, `decode_step` per token: O(L) attention per
token) and with `use_cache=False` (the whole buffer through the model every
step: O(L^2) per token). Both are one jitted `lax.scan`, compiled before
timing; the median of `--repeats` calls, tokens/s = batch x new tokens /
median (`benchmarks.timing.median_time`, at least --repeats calls). The two
produce the same tokens (checked, printed).

Table 2: parity with google-tunix 0.1.7 (`pip install -e '.[tunix]'`; it
cannot share an environment with the bench extra: it pins safetensors < 0.8
and diffusers needs >= 0.8): our `grpo.group_advantages` against
`tunix.rl.algo_core.compute_advantages`, and our `grpo.policy_loss` through
`grpo.completion_logprobs` against `algo_core.grpo_loss_fn` (loss and
gradient) on the same model, tokens, advantages and log-probabilities
(`tunix_parity`; tests/lm/test_tunix_parity.py runs it where tunix is
installed). Without tunix the reason is printed.
"""

from __future__ import annotations

from absl import app
from absl import flags
import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import timing
from iclrjax.lm import grpo
from iclrjax.lm import model as lm_model
from iclrjax.lm import sample as lm_sample

_LENGTHS = flags.DEFINE_list('lengths', ['256', '1024'], 'Total lengths.')
_BATCH = flags.DEFINE_integer('batch', 8, 'Sequences decoded together.')
_D_MODEL = flags.DEFINE_integer('d_model', 128, 'Model width.')
_LAYERS = flags.DEFINE_integer('layers', 4, 'Decoder layers.')
_HEADS = flags.DEFINE_integer('heads', 4, 'Attention heads.')
_REPEATS = flags.DEFINE_integer('repeats', 5, 'Timed calls per median.')
_BUDGET_S = flags.DEFINE_float('budget_s', 60.0,
                               'Stop timing a case after this many seconds.')
_PROMPT = 8


def _table_decode() -> None:
  vocab = 64
  print(f'\n[1] Greedy decoding, batch {_BATCH.value}, d_model '
        f'{_D_MODEL.value}, {_LAYERS.value} layers, {_HEADS.value} heads, '
        f'vocab {vocab}, prompt {_PROMPT} tokens, float32')
  print(f'{"length":>8}{"cached tok/s":>14}{"recompute tok/s":>17}'
        f'{"ratio":>9}{"same tokens":>13}{"calls":>8}')
  for L in map(int, _LENGTHS.value):
    cfg = lm_model.Config(vocab_size=vocab, d_model=_D_MODEL.value,
                          num_heads=_HEADS.value, num_layers=_LAYERS.value,
                          d_ff=4 * _D_MODEL.value, max_len=L)
    m = lm_model.Model(cfg)
    params = m.init(jax.random.key(0))
    prompts = jax.random.randint(jax.random.key(1), (_BATCH.value, _PROMPT),
                                 0, vocab)
    T = L - _PROMPT
    run = {c: (lambda c=c: lm_sample.sample(
        m, params, prompts, jax.random.key(2), max_new_tokens=T, greedy=True,
        use_cache=c)) for c in (True, False)}
    out = {c: jax.block_until_ready(f()) for c, f in run.items()}  # compile
    same = bool(np.array_equal(out[True].tokens_NxT, out[False].tokens_NxT))
    secs, calls = {}, {}
    for c, f in run.items():
      secs[c], calls[c] = timing.median_time(
          lambda f=f: jax.block_until_ready(f()), _REPEATS.value,
          _BUDGET_S.value, min_calls=_REPEATS.value, warmup_s=0.0)
    tps = {c: _BATCH.value * T / s for c, s in secs.items()}
    print(f'{L:>8}{tps[True]:>14.0f}{tps[False]:>17.0f}'
          f'{tps[True] / tps[False]:>8.1f}x{str(same):>13}'
          f'{calls[True]:>4}/{calls[False]}')
  print('ratio = cached / recompute tokens per second (median of the timed '
        'calls, compile excluded).')


def tunix_parity(seed: int = 0) -> dict[str, float]:
  """Max |ours - tunix| on the same inputs (raises ImportError without
  google-tunix): group advantages (tunix's eps 1e-6, ddof 1; random 0/1
  rewards with one all-equal group) and the GRPO loss and its gradient
  with respect to the model parameters, for both aggregations, with a
  clip-active old policy and a k3 KL to a reference. Tunix's
  `algo_core.grpo_loss_fn` wants an NNX model: an adapter holds our params
  in one `nnx.Param` and calls our `Model.apply` (prompts unpadded, so
  tunix's positions and padding mask are the causal default we use)."""
  import types  # pylint: disable=g-import-not-at-top
  from flax import nnx  # pylint: disable=g-import-not-at-top
  from tunix.rl import algo_core  # pylint: disable=g-import-not-at-top
  from tunix.rl import common  # pylint: disable=g-import-not-at-top

  rng = np.random.default_rng(seed)
  g = 8
  r = rng.integers(0, 2, 64).astype(np.float32)
  r[:g] = 1.0  # a degenerate group: zero advantages both ways
  out = {'advantages': float(np.max(np.abs(
      np.asarray(algo_core.compute_advantages(r, g))
      - np.asarray(grpo.group_advantages(jnp.asarray(r), g, ddof=1,
                                         eps=1e-6)))))}

  m = lm_model.Model(lm_model.Config(vocab_size=16, d_model=32, num_heads=2,
                                     num_layers=2, d_ff=64, max_len=16))
  params = m.init(jax.random.key(seed))
  n, p_len, t_len = 8, 5, 4
  prompts = jnp.asarray(rng.integers(3, 16, (n, p_len)), jnp.int32)
  comp = jnp.asarray(rng.integers(3, 16, (n, t_len)), jnp.int32)
  comp = comp.at[0, 2:].set(0).at[3, 1:].set(0)  # padding after the answer
  mask = (comp != 0).astype(jnp.float32)
  adv = jnp.asarray(rng.normal(size=n), jnp.float32)
  logp = grpo.completion_logprobs(m, params, prompts, comp)
  ref = logp + 0.3 * jnp.asarray(rng.normal(size=(n, t_len)), jnp.float32)
  old = logp + 0.2 * jnp.asarray(rng.normal(size=(n, t_len)), jnp.float32)
  example = common.TrainExample(
      prompt_ids=prompts, prompt_mask=prompts != 0, completion_ids=comp,
      completion_mask=mask, advantages=adv, ref_per_token_logps=ref,
      old_per_token_logps=old)

  class Adapter(nnx.Module):

    def __init__(self, params):
      self.p = nnx.Param(params)

    def __call__(self, tokens, positions=None, cache=None,
                 attention_mask=None, **kwargs):
      del positions, cache, attention_mask, kwargs
      return m.apply(self.p.get_value(), tokens), None

  for ours_agg, their_agg in (('sequence', 'sequence-mean-token-mean'),
                              ('token', 'token-mean')):
    algo = types.SimpleNamespace(
        beta=0.04, epsilon=0.2, loss_algo='grpo', loss_agg_mode=their_agg,
        temperature=1.0, kl_loss_mode='low_var_kl', kl_clamp_value=None)
    their_loss, their_grad = nnx.value_and_grad(
        lambda mod, algo=algo: algo_core.grpo_loss_fn(
            mod, example, algo, pad_id=0, eos_id=2)[0])(Adapter(params))

    def ours(p, agg=ours_agg):
      lp = grpo.completion_logprobs(m, p, prompts, comp)
      return grpo.policy_loss(lp, old, ref, adv, mask, clip_eps=0.2,
                              kl_beta=0.04, loss_aggregation=agg)[0]

    our_loss, our_grad = jax.value_and_grad(ours)(params)
    tg = jax.tree.leaves(their_grad['p'].get_value())
    out[f'loss/{ours_agg}'] = abs(float(their_loss) - float(our_loss))
    out[f'grad/{ours_agg}'] = max(float(jnp.max(jnp.abs(a - b))) for a, b in
                                  zip(tg, jax.tree.leaves(our_grad)))
    out[f'grad_scale/{ours_agg}'] = max(float(jnp.max(jnp.abs(b)))
                                        for b in jax.tree.leaves(our_grad))
  return out


def _table_tunix() -> None:
  try:
    diffs = tunix_parity()
  except ImportError as e:
    print(f'\n[2] Skipped: google-tunix does not import here ({e}); '
          "pip install -e '.[tunix]' (not beside '.[bench]': tunix 0.1.7 "
          'pins safetensors < 0.8, diffusers needs >= 0.8).')
    return
  print(f'\n[2] GRPO vs tunix {timing.version("google-tunix")} '
        '(algo_core.compute_advantages, grpo_loss_fn), same inputs, '
        'max |ours - tunix|:')
  for k, v in diffs.items():
    print(f'  {k:24s} {v:.2e}')


def main(argv):
  del argv
  print(f'jax {jax.__version__}  backend={jax.default_backend()}  '
        f'cpus={timing.num_cpus()}  repeats={_REPEATS.value}')
  _table_decode()
  _table_tunix()


if __name__ == '__main__':
  app.run(main)
