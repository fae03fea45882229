"""Learned DLM part (issue 9): MDLM loss, ReMDM/revision samplers, languages.

The exact round model's tests are in test_dlm.py; `dlm.propagate_round` is
used here as the independent exact reference for one ReMDM step.
"""

import dataclasses
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclrjax.diffusion import dlm
from iclrjax.diffusion import dlm_learned as dl
from tests.conftest import find_claim as _claim
from tests.conftest import jit_optimized
from tests.conftest import smoke_summary


# -- languages and metrics ---------------------------------------------------------------
def _latin_ok(seq):
  sq = [list(seq[4 * r:4 * r + 4]) for r in range(4)]
  lines = sq + [[sq[r][c] for r in range(4)] for c in range(4)]
  return all(sorted(line) == [0, 1, 2, 3] for line in lines)


def test_binary_languages_against_brute_force():
  every = (np.arange(2 ** 16)[:, None] >> np.arange(15, -1, -1)) & 1
  for lang, k, count in (('onehot', 1, 16), ('exactk', 2, 120)):
    brute = every[every.sum(1) == k]
    got = np.asarray(dl.is_valid(lang, every, k=2))
    np.testing.assert_array_equal(got, every.sum(1) == k)
    strings = dl.language_strings(lang, k=2)
    assert len(strings) == count
    assert {tuple(s) for s in strings} == {tuple(s) for s in brute}
  # A MASK (id V = 2) makes a string invalid even if its ones are right.
  x = np.eye(16, dtype=np.int32)[3]
  x[0] = 2
  assert not bool(dl.is_valid('onehot', x))


def test_latin_squares_against_brute_force():
  sq = dl.latin_squares(4)
  assert sq.shape == (576, 16)             # the known count of 4x4 squares
  assert len({tuple(s) for s in sq}) == 576
  assert all(_latin_ok(s) for s in sq)
  assert bool(np.all(dl.is_valid('latin', sq)))
  rng = np.random.default_rng(0)
  n = 1000
  rand = rng.integers(0, 4, (n, 16))
  swapped = sq[rng.integers(0, 576, n)].copy()  # two cells swapped
  i, j = rng.integers(0, 16, (2, n))
  a = swapped[np.arange(n), i].copy()
  swapped[np.arange(n), i] = swapped[np.arange(n), j]
  swapped[np.arange(n), j] = a
  for x in (rand, swapped):
    np.testing.assert_array_equal(np.asarray(dl.is_valid('latin', x)),
                                  [_latin_ok(s) for s in x])


def test_empirical_tv_hand_values():
  support = np.eye(4, dtype=np.int32)
  # 2 x e0, 1 x e1, 1 invalid: |1/2 - 1/4| + |1/4 - 1/4| + 1/4 + 1/4 = 3/4,
  # plus the invalid mass 1/4, halved: 1/2.
  samples = np.array([[1, 0, 0, 0], [1, 0, 0, 0], [0, 1, 0, 0],
                      [1, 1, 0, 0]])
  assert dl.empirical_tv(samples, support, 2) == pytest.approx(0.5)
  assert dl.empirical_tv(support, support, 2) == pytest.approx(0.0)
  assert 0.0 < dl.tv_floor(16, 512) < 0.1


def test_oracle_logits_match_enumeration():
  sq = dl.latin_squares(4)
  f = dl.oracle_logits_fn(sq, 4)
  rng = np.random.default_rng(1)
  z = sq[rng.integers(0, 576, 20)].copy()
  z[rng.random(z.shape) < 0.6] = 4                     # MASK
  p = np.exp(np.asarray(f(jnp.asarray(z))))
  for n in range(len(z)):
    match = [s for s in sq if all(v == 4 or v == w for v, w in zip(z[n], s))]
    want = np.zeros((16, 4))
    for s in match:
      want[np.arange(16), s] += 1.0 / len(match)
    np.testing.assert_allclose(p[n], want, atol=1e-6)


def test_oracle_off_support_modes():
  # One-hot, n = 16, two visible ones (no string matches): 'nearest' keeps
  # the strings one mismatch away (a 1 at position 0 or 1), so every masked
  # position is 0 for sure; 'uniform' gives up (1/2). On the support both
  # are the exact conditional.
  strings = dl.language_strings('onehot')
  z = np.full((2, 16), 2, np.int32)
  z[0, :2] = 1
  z[1, 5] = 0                                            # on the support
  near = np.exp(np.asarray(dl.oracle_logits_fn(strings, 2)(jnp.asarray(z))))
  uni = np.exp(np.asarray(dl.oracle_logits_fn(strings, 2, 'uniform')(
      jnp.asarray(z))))
  np.testing.assert_allclose(near[0, 2:], np.tile([1.0, 0.0], (14, 1)),
                             atol=1e-6)
  np.testing.assert_allclose(near[0, :2], np.tile([0.5, 0.5], (2, 1)),
                             atol=1e-6)
  np.testing.assert_allclose(uni[0], 0.5, atol=1e-6)
  want = np.tile([14 / 15, 1 / 15], (16, 1))
  want[5] = [1.0, 0.0]
  np.testing.assert_allclose(near[1], want, atol=1e-6)
  np.testing.assert_allclose(uni[1], want, atol=1e-6)
  with pytest.raises(ValueError, match='off_support'):
    dl.oracle_logits_fn(strings, 2, 'soft')


# -- the MDLM loss -------------------------------------------------------------------------
def test_mdlm_loss_matches_numpy():
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(3, 5, 4)).astype(np.float32)
  x0 = rng.integers(0, 4, (3, 5))
  mask = rng.random((3, 5)) < 0.5
  t = np.array([0.3, 0.7, 0.9], np.float32)
  logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  want = [sum(-logp[b, i, x0[b, i]] for i in range(5) if mask[b, i]) / t[b]
          for b in range(3)]
  np.testing.assert_allclose(dl.mdlm_loss(logits, x0, mask, t), want,
                             rtol=1e-5)


@pytest.mark.parametrize('language', ['onehot', 'latin'])
def test_mdlm_nelbo_of_the_exact_denoiser_is_the_entropy(language):
  # With the exact conditionals the MDLM NELBO is tight: E_t (1/t) sum_masked
  # -log p(x^i | z_t) = -log p(x) = log N under the uniform law on N strings
  # (it averages the any-order autoregressive NLL). Checks the 1/t weight,
  # the masking rate 1 - alpha_t = t and `corrupt` together.
  strings = dl.language_strings(language)
  V = dl.vocab_size(language)
  f = dl.oracle_logits_fn(strings, V)
  x0 = jnp.asarray(strings[np.arange(8192) % len(strings)])
  z, mask, t = dl.corrupt(jax.random.key(0), x0, V, 1e-3)
  np.testing.assert_allclose(float(jnp.mean(mask)), 0.5 * (1 + 1e-3),
                             atol=0.01)
  loss = np.asarray(dl.mdlm_loss(f(z), x0, mask, t))
  se = loss.std() / math.sqrt(len(loss))
  assert abs(loss.mean() - math.log(len(strings))) < 4 * se + 1e-3, (
      loss.mean(), se)
  if language == 'onehot':   # and `nelbo`'s count form, over all strings
    m, se = dl.nelbo(f, jnp.asarray(strings), V, jax.random.key(1), reps=256)
    assert abs(float(m) - math.log(len(strings))) < 4 * float(se) + 1e-3


def test_count_form_is_the_same_nelbo():
  # corrupt(count=True) (m ~ U{1..L} masked, weight L/m) estimates the same
  # NELBO as the continuous t ~ U(0,1) form for any denoiser of z alone:
  # a fixed random linear denoiser of one-hot(z) on Latin squares (a long way
  # from the data, so the NELBO is large and any weighting error shows).
  strings = dl.language_strings('latin')
  V, L = 4, 16
  w = jax.random.normal(jax.random.key(0), (L * (V + 1), L * V)) * 0.3

  def f(z):
    h = jax.nn.one_hot(z, V + 1).reshape(z.shape[0], -1)
    return (h @ w).reshape(z.shape[0], L, V)

  x = jnp.asarray(strings)
  cnt, se_c = dl.nelbo(f, x, V, jax.random.key(1), reps=64, count=True)
  cont, se_t = dl.nelbo(f, x, V, jax.random.key(2), reps=64, t_min=1e-5,
                        count=False)
  assert abs(float(cnt) - float(cont)) < 4 * float(
      jnp.hypot(se_c, se_t)), (cnt, cont, se_c, se_t)
  assert float(se_c) < float(se_t)                      # less variance
  z, mask, t = dl.corrupt(jax.random.key(3), x[:64], V, 1e-3, count=True)
  np.testing.assert_array_equal(mask.sum(-1), np.round(t * L))
  np.testing.assert_array_equal(np.sort(np.asarray(mask.sum(-1)))[::4],
                                np.arange(1, L + 1))    # stratified m
  assert bool(jnp.all((z == V) == mask))


# -- one sampling step ----------------------------------------------------------------------
def _trans_np(states, probs, sig, a_t, a_s, sigma, V):
  z = np.where(states == dlm.MASK, V, states)
  tr = np.asarray(dl.step_trans(jnp.asarray(z), jnp.asarray(probs),
                                jnp.asarray(sig), a_t, a_s, sigma), np.float64)
  tr[tr < 1e-7] = 0.0          # float32 round-off of exact zeros
  return tr / tr.sum(-1, keepdims=True)


def test_step_trans_hand_values():
  # V = 2, alpha 0.4 -> 0.7, sigma 0.2: masked -> token w.p.
  # (0.7 - 0.8 * 0.4) / 0.6 = 19/30; decoded -> MASK w.p. 0.2.
  probs = jnp.asarray([[[0.25, 0.75], [0.5, 0.5]]])
  tr = np.asarray(dl.step_trans(jnp.asarray([[2, 1]]), probs,
                                jnp.asarray([[0.0, 0.2]]), 0.4, 0.7, 0.2))
  u = 19 / 30
  np.testing.assert_allclose(tr[0, 0], [0.25 * u, 0.75 * u, 1 - u], atol=1e-6)
  np.testing.assert_allclose(tr[0, 1], [0.0, 0.8, 0.2], atol=1e-6)
  assert float(dl.sigma_max(0.4, 0.7)) == pytest.approx(0.75)
  assert float(dl.sigma_max(0.2, 0.7)) == pytest.approx(1.0)


@pytest.mark.parametrize('frac', [0.0, 0.5, 1.0])
def test_remdm_step_preserves_the_forward_marginals_exactly(frac):
  # ReMDM's reverse step with the clean x in place of x_theta: starting from
  # all MASK and propagating the exact law (dlm.propagate_round, 'remask'
  # mode), after every step each position is MASK w.p. 1 - alpha_s and x
  # otherwise, independently -- for any sigma <= sigma_max (frac of it).
  x0 = np.array([1, 0, 1])
  V, L = 2, 3
  probs = np.eye(V)[x0][None]                          # [1, L, V]
  alphas = [0.0, 0.3, 0.5, 0.5, 0.5, 0.8, 1.0]          # a held loop, too
  dist = dlm.all_masked(L)
  for a_t, a_s in zip(alphas[:-1], alphas[1:]):
    sigma = frac * float(dl.sigma_max(a_t, a_s)) if a_t > 0 else 0.0
    S = len(dist.probs)
    tr = _trans_np(dist.states, np.repeat(probs, S, 0),
                   np.full((S, L), sigma), a_t, a_s, sigma, V)
    dist = dlm.propagate_round(dist, tr, 'remask')
    want = dlm.make_dist(
        np.array([[x if keep else dlm.MASK for x, keep in zip(x0, ks)]
                  for ks in itertools.product([0, 1], repeat=L)]),
        np.array([np.prod([a_s if k else 1 - a_s for k in ks])
                  for ks in itertools.product([0, 1], repeat=L)]))
    assert dlm.tv(dist, want) < 1e-6, (a_t, a_s, sigma, dist.to_dict())


def test_conf_sigma_keeps_the_mean_and_ranks_by_confidence():
  z = jnp.asarray([[0, 1, 2, 1, 0]])                    # V = 2: position 2 masked
  psi = jnp.asarray([[0.9, 0.2, jnp.inf, 0.5, 0.99]])
  sig = np.asarray(dl.token_sigma(z, psi, 0.1, 2, conf=True))[0]
  assert sig[2] == 0.0
  np.testing.assert_allclose(sig.sum(), 0.1 * 4, rtol=1e-6)
  w = np.exp(-np.array([0.9, 0.2, 0.5, 0.99]))
  np.testing.assert_allclose(sig[[0, 1, 3, 4]], 0.4 * w / w.sum(), rtol=1e-5)
  uni = np.asarray(dl.token_sigma(z, psi, 0.1, 2, conf=False))[0]
  np.testing.assert_allclose(uni, [0.1, 0.1, 0.0, 0.1, 0.1])


def test_schedules():
  a_t, a_s, sig = dl.schedule(dl.Sampler('remdm', 4, eta=1.0))
  # t = 1, .75, .5, .25, 0: alpha_on (1 - t) / (1 - t_on) up to t_on = 0.55,
  # held at 0.9 down to t_off = 0.05, then -> 1.
  np.testing.assert_allclose(np.append(a_t, a_s[-1]),
                             [0.0, 0.5, 0.9, 0.9, 1.0], atol=1e-12)
  np.testing.assert_allclose(sig, [0, 0, 0.1 / 0.9, 0], atol=1e-12)
  for kind in dl.SAMPLERS:
    for K in (2, 4, 8, 16):
      a_t, a_s, sig = dl.schedule(dl.Sampler(kind, K, eta=0.5))
      assert np.all(a_s >= a_t) and a_t[0] == 0 and a_s[-1] == 1
      assert np.all(sig <= np.minimum(1, (1 - a_s) / np.maximum(a_t, 1e-12))
                    + 1e-12)
  assert not dl.schedule(dl.Sampler('mdlm', 8))[2].any()


# -- samplers ------------------------------------------------------------------------------
def _counting(fn):
  calls = []

  def wrapped(z):
    jax.debug.callback(lambda: calls.append(1))
    return fn(z)

  return wrapped, calls


@pytest.mark.parametrize('K', [2, 5])
def test_samplers_use_exactly_K_model_calls(K):
  f, calls = _counting(dl.oracle_logits_fn(dl.language_strings('onehot'), 2))
  draw = jax.jit(lambda k, a: dl.sample_arrays(f, k, 32, 2, a))
  for kind in dl.SAMPLERS:
    calls.clear()
    out = draw(jax.random.key(K), dl.sampler_arrays(dl.Sampler(kind, K,
                                                               eta=0.5)))
    jax.block_until_ready(out.x)
    jax.effects_barrier()
    assert len(calls) == K, kind
    assert bool(jnp.all(out.x != 2)), kind              # fully decoded
    assert float(out.masked_frac[-1]) == 0.0


def test_sampler_keeps_the_forward_mask_fractions():
  # Point-mass denoiser with non-uniform confidences (a product law would do
  # the same): the real sampler's mask fraction after every step is
  # 1 - alpha_s (Monte Carlo, 4000 x 6 positions), ReMDM-loop with
  # confidence-based sigma and a large loop rate included.
  V, L = 3, 6
  marg = jnp.asarray(np.random.default_rng(0).dirichlet(np.ones(V), L),
                     jnp.float32)
  f = lambda z: jnp.log(jnp.broadcast_to(marg, z.shape + (V,)))
  draw = jax.jit(lambda a: dl.sample_arrays(f, jax.random.key(0), 4000, V,
                                            a, length=L))
  for s in (dl.Sampler('mdlm', 8),
            dl.Sampler('remdm', 8, eta=0.5, alpha_on=0.5, conf=True),
            dl.Sampler('remdm', 8, eta=0.3, alpha_on=0.7, conf=False)):
    out = draw(dl.sampler_arrays(s))
    a_s = dl.schedule(s)[1]
    se = np.sqrt(a_s * (1 - a_s) / (4000 * L)) + 1e-9
    assert np.all(np.abs(np.asarray(out.masked_frac) - (1 - a_s))
                  < 5 * se + 2e-3), (s, np.asarray(out.masked_frac), 1 - a_s)


# The release's nucleus and final argmax change the sampled law on purpose:
# tests of exactness turn them off.
EXACT = dict(top_p=1.0, final_argmax=False)


def test_nucleus_and_final_argmax():
  p = jnp.array([[0.5, 0.3, 0.15, 0.05], [0.25, 0.25, 0.25, 0.25]])
  # The release's rule: the token that crosses top_p is dropped.
  np.testing.assert_allclose(dl.nucleus(p, 0.9), [[0.625, 0.375, 0.0, 0.0],
                                                  [1 / 3] * 3 + [0.0]],
                             atol=1e-6)
  np.testing.assert_allclose(dl.nucleus(jnp.array([[0.5, 0.5], [0.95, 0.05]]),
                                        0.9), [[1.0, 0.0], [1.0, 0.0]],
                             atol=1e-6)   # V = 2: greedy
  np.testing.assert_allclose(dl.nucleus(p, 0.5), [[1.0, 0, 0, 0],
                                                  [0.5, 0.5, 0, 0]],
                             atol=1e-6)
  np.testing.assert_allclose(dl.nucleus(p, 1.0), p, atol=1e-6)
  # Release defaults: uniform, eta 0.02, nucleus 0.9, final argmax.
  d = dl.Sampler('remdm', 8)
  assert (d.conf, d.eta, d.top_p, d.final_argmax) == (False, 0.02, 0.9, True)
  # With a product law and final argmax at K = 1, every token is the mode.
  marg = jnp.asarray([[0.6, 0.4], [0.3, 0.7]], jnp.float32)
  f = lambda z: jnp.log(jnp.broadcast_to(marg, z.shape + (2,)))
  out = dl.sample(f, jax.random.key(0), 64, 2, dl.Sampler('mdlm', 1),
                  length=2)
  np.testing.assert_array_equal(out.x, np.broadcast_to([0, 1], (64, 2)))
  out = dl.sample(f, jax.random.key(0), 4000, 2,
                  dl.Sampler('mdlm', 1, **EXACT), length=2)
  np.testing.assert_allclose(np.mean(np.asarray(out.x), 0), [0.4, 0.7],
                             atol=0.04)
  with pytest.raises(ValueError, match='top_p'):
    dl.sampler_arrays(dl.Sampler('mdlm', 4, top_p=0.0))


def test_substitution_replaces_visible_tokens_only():
  z = jnp.asarray(np.random.default_rng(0).integers(0, 5, (400, 16)))
  out = dl.substitute(jax.random.key(0), z, 4, 0.5)  # id 4 = MASK
  assert bool(jnp.all((z == 4) == (out == 4)))        # masks untouched
  changed = float(jnp.mean(out[z != 4] != z[z != 4]))
  assert abs(changed - 0.5 * 3 / 4) < 0.03            # a draw may keep it
  np.testing.assert_array_equal(dl.substitute(jax.random.key(0), z, 4, 0.0),
                                z)


def test_substitution_oracle_is_the_posterior_of_the_training_law():
  # Brute force over a 3-string language on L = 3, V = 3: draw x uniformly,
  # substitute each visible token w.p. r with a uniform token; the Bayes
  # posterior of x given z must be what the oracle marginalises.
  S = np.array([[0, 1, 2], [1, 2, 0], [2, 2, 1]])
  V, r = 3, 0.3
  f = dl.substitution_oracle_logits_fn(S, V, r)
  z = np.array([[0, 3, 3], [3, 2, 3], [1, 1, 3], [3, 3, 3]])   # 3 = MASK
  got = np.exp(np.asarray(f(jnp.asarray(z))))
  for n, zn in enumerate(z):
    w = np.array([np.prod([(1 - r + r / V) if zi == xi else r / V
                           for zi, xi in zip(zn, x) if zi != V]) for x in S])
    w /= w.sum()
    want = np.einsum('k,klv->lv', w, np.eye(V)[S])
    np.testing.assert_allclose(got[n], want, atol=1e-6)
  # Its NELBO under pure masking is the gate's floor: on the same draws, at
  # a vanishing rate it is the exact denoiser's (log N in expectation), and
  # above it at the default rate 0.05.
  strings = jnp.asarray(dl.language_strings('onehot'))
  nelbo = lambda f: float(dl.nelbo(f, strings, 2, jax.random.key(0),
                                   reps=64)[0])
  exact = nelbo(dl.oracle_logits_fn(strings, 2))
  assert abs(nelbo(dl.substitution_oracle_logits_fn(strings, 2, 1e-6))
             - exact) < 1e-3
  assert nelbo(dl.substitution_oracle_logits_fn(strings, 2, 0.05)) > (
      exact + 0.1)
  with pytest.raises(ValueError, match='sub_rate'):
    dl.substitution_oracle_logits_fn(S, V, 0.0)


def test_product_law_is_sampled_exactly():
  # For a product target the exact denoiser is its marginals whatever z
  # shows, and every sampler (independent draws, remasking, revision) must
  # return the target law: TV of 20000 samples over 9 outcomes.
  V, L, N = 3, 2, 20000
  marg = np.array([[0.6, 0.3, 0.1], [0.2, 0.2, 0.6]])
  f = lambda z: jnp.log(jnp.broadcast_to(jnp.asarray(marg, jnp.float32),
                                         z.shape + (V,)))
  draw = jax.jit(lambda a: dl.sample_arrays(f, jax.random.key(1), N, V, a,
                                            length=L))
  for kind in dl.SAMPLERS:
    out = draw(dl.sampler_arrays(dl.Sampler(kind, 4, eta=0.5, alpha_on=0.5,
                                            **EXACT)))
    x = np.asarray(out.x)
    emp = np.zeros((V, V))
    np.add.at(emp, (x[:, 0], x[:, 1]), 1.0 / N)
    assert 0.5 * np.abs(emp - np.outer(marg[0], marg[1])).sum() < 0.02, kind
    assert (int(out.revised) > 0) == (kind == 'revise')  # it did revise


def test_oracle_onehot_mdlm_validity_matches_the_exact_round_model():
  # MDLM with the exact denoiser on one-hot strings of length 5 at K = 3:
  # Monte Carlo validity of the real sampler against the exact law, which
  # dlm.propagate_round computes through the same step tables.
  L, strings = 5, np.eye(5, dtype=np.int32)
  f = dl.oracle_logits_fn(strings, 2)
  s = dl.Sampler('mdlm', 3, **EXACT)
  dist = dlm.all_masked(L)
  for a_t, a_s, _ in zip(*dl.schedule(s)):
    # The exact conditionals in NumPy: no 1 visible -> p(1) = 1 / #masked.
    st = dist.states
    n_mask = np.maximum((st == dlm.MASK).sum(1, keepdims=True), 1)
    p1 = np.where((st == 1).any(1, keepdims=True), 0.0, 1.0 / n_mask)
    probs = np.stack(np.broadcast_arrays(1.0 - p1, p1 + 0 * st), -1)
    z = np.where(st == dlm.MASK, 2, st)
    tr = _trans_np(st, probs, np.zeros(z.shape), a_t, a_s, 0.0, 2)
    dist = dlm.propagate_round(dist, tr, 'none')
  exact = sum(p for st, p in zip(dist.states, dist.probs)
              if np.all(st >= 0) and st.sum() == 1)
  out = dl.sample(f, jax.random.key(2), 10000, 2, s, length=L)
  mc = float(jnp.mean(dl.is_valid('onehot', jnp.pad(out.x, ((0, 0), (0, 11))))))
  assert abs(mc - exact) < 4 * math.sqrt(exact * (1 - exact) / 10000), (
      mc, exact)
  assert 0.5 < exact < 0.95    # the no-revision factorisation error


# -- fixed-count MDLM -----------------------------------------------------------------------
def test_fixed_count_schedule_and_exactness():
  # 'mdlm_fixed' decodes round(L alpha_s) - round(L alpha_t) tokens per step
  # (sum L; one per step at K = L, some empty steps at K > L); with the exact
  # denoiser at K = L it is ancestral sampling in a random order, hence exact:
  # validity 1 on one-hot and Latin squares, and the one-hot law at the
  # finite-sample TV floor. Random-count MDLM at the same K is not exact.
  for K, L in ((16, 16), (64, 16), (5, 16)):
    n = dl.unmask_counts(dl.Sampler('mdlm_fixed', K), L)
    assert n.sum() == L and n.min() >= 0
    assert (K != L) or np.all(n == 1)
  assert np.all(dl.unmask_counts(dl.Sampler('mdlm', 8)) == -1)
  out = {}
  for lang in ('onehot', 'latin'):
    V = dl.vocab_size(lang)
    strings = dl.language_strings(lang)
    f = dl.oracle_logits_fn(strings, V)
    draw = jit_optimized(lambda a, f=f, V=V: dl.sample_arrays(
        f, jax.random.key(4), 1024, V, a))   # one program per language
    for kind in ('mdlm_fixed', 'mdlm'):
      s = dl.Sampler(kind, 16)
      res = draw(dl.sampler_arrays(s))
      out[lang, kind] = float(jnp.mean(dl.is_valid(lang, res.x)))
      if kind == 'mdlm_fixed':
        want = 1.0 - np.cumsum(dl.unmask_counts(s)) / 16
        np.testing.assert_allclose(res.masked_frac, want, atol=1e-6)
        if lang == 'onehot':
          tv = dl.empirical_tv(np.asarray(res.x), strings, V)
          assert tv < dl.tv_floor(16, 1024) + 0.03, tv
  assert out['onehot', 'mdlm_fixed'] == 1.0, out
  assert out['latin', 'mdlm_fixed'] == 1.0, out
  assert out['onehot', 'mdlm'] < 0.95 and out['latin', 'mdlm'] < 0.8, out


# -- ReMDM in its regime, with the exact denoiser (no training) ---------------------------
class _ExactRegime(dict):
  """(lang, off_support, sampler) -> validity per key, computed on first use
  (one compiled program per (lang, off_support))."""

  def __init__(self, samplers, keys):
    super().__init__()
    self._smp, self._keys, self._draws = samplers, keys, {}

  def __missing__(self, k):
    lang, off, name = k
    if (lang, off) not in self._draws:
      V = dl.vocab_size(lang)
      f = dl.oracle_logits_fn(dl.language_strings(lang), V, off)
      self._draws[lang, off] = jit_optimized(jax.vmap(
          lambda key, a: dl.is_valid(lang, dl.sample_arrays(
              f, key, 512, V, a).x).mean(), in_axes=(0, None)))
    s = self._smp[name]
    if lang == 'onehot':   # V = 2: the release's nucleus is greedy
      s = dataclasses.replace(s, top_p=1.0)
    self[k] = np.asarray(self._draws[lang, off](self._keys,
                                                dl.sampler_arrays(s)))
    return self[k]


@pytest.fixture(scope='module')
def exact_regime():
  """Validity at the default's headline K (= 4 L) with the exact denoiser
  ('nearest' or 'uniform' off the support), per key (4 keys x 512
  samples), of MDLM, ReMDM-loop, the loop schedule with eta = 0 and the
  release's eta, all with the default's nucleus and final argmax; each
  (language, off-support, sampler) drawn when a test first reads it."""
  from configs import dlm as dlm_config  # pylint: disable=g-import-not-at-top
  from experiments import dlm as dlm_exp  # pylint: disable=g-import-not-at-top
  cfg = dlm_config.get_config()
  return cfg, _ExactRegime(dlm_exp.samplers_of(cfg, cfg.headline_steps),
                           jax.random.split(jax.random.key(0), 4))


def test_remdm_beats_mdlm_on_latin_squares_with_the_exact_denoiser(
    exact_regime):
  # The margin's calibration: the margin is half what ReMDM-loop gains with
  # the exact denoiser (measured with the release's nucleus rule on 6 keys,
  # the first 4 of which are tested here: MDLM 0.887 0.850 0.893 0.881
  # (0.891 0.883), ReMDM-loop 0.965 0.982 0.982 0.984 (0.980 0.980); gains
  # 0.078 to 0.132, mean 0.098, SD 0.018 over the 6, so 1.56x to 2.6x the
  # margin per key; mean 0.100 over these 4); the default run: 0.884 ->
  # 0.982. The loop schedule without remasking loses (0.73 to 0.78) and the
  # release's eta 0.02 gains nothing at L = 16 (0.85 to 0.88).
  cfg, v = exact_regime
  a, b, z, rel = (v['latin', 'nearest', k] for k in
                  ('mdlm', 'remdm', 'remdm_eta0', 'remdm_release'))
  assert np.mean(b - a) >= 1.5 * cfg.margin, v   # about twice, on average
  assert np.all(b - a >= cfg.margin), v          # and the margin on each key
  assert np.all(z < a + cfg.margin), v          # the control fails
  assert np.all(rel < a + cfg.margin), v


@pytest.mark.slow   # two more sampler runs (~15 s)
def test_remasking_needs_an_off_support_aware_denoiser(exact_regime):
  # A denoiser that answers uniform noise off the support turns every
  # inconsistent draw into more errors.
  _, v = exact_regime
  assert np.mean(v['latin', 'uniform', 'remdm']) < np.mean(
      v['latin', 'uniform', 'mdlm']), v
  assert np.all(v['latin', 'uniform', 'remdm'] + 0.1
                < v['latin', 'nearest', 'remdm']), v


def test_onehot_leaves_no_room_for_the_remdm_margin(exact_regime):
  # Why the ReMDM claim is not made on one-hot strings: MDLM with the exact
  # denoiser, sampling its law (top_p = 1), is already within the margin of
  # validity 1; and at V = 2 the release's nucleus (0.9) is greedy, a
  # sampler that no longer draws from the model's law.
  cfg, v = exact_regime
  assert 'onehot' not in cfg.remdm_languages
  assert np.mean(v['onehot', 'nearest', 'mdlm']) > 1 - cfg.margin, v


# -- a short learned check: the launcher's smoke run --------------------------------------
def test_smoke_run_learns_the_onehot_law():
  """The smoke run (a width-32 one-layer net, 150 steps; the launcher and
  notebook tests share it) trains the one-hot MDLM near log 16 and to
  valid fixed-count samples at K = 16; the controls, the untrained model
  and random-count ancestral sampling, fail. Measured: NELBO 3.001 (MC se
  0.088; the floor with substitution 3.012, log 16 = 2.773; the notebook's
  optimised build 2.993), untrained 33.9 (5.0 for another init draw: an
  untrained model's NELBO varies widely); validity fixed-count 1.000,
  random-count 0.531 (the notebook: 0.578; 64 samples)."""
  m = {k: v['mean'] for k, v in smoke_summary('dlm')['metrics'].items()}
  nelbo = m['nelbo/onehot']
  assert nelbo < m['log_count/onehot'] + 0.3 + 4 * m['nelbo_se/onehot'], m
  assert m['untrained_nelbo/onehot'] > nelbo + 1.5, m
  assert m['validity/onehot_mdlm_fixed_K16'] > 0.9, m
  assert m['validity/onehot_mdlm_K16'] < 0.9, m


# -- the full default run (slow) ----------------------------------------------------------
@pytest.fixture(scope='module')
def dlm_default(tmp_path_factory):
  from configs import dlm as dlm_config  # pylint: disable=g-import-not-at-top
  from experiments.dlm import EXPERIMENT  # pylint: disable=g-import-not-at-top
  return EXPERIMENT.execute(dlm_config.get_config(),
                            tmp_path_factory.mktemp('dlm') / 'run')


@pytest.mark.slow
@pytest.mark.parametrize('prefix', [
    'Uniform one-hot law', 'CoT simulation', 'Space:',
    '[onehot] the trained MDLM', '[onehot] quality gate'])
def test_default_claims_that_hold(dlm_default, prefix):
  # Measured (default config, 3 seeds, substitution rate 0.05, 4e82508,
  # 1725 s): one-hot NELBO - floor -0.011/-0.007/-0.032 (floor log N +
  # 0.202, MC se 0.014); fixed-count MDLM at K = 16 one-hot 1.000 (random-
  # count 0.633: the control fails).
  c = _claim(dlm_default, prefix)
  assert c['holds'], c
  assert c['control'].endswith('(fails)'), c


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=(
    'measured (4e82508, 3 seeds): the substitution-trained Latin-square '
    'model is +0.264/+0.315/+0.327 nats above its floor (log N + 0.161), '
    'against a 0.10 gate; the pure-mask model was +0.07 to +0.09 at the '
    'same 4000 steps'))
def test_default_latin_nelbo_gate(dlm_default):
  assert _claim(dlm_default, '[latin] the trained MDLM')['holds']


@pytest.mark.slow
def test_default_latin_claims_follow_their_rules(dlm_default):
  # Not pinned: the Latin quality gate (0.931 against 0.95) and the ReMDM
  # gain (+0.084/+0.107/+0.041 against 0.05 on every seed; it also needs
  # the NELBO gate) are near their bars. Their verdicts must follow their
  # rules and their controls fail.
  m = {k: np.asarray(v['per_seed'], float)
       for k, v in dlm_default['metrics'].items()}
  gate = _claim(dlm_default, '[latin] quality gate')
  assert gate['holds'] == bool(
      m['validity/latin_mdlm_fixed_K16'].mean() >= 0.95), gate
  remdm = _claim(dlm_default, '[latin] at K = 64')
  nelbo = _claim(dlm_default, '[latin] the trained MDLM')
  gain = m['validity/latin_remdm_K64'] - m['validity/latin_mdlm_K64']
  assert remdm['holds'] == bool(np.all(gain >= 0.05) and nelbo['holds'])
  for c in (gate, remdm, nelbo):
    assert c['control'].endswith('(fails)'), c


@pytest.mark.slow   # a second smoke run, on exactly-k strings (~20 s); the
# language's strings are tested above and every variant's config validates
# in tests/test_launchers.py
def test_paper_variant_runs_end_to_end_at_tiny_size(tmp_path):
  # The paper variant's own path: its extra language (exactly-k ones, k from
  # the config), all four samplers and the NELBO gate, at a tiny size (the
  # data are generated; there is no folder to fake).
  from configs import dlm as dlm_config  # pylint: disable=g-import-not-at-top
  from experiments.dlm import EXPERIMENT  # pylint: disable=g-import-not-at-top
  c = dlm_config.get_config('paper')
  c.languages, c.num_seeds = ('exactk',), 1
  c.num_steps, c.headline_steps, c.gate_steps = (16,), 16, 16
  c.width, c.heads, c.depth, c.batch_size = 16, 2, 1, 16
  c.train_steps.exactk, c.warmup_steps = 4, 1
  c.num_samples, c.nelbo_draws = 16, 64
  c.steps_per_chunk, c.log_every, c.checkpoint_every = 4, 2, 0
  summary = EXPERIMENT.execute(c, tmp_path / 'run')
  m = summary['metrics']
  keys = [k for k in m if 'exactk' in k]
  assert any(k.startswith('validity/') for k in keys), sorted(m)[:20]
  assert all(np.all(np.isfinite(m[k]['mean'])) for k in keys)
  assert any('exactk' in c_['claim'] or 'exactly' in c_['claim']
             for c_ in summary['claims'])
