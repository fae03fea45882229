"""KV-cached decoding vs full recompute (`iclrjax/lm/sample.py`).

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

GRPO's parity with google-tunix (advantages, loss, gradient) is
tests/parity/test_grpo_tunix.py.
"""

from __future__ import annotations

from absl import app
from absl import flags
import jax
import numpy as np

from benchmarks import timing
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


def main(argv):
  del argv
  print(f'jax {jax.__version__}  backend={jax.default_backend()}  '
        f'cpus={timing.num_cpus()}  repeats={_REPEATS.value}')
  _table_decode()


if __name__ == '__main__':
  app.run(main)
