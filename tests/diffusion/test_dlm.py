"""DLM round model (arXiv 2512.25014): exact laws, gap, CoT circuits, space.

Reference numbers are exact fractions (the hand check below).
Hand check for n = 4 (no revision, oracle marginals): r = 1 draws four
independent Bernoulli(1/4) bits, P(e_j) = (1/4)(3/4)^3 = 27/256, so
TV = 4 (1/4 - 27/256) = 37/64 = 0.578125; r = 2 gives 11/32; r = 3 (blocks
2, 1, 1) gives 1/8.
"""

import numpy as np
import pytest

from iclrjax.diffusion import dlm

PILOT = {
    4: [0.578, 0.344, 0.125, 0.000],
    8: [0.607, 0.418, 0.284, 0.220, 0.119, 0.069, 0.031, 0.000],
}


@pytest.mark.parametrize('n', [4, 8])
def test_onehot_norevision_matches_pilot(n):
  tvs, rounds = [], []
  for r in range(1, n + 1):
    run, t = dlm.onehot_norevision(n, r)
    tvs.append(t)
    rounds.append(run.rounds)
  np.testing.assert_allclose(tvs, PILOT[n], atol=5e-4)
  assert rounds == list(range(1, n + 1))
  assert all(t > 1e-3 for t in tvs[:-1])
  assert tvs[-1] < 1e-12


def test_onehot_norevision_hand_values():
  got = [dlm.onehot_norevision_tv(4, r) for r in (1, 2, 3)]
  np.testing.assert_allclose(got, [37 / 64, 11 / 32, 1 / 8], atol=1e-12)


@pytest.mark.parametrize('n', [4, 8])
def test_onehot_revision_exact_in_two_rounds(n):
  run, t = dlm.onehot_revision(n)
  assert run.rounds == 2
  assert t < 1e-12
  # It really revises: the same policy is rejected without revision.
  with pytest.raises(ValueError, match='would change token'):
    dlm.run_exact(dlm.onehot_revision_policy(n), dlm.all_masked(n), 2,
                  'none')


@pytest.mark.parametrize('n,depth', [(4, 2), (8, 3), (16, 4)])
def test_parity_cot_exact_in_depth_plus_one_rounds(n, depth):
  res = dlm.simulate_parity(n)
  assert res['depth'] == depth
  assert res['rounds'] == depth + 1
  assert res['tv'] < 1e-12


@pytest.mark.parametrize('w,d,size', [(8, 4, 40), (8, 8, 72), (10, 12, 130)])
def test_ring_footprint_size_vs_width(w, d, size):
  circ = dlm.ring_circuit(w, d)
  assert circ.size == size and circ.width == w and circ.depth == d
  plain = dlm.simulate_circuit(circ, remask=False)
  remask = dlm.simulate_circuit(circ, remask=True)
  assert plain['peak_unmasked'] == size
  assert remask['peak_unmasked'] == w
  assert plain['rounds'] == remask['rounds'] == d + 1
  assert plain['tv_output'] < 1e-12 and remask['tv_output'] < 1e-12
  assert plain['tv_io'] < 1e-12


def test_ring_gate_is_rule30():
  circ = dlm.ring_circuit(5, 1)
  x = np.array([[0, 1, 0, 0, 1]], np.int8)
  got = dlm.circuit_values(circ, x)[1][0]
  want = [x[0, i - 1] ^ (x[0, i] | x[0, (i + 1) % 5]) for i in range(5)]
  np.testing.assert_array_equal(got, want)


def test_remask_policy_rejected_without_remasking():
  circ = dlm.ring_circuit(4, 2)
  with pytest.raises(ValueError):
    dlm.run_exact(dlm.cot_policy(circ, remask=True), dlm.all_masked(12), 2,
                  'none')


def test_check_trans_modes():
  states = np.array([[0, dlm.MASK]], np.int8)
  revise = dlm.identity_trans(states, 2)
  revise[0, 0] = [0.0, 1.0, 0.0]                      # token 0 -> 1
  remask = dlm.identity_trans(states, 2)
  remask[0, 0] = [0.5, 0.0, 0.5]                      # token 0 -> MASK
  dlm.check_trans(states, revise, 'revise')
  dlm.check_trans(states, remask, 'remask')
  with pytest.raises(ValueError):
    dlm.check_trans(states, revise, 'remask')
  with pytest.raises(ValueError):
    dlm.check_trans(states, remask, 'none')
  bad = dlm.identity_trans(states, 2) * 0.5
  with pytest.raises(ValueError, match='probability'):
    dlm.check_trans(states, bad, 'revise')


def test_oracle_marginals():
  target = dlm.uniform_onehot(4)
  states = np.array([[dlm.MASK] * 4, [0, 0, dlm.MASK, dlm.MASK],
                     [1, 1, dlm.MASK, dlm.MASK]], np.int8)
  m = dlm.oracle_marginals(target, states, 2)
  np.testing.assert_allclose(m[0, :, 1], 0.25)
  np.testing.assert_allclose(m[1, 2:, 1], 0.5)
  np.testing.assert_allclose(m[2], 0.5)               # off support: uniform


def _check_mc(policy, init, vocab, mode, num=20_000, seed=0):
  """Every state's MC frequency within 5 SE of its exact probability, and
  no MC state outside the exact support."""
  exact = dlm.run_exact(policy, init, vocab, mode)
  mc = dlm.run_monte_carlo(policy, init, vocab, mode, num=num, seed=seed)
  assert mc.rounds == exact.rounds
  assert mc.peak <= exact.peak
  p = exact.final.to_dict()
  q = mc.final.to_dict()
  assert set(q) <= set(p)
  for s, ps in p.items():
    se = np.sqrt(ps * (1 - ps) / num)
    assert abs(q.get(s, 0.0) - ps) <= 5 * se + 1e-12, (s, ps, q.get(s))
  # The empirical TV to the exact law is ~ sum_s sqrt(p_s / (2 pi num)).
  bound = sum(np.sqrt(ps / num) for ps in p.values())
  assert dlm.tv(mc.final, exact.final) < bound
  return exact, mc


def test_monte_carlo_agrees_onehot_norevision():
  n, r = 4, 2
  target = dlm.uniform_onehot(n)
  policy = dlm.oracle_policy(target, 2, dlm.left_to_right_blocks(n, r))
  exact, mc = _check_mc(policy, dlm.all_masked(n), 2, 'none')
  # Triangle inequality: the MC estimate of TV(., U_4) is off by at most
  # TV(mc, exact), itself bounded in _check_mc.
  assert (abs(dlm.tv(mc.final, target) - 11 / 32)
          <= dlm.tv(mc.final, exact.final) + 1e-12)


def test_monte_carlo_agrees_revision_and_remask():
  _check_mc(dlm.onehot_revision_policy(8), dlm.all_masked(8), 2, 'revise',
            seed=1)
  circ = dlm.ring_circuit(4, 3)
  exact, mc = _check_mc(dlm.cot_policy(circ, remask=True),
                        dlm.all_masked(circ.size), 2, 'remask', seed=2)
  assert exact.peak == mc.peak == 4


def test_summary_keys():
  s = dlm.summary(onehot_ns=(4,), parity_ns=(4,), ring_cases=((4, 2),))
  assert s['onehot_revision'][4] == {'tv': 0.0, 'rounds': 2}
  assert s['ring']['w4_d2']['remask']['peak_unmasked'] == 4
  assert s['ring']['w4_d2']['noremask']['peak_unmasked'] == 12


def test_autoregressive_decoding_of_the_cot_takes_size_rounds():
  # The control of the CoT claim: exact, but one round per CoT token.
  for n, size in ((4, 7), (8, 15)):
    res = dlm.autoregressive_parity_rounds(n)
    assert res['rounds'] == res['size'] == size and res['tv'] < 1e-12


def test_exact_claims_hold_and_their_controls_fail():
  from experiments import dlm as dlm_exp  # pylint: disable=g-import-not-at-top
  ex = dlm.summary()
  ex['ar_rounds'] = {n: dlm.autoregressive_parity_rounds(n) for n in (4, 8)}
  claims = dlm_exp.exact_claims(ex)
  assert len(claims) == 3
  for c in claims:
    assert c.holds, c
    assert c.control.endswith('(fails)'), c
