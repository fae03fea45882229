"""Representation learning: intervention (delta) embeddings.

- Learning Robust Intervention Representations with Delta Embeddings
  (Causal Delta Embeddings), arXiv 2508.04492: `causal_delta` (encoder,
  delta and Top-K patch-delta representations, SupCon + sparsity loss) and
  `triplets` (offline intervention pairs from scikit-learn's digits, with
  in- and out-of-distribution splits).

Example:
    ```python
    import jax
    from iclrjax.representation import causal_delta, triplets

    pairs = triplets.make_split('train', n=32, seed=0)  # x, x_after, action
    cfg = causal_delta.Config()        # 'cde': global delta, CE+SupCon+L1
    params = causal_delta.init(jax.random.PRNGKey(0), cfg)
    loss, metrics = causal_delta.loss(params, cfg, pairs['x'],
                                      pairs['x_after'], pairs['action'])
    print({k: float(v) for k, v in metrics.items()})
    ```
"""

from iclrjax.representation import causal_delta
from iclrjax.representation import triplets
from iclrjax.representation.causal_delta import (Classifier, Config, Encoder,
                                                 delta, init, logits, loss,
                                                 representation, sparsity,
                                                 supcon, topk_aggregate)
from iclrjax.representation.triplets import Spec, apply_action, make_split

__all__ = [
    'causal_delta', 'triplets',
    'Config', 'init', 'loss', 'logits', 'representation', 'delta',
    'topk_aggregate', 'supcon', 'sparsity', 'Encoder', 'Classifier',
    'Spec', 'make_split', 'apply_action',
]
