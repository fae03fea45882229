"""Our GRPO advantages, loss and gradient against google-tunix's on the same
inputs (benchmarks/lm_decode.tunix_parity); skipped where tunix is absent
(`pip install -e '.[tunix]'`, not beside the bench extra)."""

import pytest

pytest.importorskip('tunix')

from benchmarks import lm_decode  # pylint: disable=g-import-not-at-top


def test_advantages_loss_and_gradient_match_tunix():
  d = lm_decode.tunix_parity()
  assert d['advantages'] < 1e-5, d
  for agg in ('sequence', 'token'):
    assert d[f'loss/{agg}'] < 1e-5, d
    # Gradients of O(0.1-1): float32 agreement.
    assert d[f'grad/{agg}'] < 1e-5 * max(1.0, d[f'grad_scale/{agg}']), d
