"""ReMDM sampler step against kuleshov-group/remdm on the same logits.

The reference's `Diffusion._ddpm_caching_update` (diffusion.py:658-793 at
f830d659) and its `_sample` loop (diffusion.py:847-893), run on a stub
backbone with fixed logits, give the exact per-position law of x_s given
x_t (generate/dlm.py). Ours: `dlm_learned.step_trans` with the per-token
rates of `token_sigma` and the (alpha_t, alpha_s, sigma) of `schedule`,
on the same x_t and x_theta = softmax of the same logits without the MASK
column (the SUBS parameterisation on both sides).

Compared: one step of MDLM, ReMDM-cap (cap binding or not, alpha_t = 0),
ReMDM-rescale at given (t, dt); every step of a K = 16 MDLM run and of a
ReMDM-loop run whose t_on / t_off lie on the grid (the schedule, the loop's
branches and the states the reference visited). Deliberate differences,
each asserted exactly: the confidence rates (our N_dec factor, and MDLM's
rate instead of u_t at masked positions in theirs), the loop steps that
cross t_on / t_off off the grid, and the time grid's end (eps = 1e-5).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclrjax.diffusion import dlm_learned as dl
from tests.parity import common

PAPER = ('Diffusion Language Models are Provably Optimal Parallel Samplers '
         '(arXiv 2512.25014); ReMDM sampler of Wang et al. (arXiv 2503.00307)')
FIXTURE = 'dlm'

V = 5        # tokens; MASK = V
K = 16       # steps of the fixture's runs
# Both sides compute float32 probabilities (softmax, a few multiply-adds)
# of O(1) values: a few ulps.
TOL = 2e-6
# The reference's grid is a float32 linspace (t ~ 1: ulp 6e-8).
TOL_GRID = 2e-7


def _sampler(kind, params, conf=False):
  eta, t_on, t_off, alpha_on = (float(v) for v in params)
  return dl.Sampler(kind=kind, num_steps=K, eta=eta, conf=conf, t_on=t_on,
                    t_off=t_off, alpha_on=alpha_on)


@jax.jit
def _run(z, psi, sig_base, conf, a_t, a_s, sigma, logits):
  """Rows of (z, psi, base rate [N, 1], conf?, alpha_t, alpha_s, sigma) ->
  (per-token rates [R, N, L], step laws [R, N, L, V + 1]), one program."""
  probs = jax.nn.softmax(logits[..., :V], axis=-1)

  def one(z, psi, sb, c, at, as_, s):
    sig = jnp.where(c, dl.token_sigma(z, psi, sb, V, True),
                    dl.token_sigma(z, psi, sb, V, False))
    return sig, dl.step_trans(z, probs, sig, at, as_, s)

  return jax.vmap(one)(z, psi, sig_base, conf, a_t, a_s, sigma)


@functools.lru_cache(maxsize=None)
def _results():
  a, _ = common.load(FIXTURE)
  x_t = a['x_t'].astype(np.int32)
  n, l = x_t.shape
  dec = x_t != V
  n_dec = dec.sum(-1, keepdims=True).astype(np.float64)
  psi_t = -a['conf'].astype(np.float64)          # ours: +p, inf if masked
  rows, keys = [], []

  def add(key, z, a_t, a_s, sigma, psi=None, conf=False, base=None):
    keys.append(key)
    base = np.full((n, 1), sigma) if base is None else base
    rows.append((z.astype(np.int32),
                 np.full((n, l), np.inf) if psi is None else psi,
                 base, conf, a_t, a_s, sigma))

  # A. single steps at the reference's (t, dt); alpha = 1 - t (loglinear).
  for i, name in enumerate(a['case_sampler']):
    t, dt, eta = a['case_t'][i], a['case_dt'][i], a['case_eta'][i]
    a_t, a_s = 1.0 - t, 1.0 - (t - dt)
    smax = float(dl.sigma_max(a_t, a_s))
    sigma = {'mdlm': 0.0, 'remdm-cap': min(eta, smax),
             'remdm-rescale': eta * smax, 'remdm-conf': smax}[str(name)]
    add(('case', i), x_t, a_t, a_s, sigma, psi_t, name == 'remdm-conf')
    if name == 'remdm-conf':
      # Theirs, from our functions: no N_dec factor, sigma = 0 (MDLM's
      # unmasking rate) at masked positions.
      add(('conf_literal', i), x_t, a_t, a_s, 0.0, psi_t, True,
          smax / np.maximum(n_dec, 1.0))
  # B. every step of the reference's K-step runs, our schedule.
  for run, kind, params in (('mdlm', 'mdlm', (0, 0, 0, 0)),
                            ('loop', 'remdm', a['loop_params']),
                            ('paper', 'remdm', a['paper_params'])):
    a_ts, a_ss, sigs = dl.schedule(_sampler(kind, params))
    for k in range(K):
      add((run, k), a[f'{run}_x'][k], a_ts[k], a_ss[k], sigs[k])
  # The paper's loop (t_on = 0.55, t_off = 0.05) off the K = 16 grid: the
  # reference picks the branch from t alone (diffusion.py:757-768).
  eta, t_on, t_off, alpha_on = a['paper_params']
  for k in range(K):
    t, s = 1.0 - k / K, 1.0 - (k + 1) / K
    if t > t_on > s:     # ramp formula at s too: alpha_s past alpha_on
      add(('paper_ref', k), a['paper_x'][k], alpha_on * (1 - t) / (1 - t_on),
          alpha_on * (1 - s) / (1 - t_on), 0.0)
    elif t > t_off > s:  # still the loop at alpha_on
      add(('paper_ref', k), a['paper_x'][k], alpha_on, alpha_on, eta)

  cols = list(zip(*rows))
  sig, law = _run(*(np.stack(c).astype(np.int32 if j == 0 else
                                       bool if j == 3 else np.float32)
                    for j, c in enumerate(cols)),
                  a['logits'])
  sig, law = np.asarray(sig), np.asarray(law)
  return a, {k: (sig[j], law[j]) for j, k in enumerate(keys)}


def _theirs(a, key):
  run, k = key
  return a['case_law'][k] if run in ('case', 'conf_literal') else \
      a[f'{run}_law'][k]


def _boundary(a):
  return sorted(k for (run, k) in _results()[1] if run == 'paper_ref')


def checks() -> list[common.Check]:
  a, ours = _results()
  out = []
  for i, name in enumerate(a['case_sampler']):
    if name == 'remdm-conf':
      continue
    t, dt, eta = a['case_t'][i], a['case_dt'][i], a['case_eta'][i]
    out.append(common.check(
        f'{name} step law (t={t:g}, dt={dt:g}, eta={eta:g}), '
        'diffusion.py:680-728',
        ours[('case', i)][1], a['case_law'][i], TOL))
  out.append(common.check(
      f'MDLM run, every step of K={K} (schedule + step), diffusion.py:847',
      np.stack([ours[('mdlm', k)][1] for k in range(K)]), a['mdlm_law'],
      TOL))
  out.append(common.check(
      f'ReMDM-loop run, every step of K={K}, t_on/t_off on the grid '
      '(schedule + loop + step), diffusion.py:755-788',
      np.stack([ours[('loop', k)][1] for k in range(K)]), a['loop_law'], TOL))
  inside = [k for k in range(K) if k not in _boundary(a)]
  out.append(common.check(
      'ReMDM-loop run, paper t_on=0.55/t_off=0.05, steps not crossing them',
      np.stack([ours[('paper', k)][1] for k in inside]),
      a['paper_law'][inside], TOL))
  out.extend(deliberate_checks())
  return out


def deliberate_checks() -> list[common.Check]:
  a, ours = _results()
  out = []
  i = int(np.flatnonzero(a['case_sampler'] == 'remdm-conf')[0])
  theirs = a['case_law'][i]
  x_t = a['x_t']
  dec = x_t != V
  out.append(common.check(
      'deliberate: ReMDM-conf = ours without the N_dec factor and with '
      "MDLM's rate at masked positions (diffusion.py:729-742)",
      ours[('conf_literal', i)][1], theirs, TOL))
  # Ours as run: decoded rate = min(1, N_dec x theirs) ...
  sig_ours, law_ours = ours[('case', i)]
  n_dec = dec.sum(-1, keepdims=True)
  out.append(common.check(
      'deliberate: ReMDM-conf remask rate at decoded tokens = min(1, N_dec '
      'x reference)', np.where(dec, sig_ours, 0.0),
      np.where(dec, np.minimum(1.0, n_dec * theirs[..., V]), 0.0), TOL))
  # ... and masked tokens unmask at u_t(sigma_t): their MASK weight less
  # sigma_t alpha_t / (1 - alpha_t).
  t, dt = a['case_t'][i], a['case_dt'][i]
  a_t, a_s = 1.0 - t, 1.0 - (t - dt)
  smax = min(1.0, (1.0 - a_s) / a_t)
  out.append(common.check(
      'deliberate: ReMDM-conf MASK weight at masked tokens = reference - '
      'sigma_t alpha_t / (1 - alpha_t)',
      np.where(dec, 0.0, law_ours[..., V]),
      np.where(dec, 0.0, theirs[..., V] - smax * a_t / (1.0 - a_t)), TOL))
  for k in _boundary(a):
    out.append(common.check(
        f'deliberate: loop step {k} crossing t_on/t_off off the grid: '
        "reference branch chosen from t alone (diffusion.py:757-768)",
        ours[('paper_ref', k)][1], a['paper_law'][k], TOL))
  # The grid: ours ends at t = 0, theirs at eps = 1e-5 (main.py's default,
  # diffusion.py:858-860): t_k differ by exactly eps k / K.
  a_t, _, _ = dl.schedule(dl.Sampler(kind='mdlm', num_steps=K))
  out.append(common.check(
      'deliberate: time grid t_k = 1 - k/K (reference: linspace(1, 1e-5)), '
      'difference - 1e-5 k/K', a['default_t'] - (1.0 - a_t),
      1e-5 * np.arange(K) / K, TOL_GRID))
  return out


def test_matches_reference():
  common.assert_checks(checks())


def test_deliberate_differences():
  """Each deliberate difference is exactly the stated one, and ours does
  differ from the reference there (else the difference is gone)."""
  common.assert_checks(deliberate_checks())
  a, ours = _results()
  i = int(np.flatnonzero(a['case_sampler'] == 'remdm-conf')[0])
  assert common.max_diff(ours[('case', i)][1], a['case_law'][i]) > 0.05
  bnd = _boundary(a)
  assert len(bnd) == 2
  for k in bnd:
    assert common.max_diff(ours[('paper', k)][1], a['paper_law'][k]) > 0.05
  assert np.max(np.abs(a['default_t'] - a['mdlm_t'])) == pytest.approx(
      1e-5 * (K - 1) / K, abs=TOL_GRID)
