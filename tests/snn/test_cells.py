"""Neuron cells against a direct NumPy transcription of their equations."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclrjax.snn import cells
from iclrjax.snn import network
from iclrjax.snn import surrogate

T, N_IN, N_OUT = 100, 12, 7


def numpy_gate(x, floor=0.05):
  """phi: the identity above the floor, floor^2 / (2 floor - x) below."""
  return np.where(x >= floor, x, floor**2 / (2 * floor - np.minimum(x, floor)))


def numpy_layer(kind, p, s, xi, *, dt=1.0, g_l=0.1, tau_syn=5.0, theta=1.0,
                tau_adapt=20.0, beta_adapt=1.0, recurrent=False, k=1.0):
  """The equations of the module docstring, one line each, in float64."""
  p = {k: np.asarray(v, np.float64) for k, v in p.items()}
  if 'c_raw' in p:
    p['c'] = np.logaddexp(0.0, k * p['c_raw']) / k     # softplus(k c_raw) / k
  alpha = math.exp(-dt / tau_syn)
  beta = 1.0 - g_l * dt
  gamma = math.exp(-dt / tau_adapt)
  n_pre = p['w'].shape[0]
  d = np.zeros(n_pre)
  v = np.zeros(N_OUT)
  z = np.zeros(N_OUT)
  b = np.zeros(N_OUT)
  zs, vs = [], []
  for t in range(s.shape[0]):
    pre = np.concatenate([s[t], z]) if recurrent else s[t]
    d = alpha * d + pre                                  # D^t
    current = dt * d @ p['w']                            # dt sum_i W_i D_i^t
    if kind == 'lif':
      v = beta * v + current + xi[t] - theta * z
      z = (v - theta > 0).astype(float)
    elif kind == 'plif':
      rho = 1.0 / (1.0 + np.exp(-p['a']))
      v = rho * v + current + xi[t] - theta * z
      z = (v - theta > 0).astype(float)
    elif kind == 'alif':
      a_prev = theta + beta_adapt * b
      v = beta * v + current + xi[t] - a_prev * z
      b = gamma * b + (1 - gamma) * z
      z = (v - (theta + beta_adapt * b) > 0).astype(float)
    elif kind == 'dgn':
      rho = numpy_gate(1.0 - g_l * dt - dt * d @ p['c'])
      v = rho * v + current + xi[t] - theta * z
      z = (v - theta > 0).astype(float)
    zs.append(z)
    vs.append(v)
  return np.stack(zs), np.stack(vs)


def _inputs(seed, n_pre=N_IN):
  rng = np.random.default_rng(seed)
  s = (rng.random((T, N_IN)) < 0.3).astype(np.float32)
  xi = (0.05 * rng.normal(size=(T, N_OUT))).astype(np.float32)
  return s, xi


@pytest.mark.parametrize('kind', cells.CELLS)
@pytest.mark.parametrize('recurrent', [False, True])
def test_layer_matches_numpy_transcription(kind, recurrent):
  cell = cells.Cell(kind=kind, w_gain=2.0, c_init=0.5)
  s, xi = _inputs(0)
  n_pre = N_IN + (N_OUT if recurrent else 0)
  p = cell.init_params(jax.random.key(1), n_pre, N_OUT)
  if kind == 'plif':  # Heterogeneous decays, as after training.
    p['a'] = jnp.linspace(0.5, 3.0, N_OUT)
  z, v = jax.jit(lambda p: cells.run_layer(cell, p, jnp.asarray(s),
                                           jnp.asarray(xi), recurrent))(p)
  z_ref, v_ref = numpy_layer(kind, p, s, xi, recurrent=recurrent,
                             k=n_pre / 0.5)   # the default N_in / c_init
  assert 0.02 < z_ref.mean() < 0.6  # The test exercises spikes and resets.
  np.testing.assert_array_equal(np.asarray(z), z_ref)
  np.testing.assert_allclose(np.asarray(v), v_ref, rtol=1e-4, atol=1e-4)


def test_step_matches_run_layer():
  # The projected-trace scan equals stepping with the raw presynaptic trace.
  cell = cells.Cell(kind='dgn', w_gain=2.0, c_init=0.5)
  s, xi = _inputs(1)
  p = cell.init_params(jax.random.key(2), N_IN, N_OUT)
  st = cell.init_state(N_OUT)
  zs = []
  for t in range(T):
    st, (z, _) = cell.step(p, st, jnp.asarray(s[t]), jnp.asarray(xi[t]))
    zs.append(np.asarray(z))
  z_scan, _ = cells.run_layer(cell, p, jnp.asarray(s), jnp.asarray(xi))
  np.testing.assert_array_equal(np.stack(zs), np.asarray(z_scan))


def test_dgn_with_zero_coupling_is_lif_exactly():
  s, xi = _inputs(2)
  lif = cells.Cell(kind='lif', w_gain=2.0)
  dgn = cells.Cell(kind='dgn', w_gain=2.0)
  p = lif.init_params(jax.random.key(3), N_IN, N_OUT)
  z_l, v_l = cells.run_layer(lif, p, jnp.asarray(s), jnp.asarray(xi))
  c_zero = cells.inverse_conductance(jnp.zeros((N_IN, N_OUT)))  # -inf
  z_d, v_d = cells.run_layer(dgn, {**p, 'c_raw': c_zero},
                             jnp.asarray(s), jnp.asarray(xi))
  assert float(z_l.mean()) > 0.02
  np.testing.assert_array_equal(np.asarray(z_d), np.asarray(z_l))
  np.testing.assert_array_equal(np.asarray(v_d), np.asarray(v_l))


def test_dgn_gate_closes_with_input_activity():
  # rho = 1 - g_l dt - dt D C falls as presynaptic activity grows (C > 0).
  cell = cells.Cell(kind='dgn', c_init=0.5)
  p = cell.init_params(jax.random.key(0), N_IN, N_OUT)
  decays = []
  for rate in (0.0, 0.1, 0.5):
    st = cell.init_state(N_OUT)
    for _ in range(50):
      st, _ = cell.step(p, st, jnp.full((N_IN,), rate))
    decays.append(np.asarray(cell.decay(st.dc)).mean())
  assert decays[0] == pytest.approx(cell.beta)
  assert decays[0] > decays[1] > decays[2]


def test_conductance_is_nonnegative_softplus_with_exact_inverse():
  c_raw = jnp.linspace(-30.0, 30.0, 61)
  c = np.asarray(cells.conductance(c_raw))
  assert np.all(c >= 0) and np.all(np.diff(c) > 0)
  np.testing.assert_allclose(c, np.logaddexp(0.0, np.asarray(c_raw)),
                             rtol=1e-6)
  want = np.array([1e-6, 1e-3, 0.01, 0.5, 3.0])
  for k in (1.0, 300.0):
    back = cells.conductance(cells.inverse_conductance(want, k), k)
    np.testing.assert_allclose(np.asarray(back), want, rtol=1e-4)
    assert float(cells.conductance(cells.inverse_conductance(0.0, k),
                                   k)) == 0.0
  # Sharpness k: C = softplus(k c_raw) / k, C = c_raw well above 1 / k.
  np.testing.assert_allclose(
      np.asarray(cells.conductance(c_raw, 300.0)),
      np.logaddexp(0.0, 300.0 * np.asarray(c_raw, np.float64)) / 300.0,
      rtol=1e-5, atol=1e-12)
  # Initial couplings: C in (0, 2 c_init / N_in], mean c_init / N_in.
  # The default k is N_in / c_init (250 here); k = 1 as well.
  for k in (None, 1.0):
    cell = cells.Cell(kind='dgn', c_init=0.2, c_sharpness=k)
    assert cell.sharpness(50) == (k or 50 / 0.2)
    p = cell.init_params(jax.random.key(0), 50, 400)
    c0 = np.asarray(cells.conductance(p['c_raw'], cell.sharpness(50)))
    assert np.isfinite(np.asarray(p['c_raw'])).all()
    assert c0.min() > 0 and c0.max() <= 2 * 0.2 / 50 * (1 + 1e-5)
    assert c0.mean() == pytest.approx(0.2 / 50, rel=0.02)
  with pytest.raises(ValueError, match='c_init > 0'):
    cells.Cell(kind='dgn', c_init=0.0)


def test_gate_is_the_paper_update_above_the_floor_and_smooth_below():
  floor = 0.05
  x = jnp.linspace(-1.0, 1.0, 2001)
  phi = np.asarray(cells.gate(x, floor))
  np.testing.assert_allclose(phi, numpy_gate(np.asarray(x), floor),
                             rtol=1e-6, atol=1e-12)
  above = np.asarray(x) >= floor
  np.testing.assert_array_equal(phi[above], np.asarray(x)[above])
  assert np.all(phi > 0) and np.all(np.diff(phi) > 0)  # Valid, increasing.
  g = np.asarray(jax.vmap(jax.grad(lambda v: cells.gate(v, floor)))(x))
  np.testing.assert_allclose(g[above], 1.0)
  np.testing.assert_allclose(g[~above], (phi[~above] / floor)**2, rtol=1e-5)
  assert np.all(g > 0) and np.isfinite(g).all()
  # C^1 at the floor: value and slope match from both sides.
  eps = 1e-4
  lo, hi = (float(cells.gate(jnp.float32(floor + d), floor))
            for d in (-eps, eps))
  assert hi - lo == pytest.approx(2 * eps, rel=1e-2)


def test_conductance_gradient_does_not_die_where_a_clip_would_pin_rho():
  # A strong input drives 1 - g_l dt - dt D C far below 0: clip(., 0, 1)
  # gives d V / d C = 0 there; the gate keeps it strictly nonzero.
  cell = cells.Cell(kind='dgn', w_gain=1.0)
  s = jnp.ones((20, N_IN))
  p = cell.init_params(jax.random.key(4), N_IN, N_OUT)
  p = {**p, 'c_raw': cells.inverse_conductance(jnp.full((N_IN, N_OUT), 0.5),
                                              cell.sharpness(N_IN))}

  def v_last(c_raw):
    _, v = cells.run_layer(cell, {**p, 'c_raw': c_raw}, s)
    return v[-1].sum()

  st = cell.init_state(N_OUT)
  for t in range(20):
    st, _ = cell.step(p, st, s[t])
  arg = 1 - cell.g_l * cell.dt - cell.dt * np.asarray(st.dc)
  assert arg.max() < -1.0  # A hard clip would pin rho at 0 here.
  g = np.asarray(jax.grad(v_last)(p['c_raw']))
  assert np.isfinite(g).all() and np.abs(g).min() > 0


@pytest.mark.parametrize('kind', ['fast_sigmoid', 'arctan'])
def test_surrogate_used_in_backward_forward_exact(kind):
  # One step from rest: V = dt * s W, z = H(V - theta). Forward is the exact
  # step; d z_j / d W_ij = surrogate'(V_j - theta) * dt * s_i.
  cell = cells.Cell(kind='lif', surrogate=kind, surrogate_scale=5.0)
  rng = np.random.default_rng(0)
  s = jnp.asarray((rng.random(N_IN) < 0.5).astype(np.float32))
  w = jnp.asarray(rng.normal(size=(N_IN, N_OUT)).astype(np.float32))

  def z_of(w):
    _, (z, v) = cell.step({'w': w}, cell.init_state(N_OUT), s)
    return z, v

  z, v = z_of(w)
  np.testing.assert_array_equal(np.asarray(z),
                                (np.asarray(v) > cell.theta).astype(float))
  g = jax.jacrev(lambda w: z_of(w)[0])(w)  # [N_OUT, N_IN, N_OUT]
  sg = surrogate.surrogate_grad(v - cell.theta, kind, 5.0)
  for j in range(N_OUT):
    np.testing.assert_allclose(np.asarray(g[j, :, j]),
                               np.asarray(sg[j] * cell.dt * s), rtol=1e-5)


def test_network_shapes_readouts_and_current_noise():
  x = (jax.random.uniform(jax.random.key(0), (30, 8)) < 0.2).astype(
      jnp.float32)
  for readout in network.READOUTS:
    # Two recurrent layers for one readout; the readouts differ only after
    # the last layer, so the other two get one feedforward layer.
    hidden = (16, 12) if readout == network.READOUTS[0] else (16,)
    net = network.SNN(cells.Cell(kind='dgn', w_gain=3.0), hidden, 5,
                      recurrent=len(hidden) == 2, readout=readout)
    p = net.init(jax.random.key(1), 8)
    assert p['layers'][0]['w'].shape == (8 + 16 * net.recurrent, 16)
    def loss(p):
      logits, aux = net.apply(p, x, with_aux=True)
      return logits.sum(), (logits, aux)
    g, (logits, aux) = jax.jit(jax.grad(loss, has_aux=True))(p)
    assert logits.shape == (5,) and aux['v'].shape == (30, 16)
    assert all(np.isfinite(np.asarray(a)).all() for a in jax.tree.leaves(g))
  net = network.SNN(cells.Cell(kind='lif', w_gain=3.0), (16,), 5)
  p = net.init(jax.random.key(1), 8)
  apply = jax.jit(lambda p, noise: net.apply(p, x, key=jax.random.key(2),
                                             current_noise=noise))
  clean = jax.jit(net.apply)(p, x)
  np.testing.assert_array_equal(np.asarray(apply(p, 0.0)), np.asarray(clean))
  assert not np.allclose(np.asarray(apply(p, 0.5)), np.asarray(clean))


def test_bad_cell_config_errors():
  with pytest.raises(ValueError, match='cell kind'):
    cells.Cell(kind='izhikevich')
  with pytest.raises(ValueError, match='surrogate'):
    cells.Cell(surrogate='boxcar')
  with pytest.raises(ValueError, match='g_l'):
    cells.Cell(g_l=2.0)
  with pytest.raises(ValueError, match='rho_floor'):
    cells.Cell(rho_floor=0.0)
  with pytest.raises(ValueError, match='readout'):
    network.SNN(cells.Cell(), (4,), 2, readout='last')
