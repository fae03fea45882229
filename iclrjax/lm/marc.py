"""MARC: Memory-Augmented RL token Compression for video QA (Wu et al.,
arXiv 2510.07915, ICLR 2026), on synthetic event videos and `lm.model`.

The method has three parts (paper Sec. 3; the reference code was not
available, the definitions follow the paper text, arXiv 2510.07915):

1. **Visual Memory Retriever (VMR).** An event-boundary detector splits the
   video into event clips; the query and the clips are embedded in one
   space and the top-k (k = 3) clips by cosine similarity are retrieved.
   Here: a boundary where the cosine between adjacent frames' patch means
   drops below a threshold (`segment`), clip embedding = mean of its frame
   means, cosine to the query (`retrieve`).
2. **Memory-aware temporal compression** (non-parametric, `compress`).
   Stage 1 (intra-segment): inside each retrieved clip, repeatedly merge
   the most similar *adjacent* frame pair, H = (H_a + H_b) / 2, with the
   patch-aligned similarity sim(a, b) = 1/P sum_p cos(h_a^p, h_b^p), until
   every clip holds at most `frames_per_segment` frames. Stage 2
   (cross-segment): while more than `target_frames` frames remain, merge the
   most similar adjacent pair globally. With `target_frames` = 1 the student
   sees P visual tokens instead of T * P.
3. **C-GRPO.** The student (initialised from the teacher, fed the compressed
   input) samples G answers per question; the teacher (full frames) samples
   G answers to the same question. With a_comp / a_full the two groups'
   accuracies, the maintenance ratio eta = a_comp / a_full, the
   compression reward r_c = alpha * max(0, eta - tau) (tau = 0.6), and the
   gated reward R_i = r_i + 1[correct_i] * r_c, where r_i is accuracy plus a
   format reward. Advantages are group-relative (`grpo.group_advantages`,
   DeepSeekMath eq. 4) and the loss is PPO-clip with a k3 KL to the
   reference (`grpo.policy_loss`, eq. 3).

A derivation (not in the paper) that the tests pin: eta is per question,
so r_c = c is constant in a group. With r_i = correct_i in {0, 1} the gated
reward is correct_i (1 + c), whose std-normalised advantage equals GRPO's;
the ungated reward r_i + c equals GRPO's for *any* r_i. Only a non-binary
r_i (the format term) with the gate, or no std normalisation, separates
C-GRPO from GRPO.

Synthetic event video (`make_video`): T frames of P patch vectors in
d = d_scene + d_attr dimensions. E events with orthogonal scene vectors in
the first d_scene dims (plus per-patch jitter and per-frame noise); the
query is the queried event's scene plus noise; a class c in {0..K-1} is
written as a one-hot code in the last d_attr dims into a few frames of the
queried event; optionally other classes into a few frames of
`num_distractors` distractor events (the events least similar to the query),
so that the answer needs the query to pick the event. The answer is
`<fmt> c // 4 c % 4 <eos>`, a two-token code with a format.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from iclrjax.core import distributed
from iclrjax.lm import grpo
from iclrjax.lm import model as lm_model
from iclrjax.lm import sample as lm_sample

# Answer vocabulary: PAD, FMT, EOS, then the digits of the class code.
PAD, FMT, EOS = 0, 1, 2
DIGIT0 = 3
CODE_BASE = 4                 # class c -> digits (c // 4, c % 4)
VOCAB_SIZE = DIGIT0 + CODE_BASE
ANSWER_LEN = 4                # <fmt> a1 a2 <eos>
REWARD_MODES = ('grpo', 'gated', 'ungated')


@dataclasses.dataclass(frozen=True)
class VideoConfig:
  """The synthetic event video (hashable: a static argument)."""
  num_frames: int = 32          # T
  num_patches: int = 4          # P
  d_scene: int = 8
  d_attr: int = 8               # one-hot class codes live here
  num_events: int = 5           # E <= d_scene (orthogonal scenes)
  min_event_len: int = 4
  num_classes: int = 8          # K <= d_attr
  attr_frames: int = 2          # frames of an event that carry its class
  attr_scale: float = 1.0
  num_distractors: int = 0      # other events carrying another class
  patch_jitter: float = 0.3     # per-patch deviation from the event scene
  frame_noise: float = 0.1      # per-frame, per-coordinate noise std
  query_noise: float = 0.3

  @property
  def dim(self) -> int:
    return self.d_scene + self.d_attr

  def __post_init__(self):
    if self.num_events > self.d_scene:
      raise ValueError(f'VideoConfig.num_events={self.num_events} exceeds '
                       f'd_scene={self.d_scene} (orthogonal scenes)')
    if self.num_classes > self.d_attr:
      raise ValueError(f'VideoConfig.num_classes={self.num_classes} exceeds '
                       f'd_attr={self.d_attr} (one-hot codes)')
    if self.num_classes > CODE_BASE * CODE_BASE:
      raise ValueError(f'VideoConfig.num_classes={self.num_classes} exceeds '
                       f'{CODE_BASE ** 2} (two-digit codes)')
    if self.num_events * self.min_event_len > self.num_frames:
      raise ValueError(f'VideoConfig: num_events * min_event_len = '
                       f'{self.num_events * self.min_event_len} exceeds '
                       f'num_frames={self.num_frames}')
    if self.attr_frames > self.min_event_len:
      raise ValueError(f'VideoConfig.attr_frames={self.attr_frames} exceeds '
                       f'min_event_len={self.min_event_len}')
    if self.num_distractors >= self.num_events:
      raise ValueError(f'VideoConfig.num_distractors={self.num_distractors}'
                       f' must be < num_events={self.num_events}')


class Video(NamedTuple):
  frames_TxPxD: jax.Array
  query_D: jax.Array
  event_T: jax.Array        # true event id of each frame
  boundary_T: jax.Array     # True where a new event starts (t >= 1)
  target_event: jax.Array   # the queried event
  label: jax.Array          # its class


def make_video(key: jax.Array, cfg: VideoConfig) -> Video:
  """One synthetic event video with a query and its answer (see module)."""
  T, P, E = cfg.num_frames, cfg.num_patches, cfg.num_events
  ks = jax.random.split(key, 9)
  # Event lengths: min_event_len each plus a random split of the rest.
  extra = T - E * cfg.min_event_len
  cuts = jnp.sort(jax.random.randint(ks[0], (E - 1,), 0, extra + 1))
  lens = cfg.min_event_len + jnp.diff(jnp.concatenate(
      [jnp.zeros(1, cuts.dtype), cuts, jnp.full(1, extra, cuts.dtype)]))
  starts = jnp.cumsum(lens) - lens
  event_T = jnp.searchsorted(jnp.cumsum(lens), jnp.arange(T), side='right')
  boundary_T = jnp.zeros(T, bool).at[starts[1:]].set(True)
  # Orthogonal scenes, jittered per patch.
  basis, _ = jnp.linalg.qr(jax.random.normal(ks[1], (cfg.d_scene,
                                                     cfg.d_scene)))
  scene_ExS = basis[:E]
  jitter = cfg.patch_jitter * jax.random.normal(
      ks[2], (E, P, cfg.d_scene)) / jnp.sqrt(cfg.d_scene)
  patch_ExPxS = scene_ExS[:, None] + jitter
  target = jax.random.randint(ks[3], (), 0, E)
  query_S = scene_ExS[target] + cfg.query_noise * jax.random.normal(
      ks[4], (cfg.d_scene,)) / jnp.sqrt(cfg.d_scene)
  # Classes: the target's, and distinct others for the distractor events
  # (the events least similar to the query).
  perm = jax.random.permutation(ks[5], cfg.num_classes)
  sim = jnp.where(jnp.arange(E) == target, jnp.inf, scene_ExS @ query_S)
  order = jnp.argsort(sim)                    # least similar first
  class_E = jnp.full(E, -1).at[target].set(perm[0])
  class_E = class_E.at[order[:cfg.num_distractors]].set(
      perm[1:cfg.num_distractors + 1])
  # Attribute frames: attr_frames random frames inside each labelled event.
  offs = jax.vmap(lambda k, n: jax.random.choice(
      k, cfg.min_event_len, (cfg.attr_frames,), replace=False) *
      n // cfg.min_event_len)(jax.random.split(ks[6], E), lens)
  attr_T = jnp.zeros(T, bool).at[(starts[:, None] + offs).reshape(-1)].set(
      jnp.repeat(class_E >= 0, cfg.attr_frames))
  code_TxA = jax.nn.one_hot(class_E[event_T], cfg.d_attr) * attr_T[:, None]
  noise = cfg.frame_noise * jax.random.normal(ks[7], (T, P, cfg.dim))
  frames = jnp.concatenate(
      [patch_ExPxS[event_T],
       jnp.broadcast_to(cfg.attr_scale * code_TxA[:, None],
                        (T, P, cfg.d_attr))], -1) + noise
  query = jnp.concatenate([query_S, jnp.zeros(cfg.d_attr)])
  return Video(frames, query, event_T, boundary_T, target, perm[0])


def make_videos(key: jax.Array, cfg: VideoConfig, n: int) -> Video:
  """n videos; inside a training step on a mesh their keys (and so the
  videos) split over 'data' (`distributed.shard_batch`)."""
  keys = distributed.shard_batch(jax.random.split(key, n))
  return jax.vmap(lambda k: make_video(k, cfg))(keys)


# --------------------------------------------------------------------------
# Visual Memory Retriever


def _cos(a, b, axis=-1):
  na = jnp.linalg.norm(a, axis=axis)
  nb = jnp.linalg.norm(b, axis=axis)
  return jnp.sum(a * b, axis) / jnp.maximum(na * nb, 1e-8)


def segment(frames_TxPxD: jax.Array, threshold: float
            ) -> tuple[jax.Array, jax.Array]:
  """Event boundaries by cosine change-points of the frame means:
  boundary_T[t] = cos(mean_p x_t, mean_p x_{t-1}) < threshold (t >= 1);
  segment ids are their running count."""
  m = frames_TxPxD.mean(1)
  b = jnp.concatenate([jnp.zeros(1, bool), _cos(m[1:], m[:-1]) < threshold])
  return b, jnp.cumsum(b)


def boundary_f1(pred_NxT: jax.Array, true_NxT: jax.Array) -> jax.Array:
  """F1 of predicted vs true boundary positions, pooled over videos."""
  tp = jnp.sum(pred_NxT & true_NxT)
  prec = tp / jnp.maximum(pred_NxT.sum(), 1)
  rec = tp / jnp.maximum(true_NxT.sum(), 1)
  return 2 * prec * rec / jnp.maximum(prec + rec, 1e-8)


def retrieve(frames_TxPxD: jax.Array, seg_T: jax.Array, query_D: jax.Array,
             top_k: int) -> jax.Array:
  """Frames of the top-k segments by cos(query, segment mean of the frame
  means): keep_T (bool)."""
  T = frames_TxPxD.shape[0]
  m = frames_TxPxD.mean(1)
  n = jax.ops.segment_sum(jnp.ones(T), seg_T, T)
  seg_mean = jax.ops.segment_sum(m, seg_T, T) / jnp.maximum(n, 1)[:, None]
  score = jnp.where(n > 0, _cos(seg_mean, query_D[None]), -jnp.inf)
  _, top = jax.lax.top_k(score, top_k)
  return jnp.isin(seg_T, top)


def frame_similarity(a_PxD: jax.Array, b_PxD: jax.Array) -> jax.Array:
  """Patch-aligned mean cosine, 1/P sum_p cos(h_a^p, h_b^p)."""
  return _cos(a_PxD, b_PxD).mean(-1)


class Compressed(NamedTuple):
  """Frame slots after merging, in time order: frames_TxPxD (the first
  `count` are live), seg_T (each slot's segment), members_TxT (slot i holds
  source frame j)."""
  frames_TxPxD: jax.Array
  seg_T: jax.Array
  members_TxT: jax.Array
  count: jax.Array


def compress(frames_TxPxD: jax.Array, seg_T: jax.Array, keep_T: jax.Array,
             frames_per_segment: int, target_frames: int) -> Compressed:
  """Memory-aware temporal compression of the kept frames (see module).

  Each iteration merges one adjacent pair of live slots (i, i + 1) into
  slot i, (H_i + H_{i+1}) / 2, and shifts the later slots left: stage 1
  pairs lie in one segment that still holds more than `frames_per_segment`
  slots; once none is left, stage 2 pairs are any adjacent slots while more
  than `target_frames` remain. At most T - 1 merges (a static bound).
  """
  T = frames_TxPxD.shape[0]
  idx = jnp.arange(T)
  order = jnp.argsort(~keep_T, stable=True)       # kept frames first
  x, seg = frames_TxPxD[order], seg_T[order]
  members = jax.nn.one_hot(order, T, dtype=bool) & keep_T[order][:, None]
  count = keep_T.sum()

  def body(_, carry):
    x, seg, members, count = carry
    live = idx < count
    pair = (idx + 1 < count)
    same = pair & (seg == jnp.roll(seg, -1))
    per_seg = jax.ops.segment_sum(live.astype(jnp.int32), seg, T)
    stage1 = same & (per_seg[seg] > frames_per_segment)
    stage2 = pair & (count > target_frames)
    allowed = jnp.where(stage1.any(), stage1, stage2)
    sim = frame_similarity(x, jnp.roll(x, -1, 0))
    i = jnp.argmax(jnp.where(allowed, sim, -jnp.inf))
    src = jnp.where(idx <= i, idx, jnp.minimum(idx + 1, T - 1))
    merged = (x[i] + x[i + 1]) / 2
    new_x = x[src].at[i].set(merged)
    new_members = members[src].at[i].set(members[i] | members[i + 1])
    new_seg = seg[src]
    do = allowed.any()
    pick = lambda a, b: jnp.where(do, a, b)
    return (pick(new_x, x), pick(new_seg, seg),
            pick(new_members, members), count - do.astype(count.dtype))

  x, seg, members, count = jax.lax.fori_loop(0, T - 1, body,
                                             (x, seg, members, count))
  return Compressed(x, seg, members, count)


@dataclasses.dataclass(frozen=True)
class VMRConfig:
  """The Visual Memory Retriever and the compression budgets."""

  threshold: float = 0.5        # segmentation: cosine change-point
  top_k: int = 3                # retrieved clips
  frames_per_segment: int = 1   # stage-1 budget rho per clip
  target_frames: int = 1        # stage-2 budget N_target (P tokens each)


def vmr_tokens(video: Video, cfg: VMRConfig) -> jax.Array:
  """The student's visual input: [target_frames * P, D] tokens (one video).
  Fewer kept frames than target_frames (not with top-k >= 1 segments of
  >= target_frames frames) would leave zero slots."""
  _, seg = segment(video.frames_TxPxD, cfg.threshold)
  keep = retrieve(video.frames_TxPxD, seg, video.query_D, cfg.top_k)
  c = compress(video.frames_TxPxD, seg, keep, cfg.frames_per_segment,
               cfg.target_frames)
  x = c.frames_TxPxD[:cfg.target_frames]
  return x.reshape(-1, x.shape[-1])


def random_tokens(key: jax.Array, video: Video, num_tokens: int
                  ) -> jax.Array:
  """Control: num_tokens patch tokens drawn uniformly without replacement
  from all T * P, in time order (no retrieval, no merging)."""
  flat = video.frames_TxPxD.reshape(-1, video.frames_TxPxD.shape[-1])
  pick = jnp.sort(jax.random.choice(key, flat.shape[0], (num_tokens,),
                                    replace=False))
  return flat[pick]


def full_tokens(video: Video) -> jax.Array:
  """The teacher's visual input: all T * P patch tokens in time order."""
  return video.frames_TxPxD.reshape(-1, video.frames_TxPxD.shape[-1])


# --------------------------------------------------------------------------
# Answers and rewards


def encode_answer(label_B: jax.Array) -> jax.Array:
  """<fmt> c // 4 c % 4 <eos>: [B, 4] tokens."""
  return jnp.stack([jnp.full_like(label_B, FMT),
                    DIGIT0 + label_B // CODE_BASE,
                    DIGIT0 + label_B % CODE_BASE,
                    jnp.full_like(label_B, EOS)], -1).astype(jnp.int32)


def accuracy_reward(tokens_NxT: jax.Array, label_N: jax.Array) -> jax.Array:
  """r_acc = 1 if the answer is exactly <fmt> code <eos>."""
  return jnp.all(tokens_NxT == encode_answer(label_N), -1).astype(
      jnp.float32)


def format_reward(tokens_NxT: jax.Array) -> jax.Array:
  """r_fmt = 1 if the answer has the shape <fmt> digit digit <eos>."""
  digit = lambda t: (t >= DIGIT0) & (t < DIGIT0 + CODE_BASE)
  return ((tokens_NxT[:, 0] == FMT) & digit(tokens_NxT[:, 1])
          & digit(tokens_NxT[:, 2]) & (tokens_NxT[:, 3] == EOS)).astype(
              jnp.float32)


def group_accuracy(correct_N: jax.Array, group_size: int) -> jax.Array:
  """Mean of each consecutive group: [N] -> [N / G]."""
  return correct_N.reshape(-1, group_size).mean(-1)


def compression_reward(a_comp_B: jax.Array, a_full_B: jax.Array, *,
                       alpha: float, tau: float) -> jax.Array:
  """r_c = alpha * max(0, eta - tau), eta = a_comp / a_full per question.

  A question the teacher never solves (a_full = 0) has no reference to
  maintain: eta = 0 there, so r_c = 0."""
  eta = jnp.where(a_full_B > 0, a_comp_B / jnp.maximum(a_full_B, 1e-8), 0.0)
  return alpha * jnp.maximum(0.0, eta - tau)


def cgrpo_rewards(correct_N: jax.Array, format_N: jax.Array,
                  rc_N: jax.Array, *, format_weight: float,
                  mode: jax.Array | str) -> jax.Array:
  """R_i = r_i + g_i * r_c with r_i = correct_i + format_weight * fmt_i and
  g_i = 1[correct_i] ('gated', C-GRPO), 1 ('ungated'), 0 ('grpo').
  `mode` may be a traced index into REWARD_MODES."""
  if isinstance(mode, str):
    mode = REWARD_MODES.index(mode)
  r = correct_N + format_weight * format_N
  gate = jnp.select([mode == 0, mode == 1], [jnp.zeros_like(correct_N),
                                             correct_N],
                    jnp.ones_like(correct_N))
  return r + gate * rc_N


# --------------------------------------------------------------------------
# The visual LM: projected frame tokens and a query token, then the answer.


@dataclasses.dataclass(frozen=True)
class VisualLM:
  """`lm.model` fed [frame tokens @ W_frame; query @ W_query] as prompt
  embeddings, the answer tokens through its own embedding table.
  Parameters: {'lm': decoder params, 'frame_proj': [d, D],
  'query_proj': [d, D]}."""
  model: lm_model.Model
  dim: int

  def init(self, key: jax.Array):
    k1, k2, k3 = jax.random.split(key, 3)
    D = self.model.cfg.d_model
    w = lambda k: jax.random.normal(k, (self.dim, D)) * self.dim ** -0.5
    return {'lm': self.model.init(k1), 'frame_proj': w(k2),
            'query_proj': w(k3)}

  def prompt(self, params, visual_BxNxd: jax.Array,
             query_Bxd: jax.Array) -> jax.Array:
    """Prompt embeddings [B, N + 1, D]."""
    return jnp.concatenate([visual_BxNxd @ params['frame_proj'],
                            (query_Bxd @ params['query_proj'])[:, None]], 1)

  def answer_logprobs(self, params, prompt_BxPxD: jax.Array,
                      answer_BxT: jax.Array, temperature: float = 1.0
                      ) -> jax.Array:
    """log pi(o_t | prompt, o_<t) of each answer token under the logits
    divided by `temperature` (the policy `sample` draws from): [B, T]."""
    emb = params['lm']['embed']['embedding'][answer_BxT]
    x = jnp.concatenate([prompt_BxPxD, emb], 1)
    logits = self.model.apply(params['lm'], None, embeds_BxLxD=x)
    P = prompt_BxPxD.shape[1]
    logp = jax.nn.log_softmax(
        logits[:, P - 1:-1].astype(jnp.float32) / temperature, -1)
    return jnp.take_along_axis(logp, answer_BxT[..., None], -1)[..., 0]

  def sample(self, params, prompt_BxPxD: jax.Array, key: jax.Array, *,
             num_samples: int = 1, greedy: bool = False,
             temperature: float = 1.0) -> lm_sample.Samples:
    return lm_sample.sample(
        self.model, params['lm'], None, key, max_new_tokens=ANSWER_LEN,
        num_samples=num_samples, greedy=greedy, temperature=temperature,
        stop_tokens=(EOS,), pad_token=PAD,
        prompt_embeds_BxPxD=prompt_BxPxD)


def sft_loss(vlm: VisualLM, params, visual_BxNxd, query_Bxd, label_B):
  """Cross-entropy of the answer tokens given the prompt."""
  return -vlm.answer_logprobs(params, vlm.prompt(params, visual_BxNxd,
                                                 query_Bxd),
                              encode_answer(label_B)).mean()


def greedy_correct(vlm: VisualLM, params, visual_BxNxd, query_Bxd,
                   label_B) -> jax.Array:
  """Whether each greedy answer is right: [B] in {0, 1}."""
  s = vlm.sample(params, vlm.prompt(params, visual_BxNxd, query_Bxd),
                 jax.random.PRNGKey(0), greedy=True)
  return accuracy_reward(s.tokens_NxT, label_B)


def greedy_accuracy(vlm: VisualLM, params, visual_BxNxd, query_Bxd,
                    label_B) -> jax.Array:
  return greedy_correct(vlm, params, visual_BxNxd, query_Bxd, label_B).mean()


@dataclasses.dataclass(frozen=True)
class CGRPOConfig:
  """C-GRPO: GRPO's settings plus the compression reward's alpha and tau
  and the format reward's weight."""

  grpo: grpo.GRPOConfig = grpo.GRPOConfig()
  alpha: float = 1.0            # r_c scale
  tau: float = 0.6              # eta threshold (the paper's best)
  format_weight: float = 0.5    # r_i = acc + format_weight * fmt


def make_cgrpo_step(vlm: VisualLM, optimizer, cfg: CGRPOConfig):
  """One (C-)GRPO step, unjitted:

  (train_state, ref_params, teacher_params, batch, key, mode) ->
  (train_state, metrics), batch = (full_BxNxd, comp_BxMxd, query_Bxd,
  label_B). The student samples G answers on the compressed input, the
  frozen teacher G answers on the full input (a_full); rewards by
  `cgrpo_rewards(mode)`, eq. 4 advantages, eq. 3 loss.
  """
  g = cfg.grpo
  G = g.num_generations

  def step(state: grpo.TrainState, ref_params, teacher_params, batch, key,
           mode):
    full, comp, query, label = batch
    k_s, k_t = jax.random.split(key)
    prompt = vlm.prompt(state.params, comp, query)
    s = vlm.sample(state.params, prompt, k_s, num_samples=G,
                   temperature=g.temperature)
    t = vlm.sample(teacher_params, vlm.prompt(teacher_params, full, query),
                   k_t, num_samples=G, temperature=g.temperature)
    label_n = jnp.repeat(label, G)
    correct = accuracy_reward(s.tokens_NxT, label_n)
    fmt = format_reward(s.tokens_NxT)
    a_comp = group_accuracy(correct, G)
    a_full = group_accuracy(accuracy_reward(t.tokens_NxT, label_n), G)
    rc = jnp.repeat(compression_reward(a_comp, a_full, alpha=cfg.alpha,
                                       tau=cfg.tau), G)
    rewards = cgrpo_rewards(correct, fmt, rc, format_weight=cfg.format_weight,
                            mode=mode)
    adv_fn = functools.partial(grpo.group_advantages, group_size=G,
                               std_normalize=g.std_normalize,
                               ddof=g.adv_ddof, eps=g.adv_eps)
    adv = adv_fn(rewards)
    # how far this arm's update is from plain GRPO's on the same rollouts
    adv_gap = jnp.abs(adv - adv_fn(cgrpo_rewards(
        correct, fmt, rc, format_weight=cfg.format_weight, mode=0))).max()
    comp_n = jnp.repeat(comp, G, 0)
    query_n = jnp.repeat(query, G, 0)
    toks, mask = distributed.shard_batch((s.tokens_NxT, s.mask_NxT))

    def logp(p):
      return vlm.answer_logprobs(p, vlm.prompt(p, comp_n, query_n), toks,
                                 g.temperature)

    old = jax.lax.stop_gradient(logp(state.params))
    ref = jax.lax.stop_gradient(logp(ref_params))

    def loss_fn(p):
      return grpo.policy_loss(logp(p), old, ref, adv, mask,
                              clip_eps=g.clip_eps, kl_beta=g.kl_beta,
                              loss_aggregation=g.loss_aggregation)

    (loss, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(
        state.params)
    updates, opt = optimizer.update(grads, state.opt_state, state.params)
    state = grpo.TrainState(optax.apply_updates(state.params, updates), opt,
                            state.step + 1)
    return state, {'loss': loss, 'reward': rewards.mean(),
                   'accuracy': correct.mean(), 'format': fmt.mean(),
                   'a_full': a_full.mean(), 'r_c': rc.mean(),
                   'kl': aux['kl'], 'adv_gap_vs_grpo': adv_gap}

  return step
