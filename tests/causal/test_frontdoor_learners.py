"""Front-door nuisance learners (arXiv 2509.22531): XGBoost and MLP against
the DGP's exact nuisances, and both under vmap."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclrjax.causal import frontdoor as fd

N_TRAIN, N_EVAL, D = 2000, 1000, 10
PROBS = ('e1', 'q1_1', 'q1_0', 'm_z')


@pytest.fixture(scope='module')
def fits():
  """Each learner fitted on 2000 md draws (d = 10), predicted at 1000 new
  ones, beside the exact nuisances there."""
  data = fd.simulate(jax.random.key(0), N_TRAIN + N_EVAL, D, 'md')
  train = tuple(a[:N_TRAIN] for a in (data.c, data.x, data.z, data.y))
  c, x = data.c[N_TRAIN:], data.x[N_TRAIN:]
  truth = fd.true_nuisances(data.params, c, x)
  fit = {name: lambda k, f=fd.LEARNERS[name]: f(k, train, c, x)
         for name in ('xgb', 'mlp')}
  return truth, fit, {name: jax.jit(f) for name, f in fit.items()}


# Measured RMSE to the truth at this size (seed 0):
#   xgb: e1 .076, q1_1 .067, q1_0 .084, m_z .076, m_y .49
#   mlp: e1 .033, q1_1 .037, q1_0 .064, m_z .052, m_y .42
# against the spread of each over C (the best constant's RMSE): .15, .12,
# .16, .15 and 1.01.
@pytest.mark.parametrize('name', ['xgb', 'mlp'])
def test_learner_recovers_the_true_nuisances(fits, name):
  truth, _, run = fits
  nu = run[name](jax.random.key(1))
  err = {k: float(fd.rmse(getattr(nu, k), getattr(truth, k)))
         for k in nu._fields}
  spread = {k: float(jnp.std(getattr(truth, k))) for k in nu._fields}
  for k in PROBS:
    assert err[k] < 0.1 < spread[k], (k, err, spread)
  assert err['m_y'] < 0.6 < spread['m_y'], err
  # The plug-in tau from these nuisances is within 0.15 of the truth
  # (measured .13 xgb, .10 mlp; tau's own spread is 0.08 around 0.3).
  assert float(fd.rmse(fd.fd_pi(nu), fd.fd_pi(truth))) < 0.15, err


def test_mlp_fit_vmaps_like_solo_runs():
  data = fd.simulate(jax.random.key(2), 400, 3, 'md')
  fit = lambda k: fd.mlp_fit_predict(k, data.c, data.x, True, data.c,
                                     steps=20)
  keys = jax.random.split(jax.random.key(3), 2)
  batched = jax.jit(jax.vmap(fit))(keys)
  for i in range(2):
    np.testing.assert_allclose(batched[i], jax.jit(fit)(keys[i]), atol=1e-5)
  assert float(jnp.abs(batched[0] - batched[1]).max()) > 1e-3


def test_xgb_learner_vmaps_like_solo_runs(fits):
  """pure_callback under jit and vmap (one replication at a time, as the
  experiment's seed axis runs it): each seed's fit is its solo fit, and
  the key seeds XGBoost's row and column subsampling."""
  _, fit, run = fits
  keys = jnp.stack([jax.random.key(1), jax.random.key(2)])
  batched = jax.jit(jax.vmap(fit['xgb']))(keys)
  for u, v in zip(run['xgb'](jax.random.key(1)), batched):
    np.testing.assert_array_equal(u, v[0])
  assert float(jnp.abs(batched.m11[0] - batched.m11[1]).max()) > 1e-3
