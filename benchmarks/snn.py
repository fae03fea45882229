"""BPTT step time of our LIF and DGN layers against spyx and snntorch LIF.

  python -m benchmarks.snn [--sizes=100x128,500x512,1000x1024] [--batch=16]
      [--repeats=7] [--rate=0.1] [--torch_threads=1,2] [--quick]

The task (the Open Neuromorphic benchmark shape): one Linear (no bias) + one
spiking layer, n_in = n_out = N neurons, a batch of 16 random input spike
trains (Bernoulli, `--rate` per step) of T steps, forward + backward by BPTT:
loss = sum of the output spikes, gradient w.r.t. the layer's weights. One
step is one fwd+bwd call on the whole batch. All rows run in one process on
the same inputs, one after another:

  ours LIF      `cells.run_layer(Cell('lif'), ...)` vmapped over the batch,
                `jax.jit(jax.grad(loss))` (fwd + bwd one compiled function);
  ours DGN      the same with Cell('dgn') (twice the weights: W and C);
  spyx LIF      `spyx.nn.Sequential(nnx.Linear, spyx.nn.LIF)` scanned over
                time by `spyx.nn.run` (time-major), split into
                (graphdef, params, rest) and `jax.jit(jax.grad(loss))` over the
                Params, as spyx's own `spyx.bench` does;
  snntorch LIF  `torch.nn.Linear` + `snn.Leaky`, a Python loop over time
                steps as in the snntorch tutorials, then `loss.backward()`;
                eager PyTorch (no torch.compile), one row per
                `torch.set_num_threads` value in `--torch_threads` (default:
                1 and the CPUs this process may use; JAX uses all of them).
                OMP_WAIT_POLICY defaults to PASSIVE here (set it to override):
                with libgomp's default spin-waiting, on a CPU shared with
                other jobs every torch op with 2 threads took ~15 ms (a
                scheduler slice; 16x512 @ 512x512: 15.5 ms vs 0.17 ms
                PASSIVE, loaded 2-core machine), 50-100x slower.

Every time is the median of `--repeats` calls after untimed warm-up calls
(at least one, which compiles the JAX functions, and at least 0.25 s),
ended by `block_until_ready` (JAX); PyTorch on CPU is synchronous. A layer
whose last warm-up call shows that `--repeats` calls would take over
`--row_budget_s` gets fewer (at least one; the `calls` column). The ratio is
time / ours-LIF time (> 1: slower than our LIF). `spk/step` is the mean
output spikes per neuron per step (one untimed forward), to show every layer
is active. It differs between them because the dynamics and the weight
initialisations do (ours W ~ N(0, 1/N) and the synaptic trace sums ~5 steps
of input; nnx.Linear lecun_normal; torch U(-1/sqrt(N), 1/sqrt(N))); the
layers are dense, so the time does not depend on it. Nothing here is
asserted.

Shared: N, T, batch, float32, beta = 0.9 (ours: 1 - g_l dt), threshold 1,
soft (subtractive) reset, Heaviside forward with the fast-sigmoid
(SuperSpike) surrogate 1 / (1 + 10 |v|)^2 backward (ours 'fast_sigmoid'
scale 10, spyx `superspike(k=10)`, snntorch `fast_sigmoid(slope=10)`).

What differs (deliberately left as each library does it):
  * Our layers have the DGN paper's synaptic trace D^t = alpha D^{t-1} + s^t
    (tau_syn = 5) before the membrane; spyx's and snntorch's LIF take the
    linear output directly as the input current (one state less).
  * Our layers do the input projection of all T steps as one matmul outside
    the scan; spyx (Linear inside the scanned Sequential) and snntorch (Linear
    in the time loop) do T small [batch, N] x [N, N] matmuls. This is part
    of what is measured.
  * The reset: ours and spyx subtract theta z^{t-1} with the gradient flowing
    through the spike; snntorch (reset_delay=True) detaches the reset signal.
    spyx's LIF emits H(V^{t-1} - theta) at step t (its output lags one step);
    ours and snntorch emit H(V^t - theta).
  * DGN also computes the conductance trace D^t C and the gated decay
    rho^t = phi(1 - g_l dt - dt D^t C) (`cells.gate`: the identity above
    rho_floor, a smooth positive tail below it; and its gradient w.r.t. C).
  * spyx's gradient also covers its scalar beta (an nnx.Param): O(batch N)
    per step against the O(batch N^2) matmul.
Each peer is optional: if its package is missing the row is skipped with a
message.
"""

from __future__ import annotations

import os

from absl import app
from absl import flags
import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import timing
from iclrjax.snn import cells

_SIZES = flags.DEFINE_list('sizes', ['100x128', '500x512', '1000x1024'],
                           'TxN: time steps x neurons (n_in = n_out = N).')
_BATCH = flags.DEFINE_integer('batch', 16, 'Examples per fwd+bwd step.')
_REPEATS = flags.DEFINE_integer('repeats', 7, 'Timed calls per layer.')
_RATE = flags.DEFINE_float('rate', 0.1, 'Input spike probability per step.')
_TORCH_THREADS = flags.DEFINE_list(
    'torch_threads', [], 'torch.set_num_threads values, one snntorch row '
    'each (default: 1 and the CPU count).')
_BUDGET = flags.DEFINE_float(
    'row_budget_s', 20.0, 'Fewer timed calls for a layer whose warm-up call '
    'shows --repeats would take longer than this.')
_QUICK = flags.DEFINE_bool('quick', False,
                           'Tiny run (20x32, 2 repeats) to check it works.')

_BETA = 0.9       # ours: 1 - g_l dt with g_l = 0.1, dt = 1
_SLOPE = 10.0     # fast-sigmoid / SuperSpike surrogate slope


def _ours(kind: str, x: np.ndarray, n: int):
  """(step, rate) for our layer; x [B, T, N] float32."""
  cell = cells.Cell(kind=kind, surrogate='fast_sigmoid',
                    surrogate_scale=_SLOPE)
  params = cell.init_params(jax.random.key(1), n, n)
  xs = jnp.asarray(x)

  def spikes(p, xs_):
    return jax.vmap(lambda s: cells.run_layer(cell, p, s)[0])(xs_)

  grad = jax.jit(jax.grad(lambda p, xs_: jnp.sum(spikes(p, xs_))))
  rate = float(jnp.mean(jax.jit(spikes)(params, xs)))
  return lambda: jax.block_until_ready(grad(params, xs)), rate


def _spyx(x: np.ndarray, n: int):
  """(step, rate) for Linear + spyx LIF; x [B, T, N] float32."""
  import spyx  # pylint: disable=g-import-not-at-top
  from flax import nnx  # pylint: disable=g-import-not-at-top
  rngs = nnx.Rngs(1)
  model = spyx.nn.Sequential(
      nnx.Linear(n, n, use_bias=False, rngs=rngs),
      spyx.nn.LIF((n,), beta=_BETA, threshold=1.0,
                  activation=spyx.axn.superspike(k=_SLOPE), rngs=rngs))
  graphdef, params, rest = nnx.split(model, nnx.Param, ...)
  xs = jnp.asarray(np.swapaxes(x, 0, 1))  # time-major [T, B, N]

  def spikes(p, xs_):
    out, _ = spyx.nn.run(nnx.merge(graphdef, p, rest), xs_)
    return out

  grad = jax.jit(jax.grad(lambda p, xs_: jnp.sum(spikes(p, xs_))))
  rate = float(jnp.mean(jax.jit(spikes)(params, xs)))
  return lambda: jax.block_until_ready(grad(params, xs)), rate


def _snntorch(x: np.ndarray, n: int, threads: int):
  """(step, rate) for torch Linear + snntorch Leaky; x [B, T, N] float32."""
  import snntorch  # pylint: disable=g-import-not-at-top
  from snntorch import surrogate  # pylint: disable=g-import-not-at-top
  import torch  # pylint: disable=g-import-not-at-top
  torch.set_num_threads(threads)
  torch.manual_seed(1)
  fc = torch.nn.Linear(n, n, bias=False)
  lif = snntorch.Leaky(beta=_BETA, threshold=1.0,
                       spike_grad=surrogate.fast_sigmoid(slope=_SLOPE))
  xs = torch.from_numpy(np.ascontiguousarray(np.swapaxes(x, 0, 1)))
  last = {}

  def step():
    fc.weight.grad = None
    mem = lif.reset_mem()
    total = 0.0
    for t in range(xs.shape[0]):
      spk, mem = lif(fc(xs[t]), mem)
      total = total + spk.sum()
    total.backward()
    last['spikes'] = float(total.detach())

  step()
  rate = last['spikes'] / x.size
  return step, rate


def main(argv):
  del argv
  # Before torch (libgomp) is loaded; see the module docstring.
  os.environ.setdefault('OMP_WAIT_POLICY', 'PASSIVE')
  sizes = ['20x32'] if _QUICK.value else _SIZES.value
  repeats = 2 if _QUICK.value else _REPEATS.value
  batch = _BATCH.value
  threads = timing.num_cpus()
  print(f'jax devices: {jax.devices()}')
  print('versions: ' + ', '.join(
      f'{p} {timing.version(p)}'
      for p in ('jax', 'jaxlib', 'flax', 'spyx', 'snntorch', 'torch')))

  peers = {}
  try:
    import spyx  # pylint: disable=g-import-not-at-top,unused-import
    peers['spyx LIF'] = _spyx
  except ImportError as e:
    print(f'spyx LIF skipped: spyx not importable ({e})')
  try:
    import snntorch  # pylint: disable=g-import-not-at-top,unused-import
    import torch  # pylint: disable=g-import-not-at-top
    del torch
    counts = sorted({int(t) for t in _TORCH_THREADS.value} or {1, threads})
    for c in counts:
      peers[f'snntorch LIF {c}t'] = (
          lambda x_, n_, c_=c: _snntorch(x_, n_, c_))
  except ImportError as e:
    print(f'snntorch LIF skipped: snntorch/torch not importable ({e})')
  print(f'batch {batch}, input rate {_RATE.value}, float32, median of '
        f'{repeats} fwd+bwd calls (warm-up/compile excluded), {threads} CPUs; '
        'snntorch: eager PyTorch, Nt = torch threads, OMP_WAIT_POLICY='
        f'{os.environ["OMP_WAIT_POLICY"]}')

  for size in sizes:
    t_steps, n = map(int, size.lower().split('x'))
    rng = np.random.default_rng(t_steps * 100_003 + n)
    x = (rng.random((batch, t_steps, n)) < _RATE.value).astype(np.float32)
    rows = []
    for label, make in [('ours LIF', lambda x_, n_: _ours('lif', x_, n_)),
                        ('ours DGN', lambda x_, n_: _ours('dgn', x_, n_)),
                        *peers.items()]:
      step, rate = make(x, n)
      t, calls = timing.median_time(step, repeats, _BUDGET.value)
      rows.append((label, t, rate, calls))
    ref = rows[0][1]
    print(f'\nT = {t_steps}, N = {n} (batch {batch})')
    print(f'{"layer":17s} {"ms/step":>9s} {"x ours LIF":>11s} '
          f'{"spk/step":>9s} {"calls":>6s}')
    for label, t, rate, calls in rows:
      print(f'{label:17s} {1e3 * t:9.2f} {t / ref:10.2f}x {rate:9.3f} '
            f'{calls:6d}')


if __name__ == '__main__':
  app.run(main)
