"""The positive side of the DCD theorems as explicit weights (arXiv 2603.01959).

A DCD layer on one-hot tokens is a lookup: lambda(x) = exp(m_x + i phi_x) and
B(x) = b_x for each token x, so "weights" here are the per-token tables
(m, phi, b), run through the same recurrence `dcd.diag_scan` as the trained
layers. Both constructions use the telescoping choice B(x) = lambda(x) - 1
with h_0 = 0, so h_t = prod_{s<=t} lambda(x_s) - 1: no start token needed.

* One layer, any finite abelian group G (Thm: abelian groups are tracked by
  one layer). G's characters chi (its |G| one-dimensional unitary
  representations) are unit complex numbers with chi(ab) = chi(a) chi(b);
  one channel per character with lambda_chi(x) = chi(x) gives
  h_t + 1 = chi(y_t), and the decoder argmax_g Re sum_chi conj(chi(g))
  (h_t + 1)_chi = y_t by character orthogonality (the sum is |G| at g = y_t
  and 0 elsewhere). The characters are computed from the Cayley table by
  diagonalising the regular representation, so this works for any abelian
  table (Z_n for any n, products).
* Two layers, S3 = Z3 semidirect Z2. Write every element as r^a s^b (r of
  order 3, s of order 2, s r s^-1 = r^-1), the prefix product as
  P_t = r^A_t s^B_t; then P_t = P_{t-1} (r^a s^b) = r^(A + (-1)^B a) s^(B+b)
  with B = B_{t-1}. Layer 1 tracks the parity B_t (lambda = (-1)^b); its
  per-position decoder emits the token (a_t, B_{t-1} = B_t xor b_t); layer 2
  rotates by lambda = exp(2 pi i (-1)^B_{t-1} a_t / 3) and tracks A_t; the
  final decoder reads (A_t, B_t).

`abelian_seq_model` puts the one-layer construction into the weights of the
trained module `dcd.SeqModel` itself (|lambda| = 1 is in its range).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from iclrjax.ssm import dcd
from iclrjax.ssm import groups


def characters(group: groups.Group) -> np.ndarray:
  """[|G|, |G|] complex: row k is the k-th character chi_k(g) of an abelian
  group (from the joint eigenvectors of the regular representation)."""
  if not group.is_abelian:
    raise ValueError(f'{group.name} is not abelian: its characters do not '
                     'separate its elements')
  n = group.order
  # Right-regular representation: R_g e_h = e_{h g}.
  R = np.zeros((n, n, n))
  R[np.arange(n)[:, None], group.table, np.arange(n)[None, :]] = 1.0
  rng = np.random.default_rng(0)
  c = rng.normal(size=n) + 1j * rng.normal(size=n)
  _, vecs = np.linalg.eig(np.tensordot(c, R, axes=1))
  # chi(g) = eigenvalue of R_g on each joint eigenvector.
  chi = np.einsum('ik,gij,jk->kg', vecs.conj(), R, vecs) / np.sum(
      np.abs(vecs) ** 2, 0)[:, None]
  return chi / np.abs(chi)


def token_layer(log_mag: jax.Array, phase: jax.Array, b: jax.Array,
                tokens: jax.Array, method: str = 'associative') -> jax.Array:
  """A DCD layer on one-hot tokens: h [T, N] from per-token tables [V, N]."""
  lam = jnp.exp(log_mag[tokens] + 1j * phase[tokens])
  return dcd.diag_scan(lam, b[tokens], method=method)


def abelian_one_layer(group: groups.Group):
  """(weights, track): one-layer DCD weights for an abelian group and a
  function x [T] -> predicted prefix products [T]."""
  chi = characters(group)                               # [K, |G|]
  lam = chi.T                                           # token g -> [K]
  weights = {'log_mag': np.zeros(lam.shape, np.float32),
             'phase': np.angle(lam).astype(np.float32),
             'b': (lam - 1.0).astype(np.complex64)}
  decoder = jnp.asarray(chi.conj().T, jnp.complex64)   # [|G|, K]

  def track(x: jax.Array) -> jax.Array:
    h = token_layer(jnp.asarray(weights['log_mag']),
                    jnp.asarray(weights['phase']), jnp.asarray(weights['b']),
                    x)
    scores = jnp.real((h + 1.0) @ decoder.T)           # [T, |G|]
    return jnp.argmax(scores, -1)

  return weights, track


# gelu is increasing on [-0.75, inf): decoder scores in [-1, 1] shifted by
# this offset keep their order through the hidden layer.
_GELU_OFFSET = 4.0
# Output scale of the decoder: the correct class scores ~_OUT_SCALE, the
# residual one-hot of the input token adds at most 1 to a wrong class.
_OUT_SCALE = 10.0


def abelian_seq_model(group: groups.Group, scan: str = 'associative'
                      ) -> tuple[dcd.SeqModel, dict]:
  """(model, params): the trained module `dcd.SeqModel` (1 'dcd' layer,
  multiplicative mode) with its weights set from the character construction.

  Width, state and hidden size are |G|. The embedding is one-hot; the layer
  has W_m = 0 and c_m = 0 (|lambda| = exp(-0) = 1 exactly), phase table
  W_p[g, k] = arg chi_k(g), h_0 = 1, so h_t = chi(y_t); the decoder's hidden
  unit g computes (1/|G|) Re sum_k conj(chi_k(g)) h_t,k (1 at g = y_t, 0
  elsewhere) shifted into gelu's increasing range, and the readout picks it.
  """
  chi = characters(group)                               # [K = |G|, |G|]
  n = group.order
  model = dcd.make_model('dcd', 1, n, width=n, state=n, hidden=n,
                         init_magnitude=1.0, input_mode='multiplicative',
                         scan=scan)
  eye = np.eye(n, dtype=np.float32)
  zeros = np.zeros((n, n), np.float32)
  dec_in = np.concatenate([chi.real, chi.imag, zeros], 0) / n  # [3n, n]
  layer = {
      'mag': {'kernel': zeros, 'bias': np.zeros(n, np.float32)},
      'phase': {'kernel': np.angle(chi.T).astype(np.float32),
                'bias': np.zeros(n, np.float32)},
      'h0_re': np.ones(n, np.float32), 'h0_im': np.zeros(n, np.float32),
      'dec_in': {'kernel': dec_in.astype(np.float32),
                 'bias': np.full(n, _GELU_OFFSET, np.float32)},
      'dec_out': {'kernel': _OUT_SCALE * eye,
                  'bias': np.full(n, -_OUT_SCALE * float(
                      jax.nn.gelu(_GELU_OFFSET)), np.float32)},
  }
  params = {'params': {'embed': {'embedding': eye}, 'layer0': layer,
                       'readout': {'kernel': eye,
                                   'bias': np.zeros(n, np.float32)}}}
  return model, jax.tree.map(jnp.asarray, params)


def s3_structure(group: groups.Group) -> tuple[np.ndarray, np.ndarray,
                                              np.ndarray]:
  """(a, b, index): element g = r^a[g] s^b[g], and index[a, b] the element."""
  if group.order != 6 or group.is_abelian:
    raise ValueError(f'{group.name} is not S3')
  orders = groups.element_orders(group)
  r = int(np.flatnonzero(orders == 3)[0])
  s = int(np.flatnonzero(orders == 2)[0])
  T = group.table
  r_pow = [0, r, int(T[r, r])]
  index = np.zeros((3, 2), np.int32)
  for a in range(3):
    index[a, 0] = r_pow[a]
    index[a, 1] = T[r_pow[a], s]
  a_of, b_of = np.zeros(6, np.int32), np.zeros(6, np.int32)
  for a in range(3):
    for b in range(2):
      a_of[index[a, b]], b_of[index[a, b]] = a, b
  assert len(set(index.ravel().tolist())) == 6
  return a_of, b_of, index


def s3_two_layer(group: groups.Group):
  """(weights, track) for the two-layer S3 construction (module docstring)."""
  a_of, b_of, index = s3_structure(group)
  lam1 = np.where(b_of == 1, -1.0, 1.0).astype(np.complex64)[:, None]
  # Layer-2 tokens z = a + 3 B' (B' = parity of the previous prefix).
  z_a, z_b = np.arange(6) % 3, np.arange(6) // 3
  lam2 = np.exp(2j * np.pi * np.where(z_b == 1, -1, 1) * z_a / 3)[:, None]
  weights = {
      'layer1': {'log_mag': np.zeros((6, 1), np.float32),
                 'phase': np.angle(lam1).astype(np.float32),
                 'b': (lam1 - 1).astype(np.complex64)},
      'layer2': {'log_mag': np.zeros((6, 1), np.float32),
                 'phase': np.angle(lam2).astype(np.float32),
                 'b': (lam2 - 1).astype(np.complex64)},
  }
  a_tab, b_tab = jnp.asarray(a_of), jnp.asarray(b_of)
  index = jnp.asarray(index)
  w = jax.tree.map(jnp.asarray, weights)

  def track(x: jax.Array) -> jax.Array:
    h1 = token_layer(**w['layer1'], tokens=x)[:, 0]
    B = (jnp.real(h1 + 1.0) < 0).astype(jnp.int32)           # parity B_t
    z = a_tab[x] + 3 * (B ^ b_tab[x])                          # (a_t, B_t-1)
    h2 = token_layer(**w['layer2'], tokens=z)[:, 0]
    A = jnp.round(jnp.angle(h2 + 1.0) * 3 / (2 * np.pi)).astype(jnp.int32) % 3
    return index[A, B]

  return weights, track
