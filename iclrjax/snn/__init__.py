"""Spiking neural networks (LIF, PLIF, ALIF, DGN cells) trained by BPTT.

- Dynamic Gated Neurons for spiking neural networks (DGN), arXiv
  2509.03281: `dgn` (networks from a config, the stochastic-stability
  analysis) on `cells` (the neuron updates as `lax.scan` steps) and
  `network` (stacked spiking layers and a readout).

Shared pieces: `surrogate` (surrogate-gradient spikes), `perturb`
(insert / delete / jitter spikes at evaluation) and `datasets` (spiking
MNIST-1D and synthetic digits generated offline; SHD and N-TIDIGITS from
local files; MNIST-1D and SHD need the `snn` extra).

Example:
    ```python
    import jax
    from iclrjax import snn

    net = snn.SNN(snn.Cell(kind='dgn'), hidden=(32,), num_classes=10)
    params = net.init(jax.random.PRNGKey(0), num_inputs=20)
    spikes = jax.random.bernoulli(jax.random.PRNGKey(1), 0.1, (50, 20))
    logits = net.apply(params, spikes)          # [10]; one example [T, C]
    grads = jax.grad(lambda p: net.apply(p, spikes)[3])(params)  # BPTT
    noisy = snn.jitter_spikes(jax.random.PRNGKey(2), spikes, 1.0)
    print(logits.shape, net.apply(params, noisy).shape)
    ```
"""

from iclrjax.snn import cells
from iclrjax.snn import datasets
from iclrjax.snn import dgn
from iclrjax.snn import network
from iclrjax.snn import perturb
from iclrjax.snn import surrogate
from iclrjax.snn.cells import Cell, State, run_layer
from iclrjax.snn.datasets import SpikeData
from iclrjax.snn.dgn import (layer_noise_stats, make_cell, make_network,
                             single_neuron_stats, stability,
                             stationary_variance)
from iclrjax.snn.network import SNN
from iclrjax.snn.perturb import delete_spikes, insert_spikes, jitter_spikes
from iclrjax.snn.surrogate import spike, surrogate_grad

__all__ = [
    'cells', 'datasets', 'dgn', 'network', 'perturb', 'surrogate',
    'Cell', 'State', 'run_layer', 'SNN', 'spike', 'surrogate_grad',
    'make_cell', 'make_network', 'stability', 'single_neuron_stats',
    'stationary_variance', 'layer_noise_stats',
    'insert_spikes', 'delete_spikes', 'jitter_spikes', 'SpikeData',
]
