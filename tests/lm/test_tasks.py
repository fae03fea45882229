"""lm/tasks.py: the tasks' answers are right, decode(encode) round-trips."""

import jax
import numpy as np
import pytest

from iclrjax.lm import tasks

TOK = tasks.TOKENIZER


def test_tokenizer_round_trip_and_errors():
  ids = TOK.encode('12+34=', bos=True, eos=True)
  assert ids[0] == tasks.BOS and ids[-1] == tasks.EOS
  assert TOK.decode(ids) == '12+34='
  assert TOK.vocab_size == 3 + len(tasks.ALPHABET)
  with pytest.raises(ValueError, match='alphabet'):
    TOK.encode('A')


@pytest.mark.parametrize('reverse_answer', [False, True])
def test_addition_answers(reverse_answer):
  b = tasks.addition(jax.random.key(0), 64, 3, reverse_answer)
  assert b.prompt_BxP.shape == (64, 9) and b.target_BxT.shape == (64, 5)
  for p, t in zip(np.asarray(b.prompt_BxP), np.asarray(b.target_BxT)):
    lhs = TOK.decode(p)
    x, y = lhs.rstrip('=').split('+')
    assert len(x) == len(y) == 3
    ans = TOK.decode(t)
    assert t[-1] == tasks.EOS
    assert int(ans[::-1] if reverse_answer else ans) == int(x) + int(y)


def test_copy_reverse_retrieval_answers():
  k = jax.random.key(1)
  for name, check in (('copy', lambda s, a: s == a),
                      ('reverse', lambda s, a: s[::-1] == a)):
    b = jax.jit(tasks.make_task(name, length=5), static_argnums=1)(k, 16)
    for p, t in zip(np.asarray(b.prompt_BxP), np.asarray(b.target_BxT)):
      s = TOK.decode(p)
      assert s.endswith('>') and check(s[:-1], TOK.decode(t))
  retrieval = jax.jit(tasks.retrieval, static_argnums=(1,),
                      static_argnames=('num_pairs', 'key_len'))
  b = retrieval(k, 32, num_pairs=4)
  for p, t in zip(np.asarray(b.prompt_BxP), np.asarray(b.target_BxT)):
    s = TOK.decode(p)
    pairs, q = s.split('?')
    table = dict(zip(pairs[0::2], pairs[1::2]))
    assert len(table) == 4                          # distinct keys
    assert TOK.decode(t) == table[q]
  b = retrieval(k, 8, num_pairs=100, key_len=2)   # > 26 keys
  for p, t in zip(np.asarray(b.prompt_BxP), np.asarray(b.target_BxT)):
    pairs, q = TOK.decode(p).split('?')
    table = {pairs[i:i + 2]: pairs[i + 2] for i in range(0, len(pairs), 3)}
    assert len(table) == 100 and TOK.decode(t) == table[q]
  with pytest.raises(ValueError, match='key_len'):
    tasks.retrieval(k, 2, num_pairs=27)


def test_exact_match_needs_the_whole_target_and_the_stop():
  b = tasks.addition(jax.random.key(2), 3, 2)
  t = np.asarray(b.target_BxT)
  good = np.concatenate([t, np.zeros((3, 2), np.int32)], 1)
  no_stop = good.copy()
  no_stop[:, t.shape[1] - 1] = TOK.id('0')
  wrong = good.copy()
  wrong[0, 0] = TOK.id('9') if t[0, 0] != TOK.id('9') else TOK.id('8')
  np.testing.assert_array_equal(tasks.exact_match(good, t), 1.0)
  np.testing.assert_array_equal(tasks.exact_match(no_stop, t), 0.0)
  np.testing.assert_array_equal(tasks.exact_match(wrong, t), [0, 1, 1])
  with pytest.raises(ValueError, match='max_new_tokens'):
    tasks.exact_match(good[:, :2], t)
  with pytest.raises(ValueError, match='task='):
    tasks.make_task('sort')
