"""lm/marc.py: the synthetic video, the VMR (against a NumPy transcription
of the merge), rewards, and C-GRPO's advantages against GRPO's."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclrjax.lm import grpo
from iclrjax.lm import marc

VC = marc.VideoConfig(num_distractors=2)
RC = marc.VMRConfig()


@pytest.fixture(scope='module')
def videos():
  return marc.make_videos(jax.random.PRNGKey(0), VC, 64)


def test_video_has_its_events_query_and_classes(videos):
  v = jax.tree.map(np.asarray, videos)
  assert v.frames_TxPxD.shape == (64, VC.num_frames, VC.num_patches, VC.dim)
  np.testing.assert_array_equal(v.boundary_T.sum(1), VC.num_events - 1)
  np.testing.assert_array_equal(v.event_T[:, -1], VC.num_events - 1)
  for i in range(8):
    attr = v.frames_TxPxD[i, :, 0, VC.d_scene:]
    on = attr.max(1) > 0.5 * VC.attr_scale        # frames carrying a class
    classes = attr[on].argmax(1)
    events = v.event_T[i][on]
    # the queried event carries the label; distractors other classes
    np.testing.assert_array_equal(classes[events == v.target_event[i]],
                                  v.label[i])
    assert len(set(events)) == 1 + VC.num_distractors
    assert (classes[events != v.target_event[i]] != v.label[i]).all()


def _np_compress(x, seg, keep, rho, target):
  """A NumPy transcription of the two-stage merge (paper Sec. 3.2): lists of
  frames and their segments; merge the most similar adjacent pair (within a
  segment holding > rho frames first, then anywhere) into its mean."""
  def sim(a, b):
    c = (a * b).sum(-1) / np.maximum(np.linalg.norm(a, axis=-1)
                                     * np.linalg.norm(b, axis=-1), 1e-8)
    return c.mean()
  fr = [x[t] for t in range(len(x)) if keep[t]]
  sg = [seg[t] for t in range(len(x)) if keep[t]]
  while True:
    pairs = [i for i in range(len(fr) - 1) if sg[i] == sg[i + 1]
             and sg.count(sg[i]) > rho]
    if not pairs:
      if len(fr) <= target:
        break
      pairs = list(range(len(fr) - 1))
    i = max(pairs, key=lambda j: sim(fr[j], fr[j + 1]))
    fr[i:i + 2] = [(fr[i] + fr[i + 1]) / 2]
    sg[i:i + 2] = [sg[i]]
  return np.stack(fr), np.array(sg)


@pytest.mark.parametrize('rho,target', [(1, 1), (2, 3), (1, 32)])
def test_compress_matches_a_numpy_loop(videos, rho, target):
  v = jax.tree.map(lambda a: a[:6], videos)
  _, seg = jax.vmap(lambda f: marc.segment(f, RC.threshold))(v.frames_TxPxD)
  keep = jax.vmap(lambda f, s, q: marc.retrieve(f, s, q, RC.top_k))(
      v.frames_TxPxD, seg, v.query_D)
  c = jax.jit(jax.vmap(lambda f, s, k: marc.compress(f, s, k, rho, target)))(
      v.frames_TxPxD, seg, keep)
  for i in range(6):
    ref, ref_seg = _np_compress(np.asarray(v.frames_TxPxD[i]),
                                np.asarray(seg[i]), np.asarray(keep[i]), rho,
                                target)
    n = int(c.count[i])
    assert n == len(ref)
    np.testing.assert_allclose(c.frames_TxPxD[i, :n], ref, atol=1e-5)
    np.testing.assert_array_equal(c.seg_T[i, :n], ref_seg)


def test_budget_is_exactly_p_tokens_and_stage_one_stays_in_segments():
  """Property test on random frames, segments and retrieval masks."""
  T, P, D, N = 16, 3, 5, 20

  def case(key):
    k1, k2, k3 = jax.random.split(key, 3)
    x = jax.random.normal(k1, (T, P, D))
    b = jax.random.bernoulli(k2, 0.3, (T,)).at[0].set(False)
    seg = jnp.cumsum(b)
    keep = jnp.isin(seg, jax.random.permutation(k3, T)[:3]) | (seg == 0)
    # stage 1 only (rho = 2, no global budget) and both stages (1 frame)
    return (seg, keep, marc.compress(x, seg, keep, 2, T),
            marc.compress(x, seg, keep, 1, 1))

  segs, keeps, c1, c = jax.tree.map(np.asarray, jax.jit(jax.vmap(case))(
      jax.random.split(jax.random.PRNGKey(0), N)))
  for i in range(N):
    kept, sg = keeps[i], segs[i]
    m1 = c1.members_TxT[i, :c1.count[i]]
    # every stage-1 slot holds frames of one segment, contiguous in time
    for row in m1:
      src = np.flatnonzero(row)
      assert len(set(sg[src])) == 1
      np.testing.assert_array_equal(src, np.arange(src[0], src[-1] + 1))
    np.testing.assert_array_equal(m1.sum(0), kept.astype(int))
    firsts = sg[[np.flatnonzero(r)[0] for r in m1]]
    for g in set(sg[kept]):   # each segment keeps min(its size, rho) slots
      assert (firsts == g).sum() == min(2, (sg[kept] == g).sum())
    # both stages: exactly target_frames = 1 slot (P tokens), all kept frames
    assert c.count[i] == 1
    np.testing.assert_array_equal(c.members_TxT[i, 0], kept)
  tok = jax.jit(lambda k: marc.vmr_tokens(marc.make_video(k, VC), RC))(
      jax.random.PRNGKey(1))
  assert tok.shape == (VC.num_patches, VC.dim)


def test_vmr_finds_events_and_the_queried_one(videos):
  b, seg = jax.vmap(lambda f: marc.segment(f, RC.threshold))(
      videos.frames_TxPxD)
  assert float(marc.boundary_f1(b, videos.boundary_T)) >= 0.95
  keep = jax.vmap(lambda f, s, q: marc.retrieve(f, s, q, RC.top_k))(
      videos.frames_TxPxD, seg, videos.query_D)
  target = videos.event_T == videos.target_event[:, None]
  assert float(jnp.mean(jnp.all(keep | ~target, 1))) >= 0.95
  # boundary F1 closed form on a toy pair
  p = jnp.array([[0, 1, 1, 0]], bool)
  t = jnp.array([[0, 1, 0, 1]], bool)
  assert float(marc.boundary_f1(p, t)) == pytest.approx(0.5)


def test_frame_similarity_is_the_patch_mean_cosine():
  a = jnp.array([[1., 0.], [0., 2.]])
  b = jnp.array([[1., 1.], [0., -1.]])
  assert float(marc.frame_similarity(a, b)) == pytest.approx(
      (2 ** -0.5 - 1) / 2)


def test_answer_rewards():
  lab = jnp.array([0, 5, 7])
  ans = marc.encode_answer(lab)
  np.testing.assert_array_equal(ans[1], [marc.FMT, marc.DIGIT0 + 1,
                                         marc.DIGIT0 + 1, marc.EOS])
  wrong = ans.at[0, 2].set(marc.DIGIT0 + 3)
  broken = ans.at[2, 3].set(marc.PAD)
  toks = jnp.concatenate([ans, wrong, broken])
  lab3 = jnp.tile(lab, 3)
  np.testing.assert_array_equal(marc.accuracy_reward(toks, lab3),
                                [1, 1, 1, 0, 1, 1, 1, 1, 0])
  np.testing.assert_array_equal(marc.format_reward(toks),
                                [1, 1, 1, 1, 1, 1, 1, 1, 0])


def test_compression_reward_closed_form():
  a_comp = jnp.array([0.5, 0.875, 0.25, 0.5])
  a_full = jnp.array([1.0, 1.0, 0.5, 0.0])
  rc = marc.compression_reward(a_comp, a_full, alpha=2.0, tau=0.6)
  np.testing.assert_allclose(rc, [0.0, 2 * 0.275, 0.0, 0.0], atol=1e-6)


def _groups(key, n=64, G=8):
  k1, k2, k3 = jax.random.split(key, 3)
  correct = jax.random.bernoulli(k1, 0.5, (n * G,)).astype(jnp.float32)
  fmt = jax.random.bernoulli(k2, 0.7, (n * G,)).astype(jnp.float32)
  a_comp = marc.group_accuracy(correct, G)
  a_full = jax.random.uniform(k3, (n,), minval=0.3, maxval=1.0)
  rc = jnp.repeat(marc.compression_reward(a_comp, a_full, alpha=1.0,
                                          tau=0.6), G)
  return correct, fmt, rc


def test_cgrpo_advantages_equal_grpo_with_binary_rewards_and_std_norm():
  G = 8
  correct, fmt, rc = _groups(jax.random.PRNGKey(3))
  assert float(rc.max()) > 0.2         # the compression reward is active
  adv = lambda r, **kw: grpo.group_advantages(r, G, eps=1e-8, **kw)
  rew = lambda mode, w: marc.cgrpo_rewards(correct, fmt, rc,
                                           format_weight=w, mode=mode)
  # binary r_i, std-normalised: gated == GRPO
  np.testing.assert_allclose(adv(rew('gated', 0.0)), adv(rew('grpo', 0.0)),
                             atol=1e-5)
  # with the default eps = 1e-4 the equality holds to ~1e-3
  np.testing.assert_allclose(
      grpo.group_advantages(rew('gated', 0.0), G),
      grpo.group_advantages(rew('grpo', 0.0), G), rtol=1e-3, atol=1e-3)
  # a format term breaks it
  gap = jnp.abs(adv(rew('gated', 0.5)) - adv(rew('grpo', 0.5))).max()
  assert float(gap) > 0.02
  # so does dropping the std normalisation (Dr. GRPO)
  gap = jnp.abs(adv(rew('gated', 0.0), std_normalize=False)
                - adv(rew('grpo', 0.0), std_normalize=False)).max()
  assert float(gap) > 0.02
  # ungated: r_c is a constant shift of the group, == GRPO for any r_i
  for w in (0.0, 0.5):
    np.testing.assert_allclose(adv(rew('ungated', w)), adv(rew('grpo', w)),
                               atol=1e-5)
  # the traced mode index selects the same rewards
  np.testing.assert_array_equal(
      jax.jit(lambda m: marc.cgrpo_rewards(correct, fmt, rc,
                                           format_weight=0.5, mode=m))(1),
      rew('gated', 0.5))


def test_video_config_errors_name_the_field():
  with pytest.raises(ValueError, match='num_events'):
    marc.VideoConfig(num_events=9)
  with pytest.raises(ValueError, match='num_classes'):
    marc.VideoConfig(num_classes=9)
