"""representation/causal_delta.py and triplets.py: SupCon against a NumPy
reference with loops, Top-K aggregation, the delta-only classifier's
invariance, the data split's properties."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclrjax.representation import causal_delta as cd
from iclrjax.representation import triplets


def _supcon_reference(z, y, tau):
  """Khosla et al. 2020 Eq. 2 (L_out), written out with loops."""
  z = np.asarray(z, np.float64)
  z = z / np.linalg.norm(z, axis=1, keepdims=True)
  n = len(y)
  total, anchors = 0.0, 0
  for i in range(n):
    pos = [p for p in range(n) if p != i and y[p] == y[i]]
    if not pos:
      continue
    denom = sum(np.exp(z[i] @ z[a] / tau) for a in range(n) if a != i)
    total += -sum(np.log(np.exp(z[i] @ z[p] / tau) / denom)
                  for p in pos) / len(pos)
    anchors += 1
  return total / max(anchors, 1)


@pytest.mark.parametrize('tau', [0.1, 0.5])
def test_supcon_matches_the_loop_reference(tau):
  rng = np.random.default_rng(0)
  z = rng.standard_normal((12, 6)).astype(np.float32)
  y = np.array([0, 1, 2, 0, 1, 0, 3, 2, 2, 4, 1, 0])   # label 3, 4: no pair
  got = float(cd.supcon(jnp.asarray(z), jnp.asarray(y), tau))
  np.testing.assert_allclose(got, _supcon_reference(z, y, tau), rtol=1e-5)


def test_supcon_is_lower_for_label_clusters():
  rng = np.random.default_rng(1)
  y = np.repeat(np.arange(3), 4)
  centers = rng.standard_normal((3, 8))
  clustered = centers[y] + 0.05 * rng.standard_normal((12, 8))
  shuffled = rng.standard_normal((12, 8))
  assert (float(cd.supcon(jnp.asarray(clustered), jnp.asarray(y)))
          < float(cd.supcon(jnp.asarray(shuffled), jnp.asarray(y))))
  assert float(cd.supcon(jnp.ones((3, 4)), jnp.arange(3))) == 0.0


def test_topk_aggregation_picks_the_largest_patch_deltas():
  d = np.zeros((2, 5, 3), np.float32)
  d[0, 1] = [3, 0, 0]
  d[0, 4] = [0, -4, 0]
  d[0, 2] = [0.1, 0, 0]
  d[1, 0] = [1, 1, 1]
  d[1, 3] = [0, 0, 2.5]
  d[1, 2] = [0, 0.2, 0]
  got = np.asarray(cd.topk_aggregate(jnp.asarray(d), 2))
  np.testing.assert_allclose(got[0], [1.5, -2.0, 0.0])
  np.testing.assert_allclose(got[1], [0.5, 0.5, 1.75])
  np.testing.assert_allclose(np.asarray(cd.topk_aggregate(jnp.asarray(d), 5)),
                             d.mean(1), rtol=1e-6)


def test_sparsity_is_the_mean_absolute_entry():
  d = jnp.array([[1.0, -2.0], [0.0, 3.0]])
  assert float(cd.sparsity(d)) == pytest.approx(1.5)


CFG = dict(image_size=8, patch_size=4, token_dim=8, embed_dim=8, hidden=8,
           top_k=2)


@pytest.mark.parametrize('model', ['delta', 'cde', 'cde_patch'])
def test_delta_classifier_ignores_a_shift_shared_by_both_embeddings(model):
  """Adding the same vector to phi(x) and phi(x~) (here: the encoder's
  last bias, which every embedding shares) leaves the delta classifier's
  logits unchanged; the concat baseline's change."""
  def run(m):
    cfg = cd.Config(model=m, **CFG)
    params = cd.init(jax.random.key(0), cfg)
    x0, x1 = jax.random.normal(jax.random.key(1), (2, 4, 8, 8))
    bumped = jax.tree_util.tree_map(lambda a: a, params)
    enc = bumped['encoder']['params']
    last = 'token_out' if m == 'cde_patch' else 'global_out'
    enc[last]['bias'] = enc[last]['bias'] + 5.0
    return (np.asarray(cd.logits(params, cfg, x0, x1)),
            np.asarray(cd.logits(bumped, cfg, x0, x1)))
  a, b = run(model)
  np.testing.assert_allclose(a, b, atol=1e-5)
  a, b = run('concat')
  assert np.abs(a - b).max() > 1e-2


def test_identical_images_give_a_zero_delta():
  cfg = cd.Config(model='cde', **CFG)
  params = cd.init(jax.random.key(0), cfg)
  x = jax.random.normal(jax.random.key(1), (3, 8, 8))
  z = cd.representation(params, cfg, x, x)
  assert float(jnp.abs(z).max()) == 0.0


def test_loss_terms():
  cfg = cd.Config(model='cde', **CFG)
  params = cd.init(jax.random.key(0), cfg)
  x0, x1 = jax.random.normal(jax.random.key(1), (2, 6, 8, 8))
  y = jnp.array([0, 1, 0, 1, 2, 2])
  total, m = cd.loss(params, cfg, x0, x1, y)
  want = m['ce'] + cfg.alpha_contrast * m['supcon'] + (
      cfg.alpha_sparsity * m['sparsity'])
  np.testing.assert_allclose(float(total), float(want), rtol=1e-6)
  _, m = cd.loss(cd.init(jax.random.key(0), cd.Config(model='concat', **CFG)),
                 cd.Config(model='concat', **CFG), x0, x1, y)
  assert 'supcon' not in m


SPEC = triplets.Spec()


@pytest.fixture(scope='module')
def splits():
  return {s: triplets.make_split(s, 400, 3, SPEC)
          for s in ('train', 'id', 'ood')}


def test_ood_pairs_are_never_in_training(splits):
  seen = triplets.seen_pair_mask(SPEC)
  assert seen.sum(1).tolist() == [SPEC.digits_per_action] * 5
  tr, ood = splits['train'], splits['ood']
  assert seen[tr['action'], tr['digit']].all()
  assert seen[splits['id']['action'], splits['id']['digit']].all()
  assert not seen[ood['action'], ood['digit']].any()
  train_pairs = set(zip(tr['action'].tolist(), tr['digit'].tolist()))
  assert not train_pairs & set(zip(ood['action'].tolist(),
                                   ood['digit'].tolist()))


def test_scene_is_spurious_in_training_and_decorrelated_ood(splits):
  tr, ood = splits['train'], splits['ood']
  assert np.mean(tr['style'] == tr['action']) > 0.85
  assert np.mean(ood['style'] == ood['action']) < 0.35


def test_actions_change_the_object_only_and_splits_are_seeded(splits):
  d = triplets.make_split('train', 50, 3, triplets.Spec(pixel_noise=0.0))
  diff = np.abs(d['x_after'] - d['x'])
  # the change lies inside the object's 12 x 12 neighbourhood at most
  assert (diff > 1e-6).sum(axis=(1, 2)).max() <= 144
  again = triplets.make_split('train', 400, 3, SPEC)
  np.testing.assert_array_equal(again['x'], splits['train']['x'])
  other = triplets.make_split('train', 400, 4, SPEC)
  assert not np.array_equal(other['x'], splits['train']['x'])
