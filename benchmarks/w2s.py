"""The W2S digits student's training step under the seeds' vmap: our
im2col 3x3 convolution and reshape max-pool (`experiments.w2s.ConvNet`)
beside flax's `nn.Conv` + `nn.max_pool` (the same network and parameter
shapes), one process, median of repeats.

  python -m benchmarks.w2s

Both compute the same function (checked first); the step is the gradient of
the cross-entropy for a [S, 64, 12, 12, 3] batch, S seeds vmapped.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from benchmarks import timing
from experiments import w2s as exp


class FlaxConvNet(nn.Module):
  """`exp.ConvNet` with flax's convolution and pooling."""
  widths: tuple[int, ...]
  hidden: int
  num_classes: int

  @nn.compact
  def __call__(self, x):
    for i, w in enumerate(self.widths):
      x = nn.Conv(w, (3, 3), name=f'Conv3x3_{i}')(x)
      x = nn.max_pool(nn.relu(x), (2, 2), (2, 2))
    h = nn.relu(nn.Dense(self.hidden, name='Dense_0')(
        x.reshape(x.shape[0], -1)))
    return nn.Dense(self.num_classes, name='Dense_1')(h)


def main() -> None:
  widths, hidden = (16, 32), 64
  ours, peer = exp.ConvNet(widths, hidden, 10), FlaxConvNet(widths, hidden, 10)
  print(f'jax {jax.__version__}, flax {timing.version("flax")}, '
        f'{jax.devices()[0].platform} x{jax.device_count()}, '
        f'{timing.num_cpus()} CPUs')
  for seeds in (1, 5, 10):
    keys = jax.random.split(jax.random.PRNGKey(0), seeds)
    params = jax.vmap(lambda k: ours.init(k, jnp.zeros((1, 12, 12, 3))))(keys)
    x = jax.random.normal(keys[0], (seeds, 64, 12, 12, 3))
    y = jnp.arange(64) % 10
    out_o = jax.vmap(ours.apply)(params, x)
    out_p = jax.vmap(peer.apply)(params, x)
    np.testing.assert_allclose(out_o, out_p, atol=1e-4)
    times = {}
    for name, net in (('ours', ours), ('flax', peer)):
      ce = optax.softmax_cross_entropy_with_integer_labels
      loss = lambda p, xb, net=net: ce(net.apply(p, xb), y).mean()
      grad = jax.jit(jax.vmap(jax.grad(loss)))
      call = lambda grad=grad: jax.block_until_ready(grad(params, x))
      times[name], n = timing.median_time(call, repeats=20, budget_s=10.0,
                                          min_calls=5)
    print(f'seeds {seeds:2d}: ours {times["ours"] * 1e3:7.2f} ms, flax '
          f'{times["flax"] * 1e3:7.2f} ms per step; flax / ours = '
          f'{times["flax"] / times["ours"]:.2f}x (median of >= {n} calls)')


if __name__ == '__main__':
  main()
