"""graph/fgl.py: the two-pass tree filter against the O(n^2) path-product
definition (float64) and its custom VJP against autodiff; Wilson's sampler
against exact enumeration of a small weighted graph's spanning trees;
perturb-and-MAP Kruskal; the GCN propagation against the dense matrix."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclrjax.graph import fgl


def _random_forest(rng, n, num_roots=1):
  """A random recursive forest: node i > num_roots - 1 attaches to a random
  earlier node; then relabelled by a random permutation."""
  parent = np.arange(n)
  for i in range(num_roots, n):
    parent[i] = rng.integers(i)
  perm = rng.permutation(n)
  inv = np.argsort(perm)
  parent = inv[parent[perm]]
  return parent, fgl.order_of(parent)


@pytest.mark.parametrize('num_roots', [1, 3])
def test_dp_equals_quadratic_path_products_float64(num_roots):
  rng = np.random.default_rng(num_roots)
  n, d = 60, 3
  parent, order = _random_forest(rng, n, num_roots)
  a = rng.uniform(0.05, 0.95, n)
  x = rng.normal(size=(n, d))
  S = fgl.path_product_matrix(parent, np.where(parent == np.arange(n), 0, a))
  with jax.enable_x64(True):
    y = np.asarray(fgl.tree_filter(jnp.asarray(parent), jnp.asarray(order),
                                   jnp.asarray(a), jnp.asarray(x)))
    yn = np.asarray(fgl.normalized_filter(
        jnp.asarray(parent), jnp.asarray(order), jnp.asarray(a),
        jnp.asarray(x)))
  assert np.max(np.abs(y - S @ x)) < 1e-12
  assert np.max(np.abs(yn - (S @ x) / S.sum(1, keepdims=True))) < 1e-12
  # a non-topological order breaks it (the experiment's control)
  bad = rng.permutation(n)
  with jax.enable_x64(True):
    yb = np.asarray(fgl.tree_filter(jnp.asarray(parent), jnp.asarray(bad),
                                    jnp.asarray(a), jnp.asarray(x)))
  assert np.max(np.abs(yb - S @ x)) > 1e-3


def test_custom_vjp_matches_autodiff_of_the_passes():
  rng = np.random.default_rng(0)
  n, d = 40, 4
  parent, order = (jnp.asarray(v) for v in _random_forest(rng, n, 2))
  a, x, g = (rng.uniform(0.1, 0.9, n), rng.normal(size=(n, d)),
             rng.normal(size=(n, d)))

  def plain(a, x):
    a = jnp.where(parent == jnp.arange(n), 0.0, a)
    return fgl.down_pass(parent, order, a, fgl.up_pass(parent, order, a, x))

  with jax.enable_x64(True):  # float64 arrays (made inside), so atol 1e-10
    a, x, g = (jnp.asarray(v, jnp.float64) for v in (a, x, g))
    f = lambda fn: jax.grad(lambda a, x: jnp.sum(fn(a, x) * g), (0, 1))(a, x)
    got = f(lambda a, x: fgl.tree_filter(parent, order, a, x))
    want = f(plain)
  for u, v in zip(got, want):
    np.testing.assert_allclose(np.asarray(u), np.asarray(v), atol=1e-10)


# A small weighted graph with a double edge-cycle structure: 5 nodes, 7 edges.
EDGES = np.array([[0, 1], [1, 2], [2, 3], [3, 0], [0, 2], [3, 4], [1, 4]])
WEIGHTS = np.array([1.0, 3.0, 0.5, 2.0, 1.0, 4.0, 0.25])


def _tree_key(parent):
  return frozenset(frozenset((i, int(p))) for i, p in enumerate(parent)
                   if p != i)


def _exact_tree_distribution(weights):
  n, probs = 5, {}
  for sub in itertools.combinations(range(len(EDGES)), n - 1):
    if len(np.unique(fgl.components(n, EDGES[list(sub)]))) == 1:
      key = frozenset(frozenset(map(int, EDGES[e])) for e in sub)
      probs[key] = float(np.prod(weights[list(sub)]))
  z = sum(probs.values())
  return {k: v / z for k, v in probs.items()}


def _empirical(sampler, num):
  rng = np.random.default_rng(0)
  counts = {}
  for _ in range(num):
    key = _tree_key(sampler(rng)[0])
    counts[key] = counts.get(key, 0) + 1
  return {k: v / num for k, v in counts.items()}


def _tv(p, q):
  return 0.5 * sum(abs(p.get(k, 0.0) - q.get(k, 0.0)) for k in set(p) | set(q))


def test_wilson_samples_the_weighted_spanning_tree_distribution():
  exact = _exact_tree_distribution(WEIGHTS)
  assert len(exact) == 24
  emp = _empirical(lambda r: fgl.wilson_tree(r, 5, EDGES, WEIGHTS), 6000)
  assert set(emp) <= set(exact)               # only spanning trees
  # TV of 6000 draws over 24 trees: ~0.02 expected; the floor's control
  assert _tv(emp, exact) < 0.04, _tv(emp, exact)
  floored = _exact_tree_distribution(np.maximum(WEIGHTS, 2.0))
  emp_f = _empirical(lambda r: fgl.wilson_tree(r, 5, EDGES, WEIGHTS, 2.0),
                     6000)
  assert _tv(emp_f, floored) < 0.04
  assert _tv(emp, floored) > 0.1                # the test can fail


def test_kruskal_returns_spanning_trees_and_its_map():
  rng = np.random.default_rng(0)
  for _ in range(50):
    parent, order = fgl.kruskal_tree(rng, 5, EDGES, WEIGHTS)
    assert _tree_key(parent) in _exact_tree_distribution(WEIGHTS)
    pos = np.argsort(order)
    assert all(pos[p] < pos[i] for i, p in enumerate(parent) if p != i)
  # with w ** 50 the Gumbel noise is negligible: the maximum spanning tree
  heavy = fgl.kruskal_tree(rng, 5, EDGES, WEIGHTS ** 50)[0]
  exact = _exact_tree_distribution(WEIGHTS)
  assert _tree_key(heavy) == max(exact, key=exact.get)


def test_disconnected_graph_gives_a_spanning_forest():
  edges = np.array([[0, 1], [1, 2], [3, 4]])
  for sampler in fgl.SAMPLERS:
    parent, order = fgl.sample_forest(np.random.default_rng(0), 6, edges,
                                      np.ones(3), 2, sampler, 0.1)
    assert parent.shape == order.shape == (2, 6)
    assert all(np.sum(p == np.arange(6)) == 3 for p in parent)   # 3 roots
    assert fgl.tree_homophily(parent, np.array([0, 0, 1, 1, 1, 0])) == 2 / 3


def test_estimated_homophily_clamps_labelled_nodes():
  p = np.array([[0.5, 0.5], [0.9, 0.1], [0.2, 0.8]])
  e = np.array([[0, 1], [1, 2]])
  h = fgl.estimated_homophily(p, e)
  np.testing.assert_allclose(h, [0.5, 0.26])
  h = fgl.estimated_homophily(p, e, np.array([1, 0, 1]), np.array([0]))
  np.testing.assert_allclose(h, [0.1, 0.26])


def test_gcn_propagation_is_the_normalised_adjacency():
  rng = np.random.default_rng(0)
  n = 7
  edges = np.array([[0, 1], [1, 2], [2, 3], [4, 5], [0, 3], [0, 0]])
  mask = np.array([1, 1, 1, 1, 1, 0])           # last edge is padding
  A = np.eye(n)
  for (i, j), m in zip(edges, mask):
    if m:
      A[i, j] += 1
      A[j, i] += 1
  s = 1 / np.sqrt(A.sum(1))
  x = rng.normal(size=(n, 3)).astype(np.float32)
  got = fgl.gcn_propagate(jnp.asarray(edges), jnp.asarray(mask), x)
  np.testing.assert_allclose(np.asarray(got), (s[:, None] * A * s) @ x,
                             atol=1e-5)


def test_models_run_and_fgl_is_jittable():
  rng = np.random.default_rng(0)
  n, K = 30, 3
  forest = fgl.Forest(*(jnp.asarray(v) for v in _stack_forests(rng, n, K)),
                      h=jnp.full((K, n), 0.7))
  x = jnp.asarray(rng.normal(size=(n, 5)), jnp.float32)
  model = fgl.FGL(hidden=8, num_classes=3)
  params = model.init(jax.random.key(0), x, forest)
  out = jax.jit(model.apply)(params, x, forest)
  assert out.shape == (n, 3) and bool(jnp.all(jnp.isfinite(out)))
  g = jax.grad(lambda p: jnp.sum(model.apply(p, x, forest) ** 2))(params)
  assert all(bool(jnp.all(jnp.isfinite(v))) for v in jax.tree.leaves(g))


def _stack_forests(rng, n, K):
  trees = [_random_forest(rng, n) for _ in range(K)]
  return np.stack([t[0] for t in trees]), np.stack([t[1] for t in trees])
