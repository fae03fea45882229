"""Input-dependent complex diagonal (DCD) SSMs (arXiv 2603.01959).

One DCD layer maps inputs u_1..u_T to states

  h_t = diag(lambda(u_t)) h_{t-1} + B(u_t),    lambda(u) in C^N, |lambda| <= 1,

the paper's diagonal recurrence. Here

  |lambda(u)| = exp(-|W_m u + c_m|),    arg lambda(u) = W_p u + c_p,

so |lambda| lies in (0, 1] and reaches 1 (the unit-modulus transitions of
the abelian construction, lambda = chi(x)) at W_m u + c_m = 0, where
d|lambda|/dz = -sign(z) |lambda| still has modulus 1: the gradient does not
vanish at the unit circle (exp(-softplus(z)) would reach 1 only as z -> -inf,
with the gradient dying on the way). W_m starts at 0, so every channel starts
at |lambda| = init_magnitude. A per-position MLP decoder reads
[Re h_t, Im h_t, u_t] (the paper's "universal decoder"; here with a residual
so layers stack).

Two input modes, each creating only the parameters it uses:
  'additive'        B(u) = linear(u) (complex), h_0 = 0;
  'multiplicative'  B = 0 and a learned initial state h_0 (init 1), so
                    h_t = prod_{s<=t} lambda(u_s) h_0, the form of the abelian
                    construction (no B parameters exist in this mode).

The recurrence is a first-order linear scan, computed with
`jax.lax.associative_scan` on the pairs (a, b) under

  (a1, b1) o (a2, b2) = (a2 a1, a2 b1 + b2)                          (S5)

in O(log T) depth; `diag_scan(..., method='sequential')` is the `lax.scan`
reference (faster on a 2-core CPU, benchmarks/ssm.py). Baselines with the
same stack: an input-dependent non-negative real diagonal (Mamba-like:
lambda in (0, 1]), an input-independent complex diagonal (LRU/S5-like:
lambda a parameter), and a GRU.

The paper's theorems: one DCD layer with a universal decoder tracks every
abelian group and no non-abelian group at finite precision; k layers track a
group iff it has a subnormal series of length <= k with abelian factors.
`ssm.construct` builds the positive side explicitly, as per-token tables and
as the weights of this module (`construct.abelian_seq_model`).
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

MODELS = ('dcd', 'real', 'lti', 'gru')
INPUT_MODES = ('additive', 'multiplicative')
SCANS = ('associative', 'sequential')


def diag_scan(a: jax.Array, b: jax.Array, h0: jax.Array | None = None,
              method: str = 'associative') -> jax.Array:
  """h_t = a_t * h_{t-1} + b_t over the leading (time) axis; h_0 = h0 or 0.

  a, b: [T, ...] (complex or real, broadcastable); a, b and h0 are promoted
  to their common dtype (a complex a with a real b gives complex h).
  Returns h [T, ...].
  """
  dtype = jnp.result_type(*(x for x in (a, b, h0) if x is not None))
  a, b = jnp.broadcast_arrays(jnp.asarray(a, dtype), jnp.asarray(b, dtype))
  if h0 is not None:
    b = b.at[0].add(a[0] * h0)
  if method == 'associative':
    def combine(x, y):
      a1, b1 = x
      a2, b2 = y
      return a2 * a1, a2 * b1 + b2
    return jax.lax.associative_scan(combine, (a, b))[1]
  if method == 'sequential':
    def body(h, ab):
      h = ab[0] * h + ab[1]
      return h, h
    return jax.lax.scan(body, jnp.zeros_like(b[0]), (a, b))[1]
  raise ValueError(f"method must be 'associative' or 'sequential', got "
                   f'{method!r}')


def magnitude(z: jax.Array) -> jax.Array:
  """|lambda| = exp(-|z|) in (0, 1]: 1 at z = 0, |d|lambda|/dz| = |lambda|.

  At z = 0 the gradient is that of the z >= 0 branch, -1 (jnp.abs would give
  sign(0) = 0 there: a dead gradient exactly on the unit circle).
  """
  return jnp.exp(-jnp.where(z >= 0, z, -z))


def magnitude_bias(r: float) -> float:
  """c with magnitude(c) = r, r in (0, 1] (the magnitude-bias init)."""
  if not 0.0 < r <= 1.0:
    raise ValueError(f'init_magnitude must lie in (0, 1], got {r}')
  return float(-np.log(r))


class DiagLayer(nn.Module):
  """One diagonal SSM layer + per-position MLP decoder (residual).

  kind: 'dcd' (input-dependent complex), 'real' (input-dependent, lambda in
  (0, 1]), 'lti' (input-independent complex). input_mode: see the module
  docstring. Parameters: 'mag' and 'phase' (Dense for dcd/real, vectors for
  lti; 'real' has no phase), 'b_re'/'b_im' (additive only), 'h0_re'/'h0_im'
  (multiplicative only; no 'h0_im' for 'real'), 'dec_in', 'dec_out'.
  """

  kind: str
  state: int
  hidden: int
  init_magnitude: float = 0.98
  scan: str = 'associative'
  input_mode: str = 'additive'

  def transitions(self, u: jax.Array) -> jax.Array:
    """lambda(u_t) [T, N]: complex for dcd/lti, real in (0, 1] for real."""
    N = self.state
    mag_bias = nn.initializers.constant(magnitude_bias(self.init_magnitude))
    if self.kind in ('dcd', 'real'):
      mag = magnitude(nn.Dense(N, kernel_init=nn.initializers.zeros,
                               bias_init=mag_bias, name='mag')(u))
    elif self.kind == 'lti':
      mag = magnitude(self.param('mag', mag_bias, (N,)))
    else:
      raise ValueError(f'kind must be dcd, real or lti, got {self.kind!r}')
    if self.kind == 'real':
      return jnp.broadcast_to(mag, (u.shape[0], N))
    phase_init = nn.initializers.uniform(2 * np.pi)
    if self.kind == 'dcd':
      phase = nn.Dense(N, bias_init=phase_init, name='phase')(u)
    else:
      phase = self.param('phase', phase_init, (N,))
    return jnp.broadcast_to(mag * jnp.exp(1j * phase), (u.shape[0], N))

  def states(self, u: jax.Array) -> jax.Array:
    """h [T, N] of the recurrence (module docstring)."""
    lam = self.transitions(u)
    N, real = self.state, self.kind == 'real'
    if self.input_mode == 'additive':
      b = nn.Dense(N, name='b_re')(u)
      if not real:
        b = b + 1j * nn.Dense(N, name='b_im')(u)
      return diag_scan(lam, b, method=self.scan)
    if self.input_mode == 'multiplicative':
      h0 = self.param('h0_re', nn.initializers.ones, (N,))
      if not real:
        h0 = h0 + 1j * self.param('h0_im', nn.initializers.zeros, (N,))
      return diag_scan(lam, jnp.zeros_like(lam * h0), h0, method=self.scan)
    raise ValueError(f'input_mode must be one of {INPUT_MODES}, got '
                     f'{self.input_mode!r}')

  @nn.compact
  def __call__(self, u: jax.Array) -> jax.Array:  # u [T, d]
    h = self.states(u)
    feats = [h.real, u] if self.kind == 'real' else [h.real, h.imag, u]
    z = nn.gelu(nn.Dense(self.hidden, name='dec_in')(jnp.concatenate(feats,
                                                                     -1)))
    return u + nn.Dense(u.shape[-1], name='dec_out')(z)


class SeqModel(nn.Module):
  """Token embedding, `depth` layers of `kind`, per-position readout."""

  kind: str
  depth: int
  num_tokens: int
  num_classes: int
  width: int = 64
  state: int = 32
  hidden: int = 128
  init_magnitude: float = 0.98
  scan: str = 'associative'
  input_mode: str = 'additive'

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:  # x [T] int -> [T, C]
    u = nn.Embed(self.num_tokens, self.width, name='embed')(x)
    for i in range(self.depth):
      if self.kind == 'gru':
        cell = nn.GRUCell(self.width, name=f'gru{i}')
        _, out = nn.RNN(cell, name=f'rnn{i}')(u[None], return_carry=True)
        u = u + out[0]
      else:
        u = DiagLayer(self.kind, self.state, self.hidden,
                      self.init_magnitude, self.scan, self.input_mode,
                      name=f'layer{i}')(u)
    # No normalisation between layers: a LayerNorm here kept a 1-layer DCD
    # at chance on Z6 (loss ln 6 after 1500 steps) where the plain residual
    # stack solves it in ~1000.
    return nn.Dense(self.num_classes, name='readout')(u)


def make_model(kind: str, depth: int, order: int, width: int = 64,
               state: int = 32, hidden: int = 128,
               init_magnitude: float = 0.98,
               input_mode: str = 'additive',
               scan: str = 'associative') -> SeqModel:
  """The model for a group of `order` elements (tokens = classes = order)."""
  if kind not in MODELS:
    raise ValueError(f'model must be one of {MODELS}, got {kind!r}')
  if scan not in SCANS:
    raise ValueError(f'scan must be one of {SCANS}, got {scan!r}')
  return SeqModel(kind, depth, order, order, width, state, hidden,
                  init_magnitude, scan, input_mode)


def per_position_accuracy(logits: jax.Array, y: jax.Array) -> jax.Array:
  """[..., T, C], [..., T] -> accuracy per position [T] (mean over the rest)."""
  hit = (jnp.argmax(logits, -1) == y).astype(jnp.float32)
  return hit.reshape(-1, hit.shape[-1]).mean(0)


def window_accuracies(acc_T: np.ndarray, window: int = 8
                      ) -> dict[str, float]:
  acc_T = np.asarray(acc_T)
  return {'all': float(acc_T.mean()), 'first': float(acc_T[:window].mean()),
          'last': float(acc_T[-window:].mean())}


__all__: Sequence[str] = ['INPUT_MODES', 'MODELS', 'SCANS', 'DiagLayer',
                          'SeqModel', 'diag_scan', 'magnitude',
                          'magnitude_bias', 'make_model',
                          'per_position_accuracy', 'window_accuracies']
