"""Synthetic language tasks with exact scoring, and a character tokenizer.

Each task is a pure function of a PRNG key returning a `Batch` of fixed
shapes (jit- and scan-friendly): prompts [B, P] (BOS first) and targets
[B, T] (the answer then EOS). A completion scores 1 when its first T tokens
equal the target (the answer, then the stop token), else 0.

  addition   'a+b=' with a, b uniform n-digit numbers (zero padded), answer
             a + b in n + 1 digits (optionally least significant first);
  copy       a random string of letters, then '>', answer the string;
  reverse    the same, answer the string reversed;
  retrieval  k distinct keys (strings of key_len letters) with one digit
             each ('a3c7b1'), then '?' and one of the keys, answer its
             digit.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

PAD, BOS, EOS = 0, 1, 2
SPECIAL = ('_', '^', '$')          # how PAD, BOS, EOS print
ALPHABET = '0123456789+=>?abcdefghijklmnopqrstuvwxyz'
TASKS = ('addition', 'copy', 'reverse', 'retrieval')


@dataclasses.dataclass(frozen=True)
class CharTokenizer:
  """PAD=0, BOS=1, EOS=2, then one id per character of `alphabet`."""
  alphabet: str = ALPHABET

  @property
  def vocab_size(self) -> int:
    return len(SPECIAL) + len(self.alphabet)

  def id(self, ch: str) -> int:
    i = self.alphabet.find(ch)
    if i < 0:
      raise ValueError(f'CharTokenizer: {ch!r} is not in the alphabet '
                       f'{self.alphabet!r}')
    return i + len(SPECIAL)

  def encode(self, text: str, bos: bool = False, eos: bool = False
             ) -> np.ndarray:
    ids = [self.id(c) for c in text]
    return np.asarray(([BOS] if bos else []) + ids + ([EOS] if eos else []),
                      np.int32)

  def decode(self, ids, stop_at_eos: bool = True) -> str:
    out = []
    for i in np.asarray(ids).tolist():
      if i == EOS and stop_at_eos:
        break
      if i in (PAD, BOS):
        continue
      out.append(SPECIAL[i] if i < len(SPECIAL)
                 else self.alphabet[i - len(SPECIAL)])
    return ''.join(out)


TOKENIZER = CharTokenizer()


class Batch(NamedTuple):
  prompt_BxP: jax.Array
  target_BxT: jax.Array


def _tok(ch: str) -> int:
  return TOKENIZER.id(ch)


def _digits(x_B: jax.Array, n: int) -> jax.Array:
  """Most significant first, zero padded to n: [B, n] token ids."""
  powers = 10 ** jnp.arange(n - 1, -1, -1)
  return (x_B[:, None] // powers) % 10 + _tok('0')


def _col(value: int, B: int) -> jax.Array:
  return jnp.full((B, 1), value, jnp.int32)


def addition(key: jax.Array, batch: int, num_digits: int = 3,
             reverse_answer: bool = False) -> Batch:
  """'^aaa+bbb=' -> (a + b in num_digits + 1 digits) '$'."""
  ka, kb = jax.random.split(key)
  hi = 10 ** num_digits
  a = jax.random.randint(ka, (batch,), 0, hi)
  b = jax.random.randint(kb, (batch,), 0, hi)
  ans = _digits(a + b, num_digits + 1)
  if reverse_answer:
    ans = ans[:, ::-1]
  prompt = jnp.concatenate([_col(BOS, batch), _digits(a, num_digits),
                            _col(_tok('+'), batch), _digits(b, num_digits),
                            _col(_tok('='), batch)], 1)
  return Batch(prompt.astype(jnp.int32),
               jnp.concatenate([ans, _col(EOS, batch)], 1).astype(jnp.int32))


def _letters(key, shape):
  return jax.random.randint(key, shape, _tok('a'), _tok('z') + 1)


def copy(key: jax.Array, batch: int, length: int = 6) -> Batch:
  """'^s>' -> s '$' for a random letter string s."""
  s = _letters(key, (batch, length))
  prompt = jnp.concatenate([_col(BOS, batch), s, _col(_tok('>'), batch)], 1)
  return Batch(prompt.astype(jnp.int32),
               jnp.concatenate([s, _col(EOS, batch)], 1).astype(jnp.int32))


def reverse(key: jax.Array, batch: int, length: int = 6) -> Batch:
  """'^s>' -> reversed(s) '$'."""
  b = copy(key, batch, length)
  rev = b.target_BxT[:, :-1][:, ::-1]
  return Batch(b.prompt_BxP, jnp.concatenate([rev, _col(EOS, batch)], 1))


def retrieval(key: jax.Array, batch: int, num_pairs: int = 4,
              key_len: int = 1) -> Batch:
  """'^k1v1k2v2..?kq' -> v_q '$' with distinct keys k (strings of key_len
  letters) and values v (digits)."""
  space = 26 ** key_len
  if num_pairs > space:
    raise ValueError(f'retrieval: num_pairs={num_pairs} exceeds the '
                     f'{space} distinct keys of key_len={key_len}: raise '
                     'key_len')
  kk, kv, kq = jax.random.split(key, 3)
  ids = jax.vmap(lambda k: jax.random.permutation(k, space)[:num_pairs])(
      jax.random.split(kk, batch))                        # [B, pairs]
  powers = 26 ** jnp.arange(key_len - 1, -1, -1)
  keys = (ids[..., None] // powers) % 26 + _tok('a')     # [B, pairs, len]
  vals = jax.random.randint(kv, (batch, num_pairs, 1), 0, 10) + _tok('0')
  q = jax.random.randint(kq, (batch,), 0, num_pairs)
  pairs = jnp.concatenate([keys, vals], -1).reshape(batch, -1)
  rows = jnp.arange(batch)
  prompt = jnp.concatenate([_col(BOS, batch), pairs, _col(_tok('?'), batch),
                            keys[rows, q]], 1)
  target = jnp.concatenate([vals[rows, q], _col(EOS, batch)], 1)
  return Batch(prompt.astype(jnp.int32), target.astype(jnp.int32))


def make_task(name: str, **kwargs):
  """key, batch -> Batch for one of TASKS, its size arguments bound."""
  fns = {'addition': addition, 'copy': copy, 'reverse': reverse,
         'retrieval': retrieval}
  if name not in fns:
    raise ValueError(f'task={name!r}: use one of {TASKS}')
  return lambda key, batch: fns[name](key, batch, **kwargs)


def exact_match(tokens_NxT: jax.Array, target_NxT: jax.Array) -> jax.Array:
  """1.0 where the completion starts with the whole target (answer + EOS)."""
  T = target_NxT.shape[1]
  if tokens_NxT.shape[1] < T:
    raise ValueError(f'exact_match: completions of {tokens_NxT.shape[1]} '
                     f'tokens cannot hold targets of {T}: raise '
                     'max_new_tokens')
  return jnp.all(tokens_NxT[:, :T] == target_NxT, -1).astype(jnp.float32)


def sft_sequences(batch: Batch) -> tuple[jax.Array, jax.Array]:
  """Teacher-forcing inputs: prompt + target [B, P + T] and the mask of the
  target positions (what the SFT loss scores)."""
  tokens = jnp.concatenate([batch.prompt_BxP, batch.target_BxT], 1)
  P, T = batch.prompt_BxP.shape[1], batch.target_BxT.shape[1]
  mask = jnp.concatenate([jnp.zeros((P,), bool), jnp.ones((T,), bool)])
  return tokens, jnp.broadcast_to(mask, tokens.shape)
