"""The AR buffer against conorhassan/AR-nanoTabPFN on the same inputs: the
attention masks (training row mask, teacher-forcing mask, decode masks), the
buffer positions of the teacher-forced joint density and of the sampler,
the mixture head on the same backbone output, and the log-density from the
same mixture outputs. The embedder, ar_tokens and head weights are the
fixture's (drawn with NumPy, run in torch); the backbones differ by design
(module doc), so their outputs are the reference's recorded ones."""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from iclrjax.neural_process import arbuffer as ab
from tests.parity import common

PAPER = ('Efficient Autoregressive Inference for Transformer Probabilistic '
         'Models (arXiv 2510.09477)')
FIXTURE = 'arbuffer'

# float32 rounding of O(1) values: sums of a few terms (tokens), a two-layer
# MLP with matmuls summed in another order (head), a logsumexp over three
# components (log-density).
TOL_TOKENS = 1e-5
TOL_HEAD = 1e-5
TOL_LOGPDF = 1e-5


def _config(a) -> ab.Config:
  d_ff, d = a['w.head.head.0.weight'].shape
  k = a['w.ar_tokens'].shape[0]
  return ab.Config(x_dim=1, d_model=d, num_heads=2, num_layers=1, d_ff=d_ff,
                   buffer_size=k, num_components=a['w.head.mean_bias'].size)


def _params(a) -> dict:
  """The fixture's torch weights in our layout (Dense kernels transposed)."""
  dense = lambda n: {'kernel': a[f'w.{n}.weight'].T, 'bias': a[f'w.{n}.bias']}
  return {
      'embed': {'x_embed': dense('embedder.x_embed'),
                'y_embed': dense('embedder.y_embed'),
                'marker': {'embedding': a['w.embedder.marker_embed.weight']},
                'ar_tokens': a['w.ar_tokens']},
      'head': {'hidden': dense('head.head.0'), 'out': dense('head.head.2'),
               'mean_bias': a['w.head.mean_bias'],
               'std_bias': a['w.head.std_bias'],
               'weight_bias': a['w.head.weight_bias']},
  }


@functools.cache
def _ours():
  """The fixture, and every quantity of ours in one compiled program (run
  once per session)."""
  a, _ = common.load(FIXTURE)
  cfg = _config(a)
  nt = a['yt'].shape[1]
  row_cfgs = [(int(c), int(b), int(t), None if k < 0 else int(k))
              for c, b, t, k in a['row_cfg']]

  @jax.jit
  def run(p, xt, yt, z_t, mix, samp_y):
    masks = ([ab.training_mask(*c) for c in row_cfgs],
             ab.teacher_forcing_mask(nt), [ab.decode_mask(n) for n in (1, 2)])
    tf_tokens = jnp.concatenate([
        ab.embed_buffer(p, cfg, xt, yt, jnp.arange(nt)),
        ab.embed_target(p, cfg, xt)], 1)
    head = ab.head(p, cfg, z_t)
    logpdf = ab.mixture_logpdf(ab.Mixture(*mix), yt)
    first = ab.embed_target(p, cfg, xt[:, :1])
    ts = jnp.arange(1, nt)
    steps = jax.vmap(lambda t: ab.decode_tokens(
        p, cfg, xt[:, t - 1], samp_y[:, t - 1], xt[:, t], t))(ts)
    init = ab.MixtureHead(cfg).init(jax.random.key(0),
                                    jnp.zeros((1, cfg.d_model)))['params']
    return masks, tf_tokens, head, logpdf, first, steps, init

  return a, cfg, jax.device_get(run(
      _params(a), a['xt'], a['yt'], a['tf_z'][:, nt:],
      (a['mix_mean'], a['mix_std'], a['mix_logw']), a['samp_y']))


def _sampler_shift(a):
  """What their sampler adds to our step-t tokens: ar_tokens[t % K] -
  ar_tokens[(t - 1) % K] on the buffer token, nothing on the target."""
  ar = a['w.ar_tokens']
  k, nt = ar.shape[0], a['yt'].shape[1]
  shift = np.zeros(a['samp_tokens'].shape, np.float32)
  for t in range(1, nt):
    shift[t - 1, :, 0] = ar[t % k] - ar[(t - 1) % k]
  return shift


def checks() -> list[common.Check]:
  a, _, (masks, tf_tokens, head, logpdf, first, steps, init) = _ours()
  row_masks, tf_mask, decode_masks = masks
  nt, nc = a['yt'].shape[1], a['yc'].shape[1]
  out = []

  # Masks (True = may attend): mismatching entries.
  bad = 0
  for i, ours in enumerate(row_masks):
    bad += int(np.sum(ours != a[f'row_mask_{i}']))
  out.append(common.Check(
      'training row mask (create_row_mask; 5 shapes, default and given '
      'attending chunks)', float(bad), 0.0))
  tf = np.concatenate([np.ones((2 * nt, nc), bool),
                       tf_mask], 1)
  out.append(common.Check(
      'teacher-forcing mask over [context | b_0..b_N-1, t_0..t_N-1]',
      float(np.sum(tf != a['tf_mask'])), 0.0))
  bad = 0
  for n, dm in zip((1, 2), decode_masks):
    ref = a[f'decode_mask_{n}']
    ours = np.concatenate([np.ones((n, ref.shape[1] - n), bool), dm], 1)
    bad += int(np.sum(ours != ref))
  out.append(common.Check('decode-step masks ([t_0]; [b_t-1, t_t])',
                          float(bad), 0.0))

  # Positions: the teacher-forced pass gives buffer point i ar_tokens[i % K].
  out.append(common.Check(
      'teacher-forced tokens [b_i at position i mod K, t_i]',
      common.max_diff(tf_tokens, a['tf_tokens']), TOL_TOKENS))
  out.append(common.Check(
      'sampler step-0 token [t_0]',
      common.max_diff(first, a['samp_first']), TOL_TOKENS))
  out.append(common.Check(
      'deliberate: sampler buffer position t - 1 for point t - 1 (theirs: '
      't); their step tokens - ours == ar[t % K] - ar[(t - 1) % K] on b_t-1',
      common.max_diff(a['samp_tokens'] - steps, _sampler_shift(a)),
      TOL_TOKENS))

  # The head on their backbone output, and the log-density from their
  # mixture outputs.
  out.append(common.Check(
      'deliberate: head GELU tanh (theirs exact erf); ours == their head '
      'with nn.GELU(approximate="tanh") (mean, std incl. the clamp, '
      'log-weights)',
      max(common.max_diff(head[j], a[f'mix_tanh_{n}'])
          for j, n in enumerate(('mean', 'std', 'logw'))), TOL_HEAD))
  out.append(common.Check(
      'head bias initialisation (mean linspace, std softplus^-1(1/(M-1)), '
      'weights 0)',
      max(common.max_diff(init[n], a[f'init.{n}'])
          for n in ('mean_bias', 'std_bias', 'weight_bias')), 1e-6))
  out.append(common.Check(
      'per-target log-density from the same mixture (evaluate_joint_density)',
      common.max_diff(logpdf, a['tf_logpdf']), TOL_LOGPDF))
  return out


def test_matches_reference():
  common.assert_checks(checks())


def test_deliberate_differences_are_real():
  """Both deliberate differences change the numbers: the sampler's shift
  is a different ar_token on every step, and the exact-GELU head differs
  from ours beyond rounding."""
  a, _, (_, _, head, *_) = _ours()
  shift = _sampler_shift(a)
  assert np.abs(shift[:, :, 0]).max(axis=(1, 2)).min() > 0.1
  assert np.all(shift[:, :, 1] == 0)
  gap = max(common.max_diff(head[j], a[f'mix_{n}'])
            for j, n in enumerate(('mean', 'std', 'logw')))
  assert gap > 10 * TOL_HEAD
  # The sampler really draws with their buffer tokens: step t's buffer
  # token carries point t - 1's y (not a constant).
  assert np.abs(np.diff(a['samp_y'], axis=1)).min() > 0
