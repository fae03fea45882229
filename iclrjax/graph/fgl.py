"""Forest-based graph learning (FGL; "Forest-Based Graph Learning for
Semi-Supervised Node Classification", ICLR 2026, OpenReview 5asbtzIVpS).

Message passing as transport over a forest of K spanning trees sampled with
a bias toward homophilous edges, aggregated on each tree by a linear-time
two-pass filter that realises all node-pair interactions. The equations
below are our reconstruction from the paper's abstract and the Learnable
Tree Filter (Song et al., 2019) it builds on; check them against the PDF.

  * Homophily estimator (reconstruction): h_ij = p_i . p_j from a
    classifier's class probabilities p (the labelled nodes clamped to their
    one-hot labels); edge weight w_e = max(h_e ** beta, floor).
  * Trees: P(T) ∝ prod_{e in T} w_e, sampled exactly by Wilson's
    loop-erased random walk (`wilson_tree`, host code), or approximately by
    perturb-and-MAP: Kruskal's maximum spanning tree on log w_e + Gumbel
    noise (`kruskal_tree`, faster; a different distribution).
  * Tree filter (reconstruction of the paper's aggregator):
    y_i = (1 / z_i) sum_j prod_{e in path_T(i, j)} a_e x_j with z_i the same
    with x = 1. Two passes over a topological order (`tree_filter`):
    up   U_i = x_i + sum_{c in ch(i)} a_c U_c            (leaves -> roots)
    down R_i = (1 - a_i^2) U_i + a_i R_{p(i)}, R_root = U_root
    with a_i the affinity of edge (i, p(i)); its gradient is a custom VJP of
    two more passes (the filter is S(a) x with S symmetric), so training
    stores O(n) per tree, not the scan's carries.
  * Affinities are learned (reconstruction): a_e = a_max * sigmoid(b +
    c * logit(h_e) - ||P (z_i - z_p)||^2) on hidden features z, initialised
    at a_max * h_e (b = 0, c = 1, small P).
  * Forest output: mean of the K trees' filters; the classifier reads
    [z, forest(z)]. Estimator refinement: the trained model's probabilities
    give the next round's h, and new trees are drawn from it.

Trees are arrays: `parent[n]` (a root is its own parent; a spanning forest
of a disconnected graph has one root per component) and `order[n]`, a
topological order (every parent before its children).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from iclrjax.core import distributed

# -- tree samplers (host code: sequential algorithms) ------------------------


def _find(root: np.ndarray, i: int) -> int:
  while root[i] != i:
    root[i] = root[root[i]]
    i = root[i]
  return i


def components(n: int, edges: np.ndarray) -> np.ndarray:
  """Component id of every node (union-find over the edge list)."""
  root = np.arange(n)
  for i, j in edges:
    a, b = _find(root, i), _find(root, j)
    if a != b:
      root[a] = b
  return np.array([_find(root, i) for i in range(n)])


def rooted(n: int, tree_edges: np.ndarray, roots: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray]:
  """(parent, order) of a forest given by its edges, rooted at `roots`
  (one per component); order is breadth first."""
  nbrs = [[] for _ in range(n)]
  for i, j in tree_edges:
    nbrs[i].append(j)
    nbrs[j].append(i)
  parent = np.full(n, -1)
  parent[roots] = roots
  order = list(roots)
  head = 0
  while head < len(order):
    u = order[head]
    head += 1
    for v in nbrs[u]:
      if parent[v] < 0:
        parent[v] = u
        order.append(v)
  assert len(order) == n, 'tree_edges do not span the graph'
  return parent, np.asarray(order)


def order_of(parent: np.ndarray) -> np.ndarray:
  """A breadth-first topological order of the forest `parent`."""
  n = len(parent)
  roots = np.flatnonzero(parent == np.arange(n))
  edges = np.stack([np.arange(n), parent], 1)[parent != np.arange(n)]
  return rooted(n, edges, roots)[1]


def kruskal_tree(rng: np.random.Generator, n: int, edges: np.ndarray,
                 weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """Perturb-and-MAP spanning forest: the maximum spanning tree of
  log w_e + Gumbel noise (Kruskal). (parent, order), rooted at a random
  node of each component."""
  key = np.log(np.maximum(weights, 1e-300)) + rng.gumbel(size=len(edges))
  root = np.arange(n)
  picked = []
  for e in np.argsort(-key):
    i, j = edges[e]
    a, b = _find(root, i), _find(root, j)
    if a != b:
      root[a] = b
      picked.append(e)
  return rooted(n, edges[picked], _random_roots(rng, n, edges))


def _random_roots(rng: np.random.Generator, n: int, edges: np.ndarray
                  ) -> np.ndarray:
  comp = components(n, edges)
  perm = rng.permutation(n)
  _, first = np.unique(comp[perm], return_index=True)
  return perm[first]


def wilson_tree(rng: np.random.Generator, n: int, edges: np.ndarray,
                weights: np.ndarray, floor: float = 0.0
                ) -> tuple[np.ndarray, np.ndarray]:
  """A spanning forest with P(T) ∝ prod_{e in T} max(w_e, floor), exactly
  (Wilson, 1996: loop-erased random walks with steps ∝ w to the current
  tree). The floor bounds the cover time (∝ 1 / w_min); parallel edges add
  their weights. (parent, order), rooted at a random node per component."""
  w = np.maximum(np.asarray(weights, np.float64), floor)
  src = np.concatenate([edges[:, 0], edges[:, 1]])
  dst = np.concatenate([edges[:, 1], edges[:, 0]])
  ww = np.concatenate([w, w])
  idx = np.argsort(src, kind='stable')
  dst, ww = dst[idx], ww[idx]
  start = np.searchsorted(src[idx], np.arange(n + 1))
  cum = np.cumsum(ww)
  base = np.concatenate([[0.0], cum])
  roots = _random_roots(rng, n, edges)
  in_tree = np.zeros(n, bool)
  in_tree[roots] = True
  nxt = np.arange(n)
  for i in rng.permutation(n):
    u = i
    while not in_tree[u]:
      lo, hi = start[u], start[u + 1]
      r = base[lo] + rng.random() * (base[hi] - base[lo])
      k = min(int(np.searchsorted(cum[lo:hi], r, side='right')), hi - lo - 1)
      nxt[u] = dst[lo + k]
      u = nxt[u]
    u = i
    while not in_tree[u]:
      in_tree[u] = True
      u = nxt[u]
  return nxt, order_of(nxt)


SAMPLERS = ('kruskal', 'wilson')


def sample_forest(rng: np.random.Generator, n: int, edges: np.ndarray,
                  weights: np.ndarray, num_trees: int, sampler: str,
                  floor: float) -> tuple[np.ndarray, np.ndarray]:
  """K trees: (parent [K, n], order [K, n])."""
  if sampler not in SAMPLERS:
    raise ValueError(f'sampler {sampler!r}: use one of {SAMPLERS}')
  trees = []
  for _ in range(num_trees):
    if sampler == 'wilson':
      trees.append(wilson_tree(rng, n, edges, weights, floor))
    else:
      trees.append(kruskal_tree(rng, n, edges, np.maximum(weights, floor)))
  return (np.stack([t[0] for t in trees]), np.stack([t[1] for t in trees]))


def edge_weights(h_e: np.ndarray, beta: float, floor: float) -> np.ndarray:
  """w_e = max(h_e ** beta, floor) (the homophily bias; reconstruction)."""
  return np.maximum(np.asarray(h_e, np.float64) ** beta, floor)


def estimated_homophily(probs_NxC: np.ndarray, edges: np.ndarray,
                        labels: np.ndarray | None = None,
                        labelled: np.ndarray | None = None) -> np.ndarray:
  """h_ij = p_i . p_j, with the labelled nodes' p set to their one-hot
  labels (reconstruction of the paper's estimator)."""
  p = np.asarray(probs_NxC, np.float64).copy()
  if labelled is not None:
    p[labelled] = np.eye(p.shape[1])[labels[labelled]]
  return np.sum(p[edges[:, 0]] * p[edges[:, 1]], axis=1)


def tree_homophily(parent: np.ndarray, labels: np.ndarray) -> float:
  """Fraction of tree edges (over all trees of `parent` [..., n]) joining
  nodes of the same class."""
  parent = np.asarray(parent)
  child = np.broadcast_to(np.arange(parent.shape[-1]), parent.shape)
  real = parent != child
  return float(np.mean((labels[parent] == labels[child])[real]))


# -- the two-pass tree filter (JAX) -------------------------------------------

UNROLL = 8   # scan steps per loop iteration (the passes are dispatch-bound)


def up_pass(parent, order, a, x):
  """U_i = x_i + sum_{c in ch(i)} a_c U_c, leaves to roots (a scan over
  the reversed topological order; one row per step: O(n))."""
  def body(U, i):
    return U.at[parent[i]].add(a[i] * U[i]), None
  return jax.lax.scan(body, x, order[::-1], unroll=UNROLL)[0]


def down_pass(parent, order, a, U):
  """R_i = (1 - a_i^2) U_i + a_i R_{p(i)} (R_root = U_root; a_root = 0),
  roots to leaves."""
  def body(R, i):
    return R.at[i].set((1 - a[i] ** 2) * U[i] + a[i] * R[parent[i]]), None
  return jax.lax.scan(body, jnp.zeros_like(U), order, unroll=UNROLL)[0]


@jax.custom_vjp
def tree_filter(parent, order, a, x):
  """sum_j prod_{e in path(i, j)} a_e x_j for every node i (unnormalised):
  two passes, O(n d). parent [n], order [n] (int), a [n] (a_root ignored),
  x [n, d]."""
  a = jnp.where(parent == jnp.arange(parent.shape[0]), 0.0, a)
  return down_pass(parent, order, a, up_pass(parent, order, a, x))


def _tree_filter_fwd(parent, order, a, x):
  a = jnp.where(parent == jnp.arange(parent.shape[0]), 0.0, a)
  U = up_pass(parent, order, a, x)
  R = down_pass(parent, order, a, U)
  return R, (parent, order, a, U, R)


def _tree_filter_bwd(res, g):
  """The filter is R = S x with S = (I - B^T)^-1 D (I - B)^-1 symmetric
  (B[p(i), i] = a_i, D = diag(1 - a^2)): lam = up(g), dx = S g =
  down(lam), and d a_i = <lam_i, R_p(i)> - 2 a_i <lam_i, U_i> +
  <dx_p(i), U_i>."""
  parent, order, a, U, R = res
  lam = up_pass(parent, order, a, g)
  dx = down_pass(parent, order, a, lam)
  da = (jnp.sum(lam * R[parent], -1) - 2 * a * jnp.sum(lam * U, -1)
        + jnp.sum(dx[parent] * U, -1))
  da = jnp.where(parent == jnp.arange(parent.shape[0]), 0.0, da)
  return None, None, da, dx


tree_filter.defvjp(_tree_filter_fwd, _tree_filter_bwd)


def normalized_filter(parent, order, a, x):
  """y_i = (1 / z_i) sum_j prod_path a x_j, z_i the same with x = 1 (one
  filter call on [x, 1])."""
  ones = jnp.ones(x.shape[:-1] + (1,), x.dtype)
  out = tree_filter(parent, order, a, jnp.concatenate([x, ones], -1))
  return out[..., :-1] / out[..., -1:]


def path_product_matrix(parent: np.ndarray, a: np.ndarray) -> np.ndarray:
  """S_ij = prod_{e in path(i, j)} a_e (0 across components): the O(n^2)
  definition, by a walk from every node (the reference of the DP)."""
  n = len(parent)
  nbrs = [[] for _ in range(n)]
  for i in range(n):
    if parent[i] != i:
      nbrs[i].append((parent[i], a[i]))
      nbrs[parent[i]].append((i, a[i]))
  S = np.zeros((n, n))
  for s in range(n):
    S[s, s] = 1.0
    stack, seen = [s], {s}
    while stack:
      u = stack.pop()
      for v, w in nbrs[u]:
        if v not in seen:
          seen.add(v)
          S[s, v] = S[s, u] * w
          stack.append(v)
  return S


# -- models -------------------------------------------------------------------


class Forest(NamedTuple):
  """K trees of one graph (leading axis K) and the homophily estimate
  h_i of each tree edge (i, parent(i)) (0.5 at roots)."""
  parent: Any
  order: Any
  h: Any


class FGL(nn.Module):
  """Encoder -> forest filter with learned affinities -> classifier on
  [z, mean_k filter_k(z)]."""

  hidden: int
  num_classes: int
  dropout: float = 0.5
  a_max: float = 0.9
  proj_dim: int = 8

  @nn.compact
  def __call__(self, x, forest: Forest, train: bool = False):
    z = nn.relu(nn.Dense(self.hidden)(
        nn.Dropout(self.dropout, deterministic=not train)(x)))
    z = nn.Dropout(self.dropout, deterministic=not train)(z)
    b = self.param('affinity_bias', nn.initializers.zeros, ())
    c = self.param('affinity_scale', nn.initializers.ones, ())
    q = nn.Dense(self.proj_dim, use_bias=False,
                 kernel_init=nn.initializers.normal(0.01))(z)
    h = jnp.clip(forest.h, 1e-4, 1 - 1e-4)

    def one(parent, order, h_k):
      dist = jnp.sum((q - q[parent]) ** 2, -1)
      a = self.a_max * jax.nn.sigmoid(b + c * jax.scipy.special.logit(h_k)
                                      - dist)
      return normalized_filter(parent, order, a, z)

    # the K trees are the batch: split over 'data' in a training step
    parent, order, h = distributed.shard_batch((forest.parent, forest.order,
                                                h))
    agg = jnp.mean(jax.vmap(one)(parent, order, h), 0)
    return nn.Dense(self.num_classes)(jnp.concatenate([z, agg], -1))


class MLP(nn.Module):
  """Two-layer MLP on node features (the graph-free baseline)."""

  hidden: int
  num_classes: int
  dropout: float = 0.5

  @nn.compact
  def __call__(self, x, train: bool = False):
    x = nn.Dropout(self.dropout, deterministic=not train)(x)
    x = nn.relu(nn.Dense(self.hidden)(x))
    x = nn.Dropout(self.dropout, deterministic=not train)(x)
    return nn.Dense(self.num_classes)(x)


def gcn_propagate(edges, edge_mask, x):
  """D^-1/2 (A + I) D^-1/2 x (Kipf & Welling, 2017, Eq. 2) on an edge list
  [m, 2] (undirected; `edge_mask` zeroes padding edges)."""
  n = x.shape[0]
  w = edge_mask.astype(x.dtype)
  deg = 1.0 + jax.ops.segment_sum(w, edges[:, 0], n) + jax.ops.segment_sum(
      w, edges[:, 1], n)
  s = jax.lax.rsqrt(deg)
  ew = (w * s[edges[:, 0]] * s[edges[:, 1]])[:, None]
  out = s[:, None] ** 2 * x
  out = out + jax.ops.segment_sum(ew * x[edges[:, 1]], edges[:, 0], n)
  return out + jax.ops.segment_sum(ew * x[edges[:, 0]], edges[:, 1], n)


class GCN(nn.Module):
  """Two-layer GCN (Kipf & Welling, 2017)."""

  hidden: int
  num_classes: int
  dropout: float = 0.5

  @nn.compact
  def __call__(self, x, edges, edge_mask, train: bool = False):
    x = nn.Dropout(self.dropout, deterministic=not train)(x)
    x = nn.relu(gcn_propagate(edges, edge_mask, nn.Dense(self.hidden)(x)))
    x = nn.Dropout(self.dropout, deterministic=not train)(x)
    return gcn_propagate(edges, edge_mask, nn.Dense(self.num_classes)(x))
