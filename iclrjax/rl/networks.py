"""Flax (linen) networks for the RL agents."""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

ACTIVATIONS = {'tanh': nn.tanh, 'relu': nn.relu}


class MLP(nn.Module):
  """Dense torso + linear head, orthogonal init (sqrt 2; head `head_scale`)."""

  hidden: Sequence[int]
  out: int
  activation: str = 'tanh'
  head_scale: float = 1.0

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    act = ACTIVATIONS[self.activation]
    for h in self.hidden:
      x = act(nn.Dense(h, kernel_init=nn.initializers.orthogonal(np.sqrt(2)),
                       bias_init=nn.initializers.zeros)(x))
    return nn.Dense(self.out,
                    kernel_init=nn.initializers.orthogonal(self.head_scale),
                    bias_init=nn.initializers.zeros)(x)


# (features, kernel, stride) per layer: the Nature-DQN CNN's first two
# layers (Mnih et al. 2015) at half width, for ~64 x 64 pixel observations.
DEFAULT_CONV = ((16, 8, 4), (32, 4, 2))


class PixelEncoder(nn.Module):
  """Reads a flat observation as image [H, W, C] (the first H W C entries)
  plus extra features (the rest): a ReLU CNN on the image, flattened, with
  the extra features appended. Any leading batch dimensions."""

  image_shape: tuple[int, ...]
  conv: Sequence[tuple[int, int, int]] = DEFAULT_CONV

  @nn.compact
  def __call__(self, obs: jax.Array) -> jax.Array:
    n = int(np.prod(self.image_shape))
    lead = obs.shape[:-1]
    x = obs[..., :n].reshape((-1,) + tuple(self.image_shape))
    for f, k, st in self.conv:
      x = nn.relu(nn.Conv(f, (k, k), (st, st), padding='VALID',
                          kernel_init=nn.initializers.orthogonal(np.sqrt(2)),
                          bias_init=nn.initializers.zeros)(x))
    x = x.reshape(lead + (-1,))
    return jnp.concatenate([x, obs[..., n:]], -1)


class ActorCritic(nn.Module):
  """Separate actor and critic MLPs (PPO); with `image_shape`, both read
  the features of one shared `PixelEncoder`.

  Discrete: returns (logits [A], value). Continuous: returns
  ((mean [A], log_std [A]), value) with a state-independent log_std.
  """

  num_actions: int
  discrete: bool
  hidden: Sequence[int] = (64, 64)
  activation: str = 'tanh'
  image_shape: tuple[int, ...] | None = None
  conv: Sequence[tuple[int, int, int]] = DEFAULT_CONV

  @nn.compact
  def __call__(self, obs: jax.Array):
    if self.image_shape is not None:
      obs = PixelEncoder(tuple(self.image_shape), tuple(
          tuple(layer) for layer in self.conv))(obs)
    value = MLP(self.hidden, 1, self.activation, head_scale=1.0)(obs)[..., 0]
    out = MLP(self.hidden, self.num_actions, self.activation,
              head_scale=0.01)(obs)
    if self.discrete:
      return out, value
    log_std = self.param('log_std', nn.initializers.zeros, (self.num_actions,))
    return (out, jnp.broadcast_to(log_std, out.shape)), value
