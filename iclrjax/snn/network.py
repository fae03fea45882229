"""Spiking networks: stacked (feedforward or recurrent) spiking layers and a
readout, run by BPTT over the whole sequence.

  spikes [T, C] -> layer 1 -> ... -> layer L -> readout -> logits [K]

Each spiking layer is `cells.run_layer` (one `lax.scan` over time; the input
projection of all steps is one matmul). The readout is a leaky integrator
U^t = beta_out U^{t-1} + z_L^t W_out + b_out with logits max_t U^t
('membrane_max', as in the paper's pilot setup) or mean_t U^t
('membrane_mean'), or a spiking output layer of the same cell type whose
spike counts are the logits ('spike_count').

Gaussian current noise of std `current_noise` (in units of the threshold) is
added to every spiking neuron's membrane at every step when a key is given:
the evaluation-time "current" perturbation.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from iclrjax.snn import cells

READOUTS = ('membrane_max', 'membrane_mean', 'spike_count')


@dataclasses.dataclass(frozen=True)
class SNN:
  """A spiking classifier (static structure; params are a pytree).

  Attributes:
    cell: the neuron type of every spiking layer.
    hidden: sizes of the spiking layers.
    num_classes: K.
    recurrent: whether spiking layers have recurrent weights.
    readout: one of READOUTS.
    readout_beta: decay of the leaky-integrator readout.
  """
  cell: cells.Cell
  hidden: tuple[int, ...]
  num_classes: int
  recurrent: bool = False
  readout: str = 'membrane_max'
  readout_beta: float = 0.9

  def __post_init__(self):
    if self.readout not in READOUTS:
      raise ValueError(f'readout must be one of {READOUTS}, got '
                       f'{self.readout!r}')
    if not self.hidden:
      raise ValueError('need at least one spiking layer (hidden=())')

  def init(self, key: jax.Array, num_inputs: int) -> dict[str, Any]:
    keys = jax.random.split(key, len(self.hidden) + 1)
    layers, n_in = [], num_inputs
    for k, n in zip(keys[:-1], self.hidden):
      n_pre = n_in + (n if self.recurrent else 0)
      layers.append(self.cell.init_params(k, n_pre, n))
      n_in = n
    if self.readout == 'spike_count':
      out = self.cell.init_params(keys[-1], n_in, self.num_classes)
    else:
      out = {'w': jax.random.normal(keys[-1], (n_in, self.num_classes))
                  / jnp.sqrt(n_in),
             'b': jnp.zeros((self.num_classes,))}
    return {'layers': layers, 'readout': out}

  def apply(self, params: dict[str, Any], spikes: jax.Array,
            key: jax.Array | None = None, current_noise: Any = 0.0,
            with_aux: bool = False):
    """One example: spikes [T, C] -> logits [K] (and aux if `with_aux`).

    aux: 'rates' (mean spikes per step of each layer, a list), 'v' and 'z'
    of the first spiking layer ([T, N]) for membrane-trace plots.
    """
    x = spikes.astype(jnp.float32)
    t_len = x.shape[0]
    keys = (jax.random.split(key, len(params['layers']) + 1)
            if key is not None else [None] * (len(params['layers']) + 1))
    rates, first = [], None
    for p, k in zip(params['layers'], keys):
      n = p['w'].shape[1]
      noise = (current_noise * jax.random.normal(k, (t_len, n))
               if k is not None else None)
      z, v = cells.run_layer(self.cell, p, x, noise, self.recurrent)
      rates.append(z.mean())
      if first is None:
        first = (z, v)
      x = z
    out = params['readout']
    if self.readout == 'spike_count':
      noise = (current_noise * jax.random.normal(
          keys[-1], (t_len, self.num_classes)) if keys[-1] is not None
               else None)
      z, _ = cells.run_layer(self.cell, out, x, noise)
      logits = z.sum(0)
    else:
      drive = x @ out['w'] + out['b']
      u = jax.lax.scan(lambda c, i: (self.readout_beta * c + i,) * 2,
                       jnp.zeros((self.num_classes,)), drive)[1]
      logits = u.max(0) if self.readout == 'membrane_max' else u.mean(0)
    if with_aux:
      return logits, {'rates': rates, 'z': first[0], 'v': first[1]}
    return logits
