"""Node-classification graphs: contextual SBM (generated), Zachary's karate
club (networkx) and Planetoid citation graphs read from a local folder.

A graph is `NodeGraph`: features x [n, d], labels y [n], an undirected edge
list [m, 2] (each edge once) and boolean train / val / test masks.
"""

from __future__ import annotations

import os
import pathlib
import pickle
from typing import NamedTuple

import numpy as np

from iclrjax.core import extras


class NodeGraph(NamedTuple):
  """A node-classification graph (see the module docstring)."""

  x: np.ndarray
  y: np.ndarray
  edges: np.ndarray
  train: np.ndarray
  val: np.ndarray
  test: np.ndarray

  @property
  def num_classes(self) -> int:
    return int(self.y.max()) + 1


def edge_homophily(edges: np.ndarray, y: np.ndarray) -> float:
  """Fraction of edges whose two ends share a label."""
  return float(np.mean(y[edges[:, 0]] == y[edges[:, 1]]))


def split(rng: np.random.Generator, y: np.ndarray, train_per_class: int,
          num_val: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """`train_per_class` labelled nodes per class, `num_val` validation
  nodes, the rest test (boolean masks)."""
  n = len(y)
  train = np.zeros(n, bool)
  for k in range(int(y.max()) + 1):
    idx = np.flatnonzero(y == k)
    train[rng.choice(idx, min(train_per_class, len(idx)), replace=False)] = 1
  rest = rng.permutation(np.flatnonzero(~train))
  val = np.zeros(n, bool)
  val[rest[:num_val]] = True
  return train, val, ~(train | val)


def csbm(rng: np.random.Generator, n: int, num_classes: int, dim: int,
         avg_degree: float, homophily: float, snr: float,
         train_per_class: int, num_val: int) -> NodeGraph:
  """Contextual SBM: balanced classes; x = snr * mu_y + N(0, I / dim) with
  unit-norm random class means; n * avg_degree / 2 edges from uniform
  endpoints i, the other endpoint of i's class with probability
  `homophily` (else of a uniform other class), so the edge homophily is
  `homophily` up to sampling noise. Parallel edges may occur."""
  y = rng.permutation(np.arange(n) % num_classes)
  mu = rng.normal(size=(num_classes, dim))
  mu /= np.linalg.norm(mu, axis=1, keepdims=True)
  x = snr * mu[y] + rng.normal(size=(n, dim)) / np.sqrt(dim)
  members = [np.flatnonzero(y == k) for k in range(num_classes)]
  m = int(round(n * avg_degree / 2))
  i = rng.integers(n, size=m)
  same = rng.random(m) < homophily
  cls = np.where(same, y[i], (y[i] + rng.integers(1, num_classes, size=m))
                 % num_classes)
  j = np.empty(m, int)
  for k in range(num_classes):
    sel = cls == k
    j[sel] = members[k][rng.integers(len(members[k]), size=sel.sum())]
  while np.any(loop := i == j):       # redraw self loops in the same class
    j[loop] = [members[k][rng.integers(len(members[k]))] for k in cls[loop]]
  train, val, test = split(rng, y, train_per_class, num_val)
  return NodeGraph(x.astype(np.float32), y, np.stack([i, j], 1), train, val,
                   test)


def karate(rng: np.random.Generator, train_per_class: int) -> NodeGraph:
  """Zachary's karate club (networkx): 34 members, the two clubs after the
  split as labels, one-hot identity features; the rest of the nodes split
  half validation, half test."""
  nx = extras.require('networkx', 'graph')
  g = nx.karate_club_graph()
  n = g.number_of_nodes()
  y = np.array([0 if g.nodes[v]['club'] == 'Mr. Hi' else 1 for v in range(n)])
  edges = np.array(list(g.edges()))
  num_val = (n - 2 * train_per_class) // 2
  train, val, test = split(rng, y, train_per_class, num_val)
  return NodeGraph(np.eye(n, dtype=np.float32), y, edges, train, val, test)


PLANETOID = ('cora', 'citeseer', 'pubmed')
# (nodes, features, undirected edges, classes) that `planetoid` returns: the
# shapes without the files (PyG's Planetoid counts).
PLANETOID_SHAPES = {'cora': (2708, 1433, 5278, 7),
                    'citeseer': (3327, 3703, 4552, 6),
                    'pubmed': (19717, 500, 44324, 3)}
KARATE_SHAPE = (34, 34, 78, 2)   # the same for `karate`
_PARTS = ('x', 'y', 'tx', 'ty', 'allx', 'ally', 'graph', 'test.index')


def planetoid_files(name: str) -> list[str]:
  return [f'ind.{name}.{p}' for p in _PARTS]


def check_planetoid(name: str, root: str | os.PathLike) -> None:
  """Raises FileNotFoundError (one line: the missing files, the folder,
  where to get them) when `root` lacks the Planetoid files of `name`."""
  root = pathlib.Path(root)
  missing = [f for f in planetoid_files(name) if not (root / f).exists()]
  if missing:
    raise FileNotFoundError(
        f'dataset {name} is not in {root} (missing {", ".join(missing)}): '
        'copy the Planetoid files (github.com/kimiyoung/planetoid, data/) '
        'there or set --config.data.data_dir')


def planetoid(name: str, root: str | os.PathLike) -> NodeGraph:
  """A Planetoid citation graph (Yang et al., 2016) with its public split:
  20 labelled nodes per class, 500 validation, 1000 test nodes."""
  check_planetoid(name, root)
  root = pathlib.Path(root)
  obj = {}
  for p in _PARTS[:-1]:
    with open(root / f'ind.{name}.{p}', 'rb') as f:
      obj[p] = pickle.load(f, encoding='latin1')
  test_idx = np.loadtxt(root / f'ind.{name}.test.index', dtype=int)
  dense = lambda a: np.asarray(a.todense() if hasattr(a, 'todense') else a)
  allx, tx = dense(obj['allx']), dense(obj['tx'])
  ally, ty = np.asarray(obj['ally']), np.asarray(obj['ty'])
  n = max(len(obj['graph']), allx.shape[0] + len(test_idx),
          int(test_idx.max()) + 1)
  x = np.zeros((n, allx.shape[1]), np.float32)
  yy = np.zeros((n, ally.shape[1]))
  x[:len(allx)], yy[:len(ally)] = allx, ally
  x[test_idx], yy[test_idx] = tx, ty      # citeseer has isolated test ids
  y = yy.argmax(1)
  x /= np.maximum(x.sum(1, keepdims=True), 1.0)
  pairs = {(min(i, j), max(i, j)) for i, nb in obj['graph'].items()
           for j in nb if i != j and j < n}
  edges = np.array(sorted(pairs))
  num_classes = ally.shape[1]
  train = np.zeros(n, bool)
  train[:20 * num_classes] = True
  val = np.zeros(n, bool)
  val[20 * num_classes:20 * num_classes + 500] = True
  test = np.zeros(n, bool)
  test[np.sort(test_idx)[:1000]] = True
  return NodeGraph(x, y, edges, train, val, test)
