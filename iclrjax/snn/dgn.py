"""Dynamic Gated Neuron (arXiv 2509.03281): networks from a config and the
stochastic-stability analysis, as pure functions (no I/O).

The cells are `snn.cells` (the DGN update of the paper's Sec. 3:
rho^t = phi(1 - g_l dt - dt D^t C), V^t = rho^t V^{t-1} + dt D^t W - theta
z^{t-1}); `make_cell` / `make_network` build them from the experiment's
config fields.

Stochastic stability (the paper's SDE analysis: dynamic conductance acts as
disturbance rejection). With Gaussian current noise xi^t ~ N(0, sigma^2) on
the membrane and no spikes, V^t = rho V^{t-1} + mu + xi^t is an AR(1)
process with stationary variance

  Var(V) = sigma^2 / (1 - rho^2)                     (`stationary_variance`)

where rho = beta = 1 - g_l dt for LIF and rho = beta - dt D C < beta for DGN
(C >= 0): the more presynaptic activity, the faster the leak and the less
noise the membrane keeps. Two measurements of it:

* `single_neuron_stats` / `stability`: one hand-set neuron with a constant
  conductance input, a check of the closed form (and, with spikes, of the
  direction at matched rate); not a property of a trained network.
* `matched_rate_noise_stats`: the first spiking layer of a *trained*
  network, driven by real input spike trains plus the same Gaussian current
  noise draws, with its input weights scaled by a gain found by bisection
  so that its mean firing rate is a target rate. Var(V) is over noise
  draws at fixed input (the noise the membrane keeps), averaged over time
  after a burn-in, neurons and examples. `without_conductance` gives the
  ablation C = 0 of a trained DGN layer (LIF dynamics with DGN's weights).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections

from iclrjax.snn import cells
from iclrjax.snn import network


def make_cell(kind: str, c: ml_collections.ConfigDict) -> cells.Cell:
  """A `cells.Cell` of `kind` with the neuron fields of config section `c`
  (dt, g_l, tau_syn, theta, surrogate, ...)."""
  return cells.Cell(kind=kind, dt=c.dt, g_l=c.g_l, tau_syn=c.tau_syn,
                    theta=c.theta, surrogate=c.surrogate,
                    surrogate_scale=c.surrogate_scale, w_gain=c.w_gain,
                    c_init=c.c_init, c_sharpness=c.c_sharpness,
                    rho_floor=c.rho_floor,
                    tau_adapt=c.tau_adapt, beta_adapt=c.beta_adapt)


def make_network(kind: str, num_classes: int,
                 c: ml_collections.ConfigDict) -> network.SNN:
  """The `network.SNN` of config section `c` (hidden, recurrent, readout)
  with cells `make_cell(kind, c)`."""
  return network.SNN(make_cell(kind, c), tuple(c.hidden), num_classes,
                     recurrent=c.recurrent, readout=c.readout,
                     readout_beta=c.readout_beta)


def stationary_variance(rho: Any, sigma: Any) -> Any:
  """sigma^2 / (1 - rho^2): stationary Var of V^t = rho V^{t-1} + xi^t."""
  return sigma**2 / (1.0 - rho**2)


# -- one hand-set neuron -------------------------------------------------------
def single_neuron_stats(cell: cells.Cell, w: jax.Array, c: jax.Array,
                        rate: float, sigma: float, num_pre: int, steps: int,
                        burn_in: int, key: jax.Array, trials: int
                        ) -> tuple[jax.Array, jax.Array]:
  """Mean firing rate and stationary Var(V) of one neuron.

  Input: `num_pre` presynaptic lines carrying a constant rate input
  (s_i^t = rate, the mean of Bernoulli(rate) spikes) with weights w and, for
  DGN, couplings C = c >= 0 (both uniform over lines), plus Gaussian current
  noise of std sigma. Var(V) is over time after burn-in, averaged over
  trials.
  """
  params = {'w': jnp.full((num_pre, 1), w)}
  if cell.kind == 'dgn':
    params['c_raw'] = cells.inverse_conductance(jnp.full((num_pre, 1), c),
                                                cell.sharpness(num_pre))
  if cell.kind == 'plif':
    params['a'] = jnp.full((1,), jnp.log(cell.beta / (1 - cell.beta)))
  spikes = jnp.full((steps, num_pre), rate)

  def trial(k):
    noise = sigma * jax.random.normal(k, (steps, 1))
    z, v = cells.run_layer(cell, params, spikes, noise)
    return z[burn_in:, 0].mean(), v[burn_in:, 0].var()

  r, var = jax.vmap(trial)(jax.random.split(key, trials))
  return r.mean(), var.mean()


def single_neuron_decay(cell: cells.Cell, c: float, rate: float,
                        num_pre: int) -> float:
  """The stationary decay of `single_neuron_stats`' neuron: beta for LIF,
  phi(beta - dt c num_pre rate / (1 - alpha_syn)) for DGN."""
  if cell.kind != 'dgn':
    return cell.beta
  trace = num_pre * rate / (1.0 - cell.alpha_syn)
  return float(cell.decay(jnp.float32(c * trace)))


def stability(c: ml_collections.ConfigDict, key: jax.Array) -> dict[str, Any]:
  """LIF vs DGN single-neuron variance at matched mean firing rate.

  `c.stability` sets the neuron (num_pre, input_rate, coupling), the noise,
  the target rate and the bisection over the input weight in [0, w_max].
  """
  s = c.stability
  out = {}
  for kind in ('lif', 'dgn'):
    cell = make_cell(kind, c)
    stats = jax.jit(lambda w, cell=cell: single_neuron_stats(
        cell, w, s.coupling, s.input_rate, s.noise, s.num_pre, s.steps,
        s.burn_in, key, s.trials))
    lo, hi = 0.0, s.w_max
    for _ in range(s.bisection_steps):  # Rate is increasing in w.
      mid = 0.5 * (lo + hi)
      if float(stats(mid)[0]) < s.target_rate:
        lo = mid
      else:
        hi = mid
    w = 0.5 * (lo + hi)
    rate, var = (float(v) for v in stats(w))
    out[kind] = {'w': w, 'rate': rate, 'var_v': var,
                 'decay': single_neuron_decay(cell, s.coupling, s.input_rate,
                                              s.num_pre)}
  return out


# -- trained layers --------------------------------------------------------------
def without_conductance(params: cells.Params) -> cells.Params:
  """A DGN layer's params with C = 0 (c_raw = -inf): LIF dynamics."""
  return {**params, 'c_raw': jnp.full_like(params['c_raw'], -jnp.inf)}


@functools.partial(jax.jit, static_argnames=('cell', 'repeats', 'burn_in',
                                             'recurrent'))
def layer_noise_stats(cell: cells.Cell, params: cells.Params,
                      x_BxTxC: jax.Array, sigma: float, key: jax.Array,
                      repeats: int, burn_in: int, recurrent: bool = False,
                      gain: Any = 1.0) -> dict[str, jax.Array]:
  """Firing rate, noise-driven Var(V) and mean decay of one spiking layer.

  Each of the B examples runs `repeats` times with independent Gaussian
  current noise of std sigma (the same draws for any params given the same
  key: common random numbers) and input weights W scaled by `gain`.

  Returns:
    'rate': mean spikes per neuron-step; 'var_v': Var over the repeats of
    V^t (unbiased), averaged over t >= burn_in, neurons and examples;
    'decay': mean membrane decay (DGN rho^t; LIF beta); all scalars over
    t >= burn_in.

  Jitted (cell, repeats, burn_in and recurrent static); inlined when called
  under an outer jit, as `matched_rate_noise_stats` does.
  """
  p = {**params, 'w': gain * params['w']}
  x = x_BxTxC.astype(jnp.float32)
  b, t_len = x.shape[0], x.shape[1]
  n = params['w'].shape[1]
  noise_BxRxTxN = sigma * jax.random.normal(key, (b, repeats, t_len, n))

  def one(xi, noise_RxTxN):
    z, v, rho = jax.vmap(lambda e: cells.run_layer(
        cell, p, xi, e, recurrent, with_decay=True))(noise_RxTxN)
    z, v, rho = (a[:, burn_in:] for a in (z, v, rho))
    return z.mean(), v.var(0, ddof=1).mean(), rho.mean()

  rate, var, decay = jax.vmap(one)(x, noise_BxRxTxN)
  return {'rate': rate.mean(), 'var_v': var.mean(), 'decay': decay.mean()}


def matched_rate_noise_stats(cell: cells.Cell, params: cells.Params,
                             x_BxTxC: jax.Array, sigma: float,
                             key: jax.Array, target_rate: float,
                             repeats: int, burn_in: int,
                             recurrent: bool = False,
                             log2_gain_range: float = 4.0,
                             bisection_steps: int = 14
                             ) -> dict[str, jax.Array]:
  """`layer_noise_stats` at the input gain that fires at `target_rate`.

  Bisection on log2(gain) in [-log2_gain_range, log2_gain_range] (the rate
  grows with the gain of the input current), one `lax.fori_loop`: jit- and
  vmap-able over params (seeds). Returns `layer_noise_stats`' dict plus
  'gain'; 'rate' says how close the match came (a target outside the range
  ends at its edge).
  """

  def stats(log2_gain):
    return layer_noise_stats(cell, params, x_BxTxC, sigma, key, repeats,
                             burn_in, recurrent, 2.0**log2_gain)

  def body(_, lo_hi):
    lo, hi = lo_hi
    mid = 0.5 * (lo + hi)
    below = stats(mid)['rate'] < target_rate
    return jnp.where(below, mid, lo), jnp.where(below, hi, mid)

  lo, hi = jax.lax.fori_loop(
      0, bisection_steps, body,
      (jnp.float32(-log2_gain_range), jnp.float32(log2_gain_range)))
  log2_gain = 0.5 * (lo + hi)
  return {**stats(log2_gain), 'gain': 2.0**log2_gain}
