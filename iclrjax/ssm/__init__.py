"""Diagonal state-space models and their state-tracking tasks.

- Input-dependent complex diagonal (DCD) SSMs and group state tracking,
  arXiv 2603.01959: `dcd` (DCD, real, LTI and GRU sequence models),
  `groups` (finite groups as Cayley tables, derived series, running
  products) and `construct` (the theorems' explicit weights: one layer for
  abelian groups, two for S3).

Example:
    ```python
    import jax
    import numpy as np
    from iclrjax.ssm import construct, dcd, groups

    g = groups.make('Z2xZ4')                      # an abelian group, order 8
    x = np.random.default_rng(0).integers(0, g.order, size=32)
    y = groups.running_products(g, x)             # the states to track
    _, track = construct.abelian_one_layer(g)     # one DCD layer, exact
    print((np.asarray(track(x)) == y).mean())     # 1.0
    model = dcd.make_model('dcd', depth=1, order=g.order, width=16, state=8,
                           hidden=32)
    params = model.init(jax.random.PRNGKey(0), x)
    logits = model.apply(params, x)               # [32, 8]: train on y
    print(dcd.per_position_accuracy(logits, y).shape)
    ```
"""

from iclrjax.ssm import construct
from iclrjax.ssm import dcd
from iclrjax.ssm import groups
from iclrjax.ssm.construct import (abelian_one_layer, abelian_seq_model,
                                   characters, s3_two_layer, token_layer)
from iclrjax.ssm.dcd import (DiagLayer, SeqModel, diag_scan, make_model,
                             per_position_accuracy)
from iclrjax.ssm.groups import (Group, abelian_series_length, is_solvable,
                                running_products)
from iclrjax.ssm.groups import make as make_group

__all__ = [
    'construct', 'dcd', 'groups',
    'make_model', 'SeqModel', 'DiagLayer', 'diag_scan',
    'per_position_accuracy',
    'make_group', 'Group', 'running_products', 'abelian_series_length',
    'is_solvable',
    'abelian_one_layer', 'abelian_seq_model', 's3_two_layer', 'token_layer',
    'characters',
]
