"""lm/grpo.py against NumPy transcriptions; the equal-rewards control."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from iclrjax.lm import grpo
from iclrjax.lm import model as lm_model
from iclrjax.lm import sample as lm_sample
from iclrjax.lm import tasks


def _np_advantages(r, G, std_normalize, ddof, eps):
  out = np.zeros_like(r, dtype=np.float64)
  for g in range(len(r) // G):
    x = r[g * G:(g + 1) * G].astype(np.float64)
    a = x - x.mean()
    if std_normalize:
      a = a / (np.std(x, ddof=ddof) + eps)
    out[g * G:(g + 1) * G] = a
  return out


@pytest.mark.parametrize('std_normalize,ddof', [(True, 1), (True, 0),
                                                (False, 1)])
def test_group_advantages_match_numpy_including_degenerate_groups(
    std_normalize, ddof):
  rng = np.random.default_rng(0)
  r = rng.integers(0, 2, size=32).astype(np.float32)
  r[:8] = 1.0                      # an all-correct group
  r[8:16] = 0.0                    # an all-wrong group
  r[16:24] = rng.normal(size=8)    # a continuous one
  got = grpo.group_advantages(jnp.asarray(r), 8, std_normalize=std_normalize,
                              ddof=ddof, eps=1e-4)
  want = _np_advantages(r, 8, std_normalize, ddof, 1e-4)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(np.asarray(got)[:16], 0.0)


def test_policy_loss_matches_numpy():
  rng = np.random.default_rng(1)
  N, T = 6, 5
  logp, old, ref = (rng.normal(size=(N, T)) * 0.3 - 1.0 for _ in range(3))
  adv = rng.normal(size=N)
  mask = rng.random((N, T)) < 0.7
  mask[:, 0] = True
  for how in ('sequence', 'token'):
    got, aux = grpo.policy_loss(*(jnp.asarray(x, jnp.float32)
                                  for x in (logp, old, ref, adv)),
                                jnp.asarray(mask), clip_eps=0.2, kl_beta=0.05,
                                loss_aggregation=how)
    ratio = np.exp(logp - old)
    surr = np.minimum(ratio * adv[:, None],
                      np.clip(ratio, 0.8, 1.2) * adv[:, None])
    kl = np.exp(ref - logp) - (ref - logp) - 1
    obj = surr - 0.05 * kl
    if how == 'token':
      want, want_kl = obj[mask].mean(), kl[mask].mean()
    else:
      want = np.mean([obj[i][mask[i]].mean() for i in range(N)])
      want_kl = np.mean([kl[i][mask[i]].mean() for i in range(N)])
    np.testing.assert_allclose(got, -want, rtol=1e-5)
    np.testing.assert_allclose(aux['kl'], want_kl, rtol=1e-5)
  assert (np.exp(ref - logp) - (ref - logp) - 1 >= 0).all()


class _LogitsModel:
  """Stands in for lm_model.Model: its logits are its parameters."""

  def apply(self, params, tokens, mask=None):
    del tokens, mask
    return params


def test_completion_logprobs_score_the_tempered_policy():
  """log softmax(logits / temperature) of each completion token, read from
  the position before it (the distribution `sample` draws from at that
  temperature; tunix's compute_per_token_logps does the same)."""
  rng = np.random.default_rng(3)
  N, P, T, V = 3, 4, 3, 7
  logits = rng.normal(size=(N, P + T, V)).astype(np.float32)
  prompts = rng.integers(0, V, (N, P))
  comp = rng.integers(0, V, (N, T))
  for temp in (1.0, 0.6):
    got = grpo.completion_logprobs(_LogitsModel(), jnp.asarray(logits),
                                   jnp.asarray(prompts), jnp.asarray(comp),
                                   temp)
    z = logits[:, P - 1:P + T - 1].astype(np.float64) / temp
    logz = np.log(np.exp(z).sum(-1))
    want = np.take_along_axis(z, comp[..., None], -1)[..., 0] - logz
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_k3_kl_is_an_unbiased_estimate_of_the_kl():
  """E_{x~pi}[k3] = KL(pi || ref) for categorical pi, ref (closed form)."""
  p = jax.nn.softmax(jnp.asarray([1.0, 0.2, -0.5, 0.3]))
  q = jax.nn.softmax(jnp.asarray([0.1, 0.9, -0.2, 0.0]))
  est = jnp.sum(p * grpo.k3_kl(jnp.log(p), jnp.log(q)))
  np.testing.assert_allclose(est, jnp.sum(p * jnp.log(p / q)), rtol=1e-6)


def test_sft_loss_is_the_masked_cross_entropy():
  cfg = lm_model.Config(vocab_size=tasks.TOKENIZER.vocab_size, d_model=16,
                        num_heads=2, num_layers=1, d_ff=32, max_len=16)
  m = lm_model.Model(cfg)
  params = m.init(jax.random.key(0))
  tokens, mask = tasks.sft_sequences(tasks.addition(jax.random.key(1), 4, 2))
  logp = np.asarray(jax.nn.log_softmax(jax.jit(m.apply)(params, tokens), -1))
  loss = jax.jit(lambda p, t, k: grpo.sft_loss(m, p, t, k))(params, tokens,
                                                             mask)
  tokens, mask = np.asarray(tokens), np.asarray(mask)
  nll = [-logp[b, i - 1, tokens[b, i]] for b in range(4)
         for i in range(tokens.shape[1]) if mask[b, i]]
  np.testing.assert_allclose(loss, np.mean(nll), rtol=1e-5)


@pytest.fixture(scope='module')
def rl_setup():
  cfg = lm_model.Config(vocab_size=tasks.TOKENIZER.vocab_size, d_model=16,
                        num_heads=2, num_layers=1, d_ff=32, max_len=16)
  m = lm_model.Model(cfg)
  params = m.init(jax.random.key(0))
  ref = jax.tree.map(lambda x: x + 0.05, params)
  batch = tasks.addition(jax.random.key(1), 4, 2)
  return m, params, ref, batch


def _one_step(rl_setup, reward, kl_beta, ref=None):
  m, params, ref0, batch = rl_setup
  gcfg = grpo.GRPOConfig(num_generations=4, max_new_tokens=4,
                         kl_beta=kl_beta, stop_tokens=(tasks.EOS,))
  opt = optax.sgd(0.1)
  step = _STEPS.setdefault((reward, kl_beta), jax.jit(
      grpo.make_grpo_step(m, opt, reward, gcfg)))   # one compile per pair
  state = grpo.init_state(params, opt)
  new, metrics = step(state, ref0 if ref is None else ref, batch.prompt_BxP,
                      batch.target_BxT, jax.random.key(2))
  return state, new, metrics, gcfg


_STEPS = {}


def _max_change(a, b):
  return max(jax.tree.leaves(jax.tree.map(
      lambda x, y: float(jnp.max(jnp.abs(x - y))), a, b)))


def _const(p, t, m, info):
  del p, m, info
  return jnp.ones(t.shape[0])


def test_equal_rewards_leave_parameters_unchanged_but_for_the_kl(rl_setup):
  m, params, ref, batch = rl_setup
  # The reference is the policy itself: the KL's gradient is 0 there too.
  state, new, _, _ = _one_step(rl_setup, _const, 0.5, ref=params)
  assert _max_change(state.params, new.params) == 0.0
  # Another reference: the update is exactly a step on beta * KL alone.
  state, new, _, gcfg = _one_step(rl_setup, _const, 0.5)
  s = lm_sample.sample(m, params, batch.prompt_BxP, jax.random.key(2),
                       max_new_tokens=4, num_samples=4,
                       stop_tokens=(tasks.EOS,))
  prompts = jnp.repeat(batch.prompt_BxP, 4, 0)

  def kl_loss(p):
    ref_lp = grpo.completion_logprobs(m, ref, prompts, s.tokens_NxT)
    lp = grpo.completion_logprobs(m, p, prompts, s.tokens_NxT)
    k = grpo.k3_kl(lp, ref_lp) * s.mask_NxT
    return 0.5 * jnp.mean(k.sum(-1) / jnp.maximum(s.mask_NxT.sum(-1), 1))

  want = jax.tree.map(lambda p, g: p - 0.1 * g, params,
                      jax.jit(jax.grad(kl_loss))(params))
  assert _max_change(new.params, want) < 1e-6
  assert _max_change(new.params, params) > 1e-4


def test_unequal_rewards_move_the_parameters(rl_setup):
  """The control of the test above: a reward that varies does move them."""
  match = lambda p, t, m, target: tasks.exact_match(t, target) + t[:, 0] % 2
  state, new, metrics, _ = _one_step(rl_setup, match, 0.5, ref=rl_setup[1])
  assert _max_change(state.params, new.params) > 1e-4
  assert np.isfinite(float(metrics['loss']))



def test_token_weights_sum_to_each_aggregation_chunk_by_chunk():
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=(8, 5)), jnp.float32)
  mask = jnp.asarray(rng.random((8, 5)) < 0.6).at[:, 0].set(True)
  for how in grpo.AGGREGATIONS:
    w = grpo.token_weights(mask, how)
    whole = grpo.policy_loss(x, x * 0.9, x * 1.1, x[:, 0], mask, clip_eps=0.2,
                             kl_beta=0.3, loss_aggregation=how)
    parts = [grpo.policy_loss(*c, clip_eps=0.2, kl_beta=0.3, weights_NxT=cw)
             for *c, cw in zip(*grpo.microbatches(
                 (x, x * 0.9, x * 1.1, x[:, 0], mask, w), 2))]
    summed = jax.tree.map(lambda *v: sum(v), *parts)
    for a, b in zip(jax.tree.leaves(summed), jax.tree.leaves(whole)):
      np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_microbatched_steps_equal_the_whole_batch(rl_setup):
  """Gradient accumulation over chunks of rows (`micro_batch`) is the
  whole batch's step up to float rounding, for GRPO and for SFT."""
  m, params, ref, batch = rl_setup
  match = lambda p, t, mk, target: tasks.exact_match(t, target) + t[:, 0] % 2
  opt = optax.sgd(0.1)
  outs = {}
  stops = tuple(range(0, tasks.TOKENIZER.vocab_size, 2))  # unequal lengths
  for how, mb in (('sequence', 0), ('token', 0), ('token', 4)):
    # 16 completions: one pass, or 4 chunks of 4
    gcfg = grpo.GRPOConfig(num_generations=4, max_new_tokens=4, kl_beta=0.5,
                           stop_tokens=stops, micro_batch=mb,
                           loss_aggregation=how)
    step = jax.jit(grpo.make_grpo_step(m, opt, match, gcfg))
    outs[how, mb] = step(grpo.init_state(params, opt), ref, batch.prompt_BxP,
                         batch.target_BxT, jax.random.key(2))
  (whole, mw), (chunks, mc) = outs['token', 0], outs['token', 4]
  assert _max_change(whole.params, params) > 1e-4
  assert _max_change(whole.params, chunks.params) < 1e-6
  for k in ('loss', 'kl', 'clip_fraction'):
    np.testing.assert_allclose(mc[k], mw[k], rtol=1e-5, atol=1e-7)
  # The aggregation is honoured on the whole-batch path too.
  assert _max_change(whole.params, outs['sequence', 0][0].params) > 1e-6
  tokens, mask = tasks.sft_sequences(batch)
  (whole, mw), (chunks, mc) = [jax.jit(grpo.make_sft_step(m, opt, mb))(
      grpo.init_state(params, opt), tokens, mask) for mb in (0, 2)]
  assert _max_change(whole.params, chunks.params) < 1e-6
  np.testing.assert_allclose(mc['loss'], mw['loss'], rtol=1e-6)
  with pytest.raises(ValueError, match='micro_batch=3'):
    grpo.microbatches(tokens, 3)
  with pytest.raises(ValueError, match='micro_batch'):
    grpo.GRPOConfig(micro_batch=-1)


def test_chunked_forward_is_the_whole_batch_in_row_order():
  x = jnp.arange(24.0).reshape(12, 2)
  fn = lambda b: (b[0] * 2 + b[1].sum(-1, keepdims=True), b[1][:, 0])
  want = fn((x, x + 1))
  for per_call in (4, 5):   # 5 does not divide 12: padded, then cut
    got = grpo.chunked(fn, (x, x + 1), per_call)
    for g, w in zip(got, want):
      np.testing.assert_array_equal(g, w)
  # With a key: the whole batch draws from it, chunk i from fold_in(key, i).
  key = jax.random.key(0)
  draw = lambda b, k: b + jax.random.uniform(k, b.shape)
  np.testing.assert_array_equal(grpo.chunked(draw, x, 0, key), draw(x, key))
  rows = grpo.chunked(draw, x, 4, key)
  chunk1 = grpo.microbatches(x, 4)[1]
  np.testing.assert_array_equal(grpo.microbatches(rows, 4)[1],
                                draw(chunk1, jax.random.fold_in(key, 1)))
