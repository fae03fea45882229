"""Multimodal fusion methods.

- Supporting Multimodal Intermediate Fusion with Informatic Constraint and
  Distribution Coherence (IID), OpenReview 5bxmmuRhO6 (no arXiv id):
  `fusion` (late vs intermediate fusion, the informatic constraint and the
  sliced-Wasserstein distribution cohering; reconstructions, see the module).

Example:
    ```python
    import jax
    from iclrjax.multimodal import fusion

    k = jax.random.split(jax.random.PRNGKey(0), 5)
    xa = jax.random.normal(k[0], (32, 6))    # modality a
    xb = jax.random.normal(k[1], (32, 4))    # modality b
    labels = (xa[:, 0] * xb[:, 0] > 0).astype(int)
    model = fusion.IntermediateFusion(hidden=16, latent=8, num_classes=2)
    params = model.init(k[2], xa, xb)
    proj = fusion.rip_projection(k[3], dim=8, k=4)   # latent -> 4 dims
    dirs = fusion.random_directions(k[4], num=16, dim=4)
    loss, parts = fusion.iid_loss(model.apply(params, xa, xb), labels, proj,
                                  dirs, informatic_weight=0.1,
                                  cohering_weight=0.1)
    print(float(loss), {n: float(v) for n, v in parts.items()})
    ```
"""

from iclrjax.multimodal import fusion
from iclrjax.multimodal.fusion import (IFOutputs, IntermediateFusion,
                                       LateFusion, cohering_loss,
                                       cross_entropy, iid_loss,
                                       informatic_constraint,
                                       random_directions, rip_projection,
                                       sliced_wasserstein)

__all__ = [
    'fusion',
    'LateFusion', 'IntermediateFusion', 'IFOutputs', 'iid_loss',
    'informatic_constraint', 'cohering_loss', 'sliced_wasserstein',
    'rip_projection', 'random_directions', 'cross_entropy',
]
