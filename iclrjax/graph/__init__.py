"""Graph learning: node classification on a forest of spanning trees.

- Forest-Based Graph Learning for Semi-Supervised Node Classification (FGL),
  OpenReview 5asbtzIVpS (no arXiv id): `fgl` (homophily-biased spanning
  forests, the linear-time tree filter, the FGL model and its GCN / MLP
  baselines) and `data` (contextual SBM, karate club with the `graph`
  extra, Planetoid from a local folder).

Example:
    ```python
    import jax
    import numpy as np
    from iclrjax.graph import data, fgl

    rng = np.random.default_rng(0)
    g = data.csbm(rng, n=200, num_classes=3, dim=16, avg_degree=5.0,
                  homophily=0.8, snr=1.0, train_per_class=5, num_val=20)
    h = np.ones(len(g.edges))                 # homophily estimate per edge
    w = fgl.edge_weights(h, beta=1.0, floor=0.1)
    parent, order = fgl.sample_forest(rng, len(g.y), g.edges, w, num_trees=4,
                                      sampler='wilson', floor=0.1)
    forest = fgl.Forest(parent, order, np.full(parent.shape, 0.5, np.float32))
    model = fgl.FGL(hidden=16, num_classes=g.num_classes)
    params = model.init(jax.random.PRNGKey(0), g.x, forest)
    logits = model.apply(params, g.x, forest)  # [200, 3]; train on g.train
    print(logits.shape)
    ```
"""

from iclrjax.graph import data
from iclrjax.graph import fgl
from iclrjax.graph.data import (NodeGraph, csbm, edge_homophily, karate,
                                planetoid)
from iclrjax.graph.fgl import (FGL, GCN, MLP, Forest, edge_weights,
                               estimated_homophily, kruskal_tree,
                               normalized_filter, sample_forest, tree_filter,
                               tree_homophily, wilson_tree)

__all__ = [
    'data', 'fgl',
    'FGL', 'Forest', 'GCN', 'MLP', 'sample_forest', 'kruskal_tree',
    'wilson_tree', 'edge_weights', 'estimated_homophily', 'tree_homophily',
    'tree_filter', 'normalized_filter',
    'NodeGraph', 'csbm', 'karate', 'planetoid', 'edge_homophily',
]
