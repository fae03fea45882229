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


class ActorCritic(nn.Module):
  """Separate actor and critic MLPs (PPO).

  Discrete: returns (logits [A], value). Continuous: returns
  ((mean [A], log_std [A]), value) with a state-independent log_std.
  """

  num_actions: int
  discrete: bool
  hidden: Sequence[int] = (64, 64)
  activation: str = 'tanh'

  @nn.compact
  def __call__(self, obs: jax.Array):
    value = MLP(self.hidden, 1, self.activation, head_scale=1.0)(obs)[..., 0]
    out = MLP(self.hidden, self.num_actions, self.activation,
              head_scale=0.01)(obs)
    if self.discrete:
      return out, value
    log_std = self.param('log_std', nn.initializers.zeros, (self.num_actions,))
    return (out, jnp.broadcast_to(log_std, out.shape)), value
