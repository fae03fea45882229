"""Flow2GAN against the released code (k2-fsa/Flow2GAN): the GAN losses
(mel reconstruction, hinge, feature matching), both discriminators with the
same weights, the stage-1 spectral-energy loss, the Euler sampler, the
log-mel condition, the time embedding, a branch's STFT / iSTFT and the
MR-STFT metric (auraloss), on the fixture's NumPy-drawn signals.

Reference files and lines are at k2-fsa/Flow2GAN ec5b85d (flow2gan/models/).
Deliberate difference: a branch's iSTFT keeps the overlap-added tail past
hop (F - 1) samples (torch.istft with length=N); the reference zero-fills it
(modules.py:105-116, 716-720; ours: audio.istft, documented in the module
docstring of iclrjax/diffusion/flow2gan.py).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from iclrjax.diffusion import audio
from iclrjax.diffusion import flow2gan as f2g
from iclrjax.diffusion import nets
from tests.parity import common

PAPER = ('Flow2GAN: Hybrid Flow Matching and GAN with Multi-Resolution '
         'Network for Few-step High-Fidelity Audio Generation (2512.23278)')
FIXTURE = 'flow2gan'

MEL_8K = ((32, 64, 128, 256, 512), (5, 10, 20, 40, 80))
MEL_24K = ((1024, 2048), (160, 320))  # the paper's largest two scales
MP_WIDTHS = (4, 8, 8, 8, 8)
AURALOSS_DEFAULT = ((1024, 120, 600), (2048, 240, 1200), (512, 50, 240))


def _conv(a, prefix):
  """torch Conv2d [out, in, kh, kw] -> flax {'kernel': [kh, kw, in, out]}."""
  return {'kernel': jnp.asarray(a[f'{prefix}_w'].transpose(2, 3, 1, 0)),
          'bias': jnp.asarray(a[f'{prefix}_b'])}


def _disc_params(a):
  mp = {f'conv{i}': _conv(a, f'mp_conv{i}') for i in range(len(MP_WIDTHS))}
  mp['post'] = _conv(a, 'mp_post')
  mr = {'post': _conv(a, 'mr_post')}
  for b in range(5):
    for i, name in enumerate(['conv0', 'conv1', 'conv2', 'conv3', 'conv_last']):
      mr[f'band{b}_{name}'] = _conv(a, f'mr_band{b}_conv{i}')
  return {'params': mp}, {'params': mr}


def _ours(a):
  """Every compared quantity of ours (one jit: one compilation)."""
  y, yhat = a['y'], a['yhat']
  o = {}
  o['mel_8k'] = f2g.multiscale_mel_loss(y, yhat, 8000, *MEL_8K)
  o['mel_24k'] = f2g.multiscale_mel_loss(y, yhat, 24000, *MEL_24K)
  # Losses on fixed arrays.
  sr = [a[f'score_real_{i}'] for i in range(3)]
  sf = [a[f'score_fake_{i}'] for i in range(3)]
  n_maps = (3, 2, 1)
  fr = [[a[f'fmap_real_{i}_{j}'] for j in range(n)]
        for i, n in enumerate(n_maps)]
  ff = [[a[f'fmap_fake_{i}_{j}'] for j in range(n)]
        for i, n in enumerate(n_maps)]
  o['d_loss'] = f2g.hinge_d_loss(sr, sf)
  o['g_loss'] = f2g.hinge_g_loss(sf)
  o['fm_loss'] = f2g.feature_matching_loss(fr, ff)
  # Discriminators with the reference's weights.
  mp_params, mr_params = _disc_params(a)
  yd, yhd = y[:, :512], yhat[:, :512]
  for name, disc, params in (
      ('mp', f2g.PeriodDiscriminator(3, MP_WIDTHS), mp_params),
      ('mr', f2g.ResolutionDiscriminator(64, channels=4), mr_params)):
    (s_r, f_r), (s_g, f_g) = disc.apply(params, yd), disc.apply(params, yhd)
    o[f'{name}_score_real'], o[f'{name}_score_fake'] = s_r, s_g
    o[f'{name}_fmap_sizes'] = jnp.asarray([f.size for f in f_r])
    o[f'{name}_fmap_absmean'] = jnp.stack([jnp.mean(jnp.abs(f)) for f in f_r])
    o[f'{name}_losses'] = jnp.stack([
        f2g.hinge_d_loss([s_r], [s_g]), f2g.hinge_g_loss([s_g]),
        f2g.feature_matching_loss([f_r], [f_g])])
  o['mr_input'] = jnp.concatenate(
      [b.transpose(0, 3, 1, 2).ravel() for b in f2g.mrd_input(yd, 64)])
  # Stage 1.
  err = yhat - y
  o['spec_loss'] = f2g.spectral_scaled_loss(
      err, y, sample_rate=8000, n_fft=256, hop=64, n_filters=64)
  o['mse_loss'] = jnp.mean(err ** 2)
  target = y[:, :512] / 4
  predict = lambda x, t: 0.5 * jnp.tanh(x) * (1.0 + t[:, None]) + target
  for pred_x1 in (True, False):
    o[f'euler_{"x1" if pred_x1 else "v"}'] = jnp.stack([
        f2g.euler_sample(predict, a['euler_noise'], steps, pred_x1=pred_x1)
        for steps in (1, 2, 4)])
  o['log_mel'] = audio.log_mel(y, 8000, 256, 64, 32).transpose(0, 2, 1)
  o['temb'] = nets.timestep_embedding(a['temb_t'], 32, scale=1000.0)
  s = audio.stft(y[:, :500], 128, 64).transpose(0, 2, 1)
  o['stft'] = jnp.stack([jnp.real(s), jnp.imag(s)])
  spec = jax.lax.complex(a['istft_in_re'], a['istft_in_im'])
  o['istft'] = audio.istft(spec.transpose(0, 2, 1), 128, 64, 500)
  o['mrstft_8k'] = audio.mrstft_loss(yhat, y)
  o['mrstft_auraloss_default'] = audio.mrstft_loss(yhat, y, AURALOSS_DEFAULT)
  return o


@functools.lru_cache(maxsize=1)
def _run():
  a, _ = common.load(FIXTURE)
  inputs = {k: v for k, v in a.items()
            if not k.endswith(('_loss', '_8k', '_24k', '_default'))
            and v.dtype == np.float32}
  # XLA's cheapest CPU optimisation level: compiling is most of this test's
  # time, and the results agree within the tolerances either way.
  o = jax.jit(_ours).lower(inputs).compile(dict(
      xla_backend_optimization_level=0,
      xla_llvm_disable_expensive_passes=True))(inputs)
  return a, {k: np.asarray(v) for k, v in o.items()}


def _rel(ours, theirs):
  """max |ours - theirs| / max(1, max |theirs|)."""
  return common.max_diff(ours, theirs) / max(1.0, float(np.max(np.abs(theirs))))


def _mel_max(a):
  return float(np.exp(np.max(a['log_mel'].astype(np.float64))))


def _floored(log_mel):
  return log_mel <= np.log(np.float32(audio.LOG_FLOOR)) + 1e-6


def checks() -> list[common.Check]:
  a, o = _run()
  c = common.check
  # float32 losses of O(1-20): 1e-5 relative to max(1, scale).
  rel = lambda q, ours, theirs, tol=1e-5: common.Check(
      q, _rel(ours, theirs), tol)
  tail = 64 * (1 + 500 // 64 - 1)  # hop (F - 1): where the reference stops
  out = [
      rel('mel reconstruction loss, 8 kHz scales 32..512 (gan.py:89-99)',
          o['mel_8k'], a['mel_loss_8k']),
      rel('mel reconstruction loss, paper 24 kHz scales 1024 and 2048',
          o['mel_24k'], a['mel_loss_24k']),
      rel('hinge discriminator loss, fixed scores (gan.py:57-66)',
          o['d_loss'], a['d_loss']),
      rel('hinge generator loss, fixed scores (gan.py:68-75)',
          o['g_loss'], a['g_loss']),
      rel('feature matching loss, fixed maps (gan.py:77-87)',
          o['fm_loss'], a['fm_loss']),
      c('MPD feature-map sizes (every conv but the first, + post)',
        o['mp_fmap_sizes'], a['mp_fmap_sizes'], 0),
      c('MRD feature-map sizes (5 bands x 4 convs, + post)',
        o['mr_fmap_sizes'], a['mr_fmap_sizes'], 0),
      rel('MRD input bands (DC removal, 0.8 peak, complex STFT)',
          o['mr_input'],
          np.concatenate([a[f'mr_input_band{b}'].ravel() for b in range(5)])),
  ]
  for name in ('mp', 'mr'):
    out += [
        rel(f'{name.upper()} scores, real and fake, same weights',
            np.stack([o[f'{name}_score_real'], o[f'{name}_score_fake']]),
            np.stack([a[f'{name}_score_real'], a[f'{name}_score_fake']]), 1e-4),
        rel(f'{name.upper()} feature maps mean |f|', o[f'{name}_fmap_absmean'],
            a[f'{name}_fmap_absmean'], 1e-4),
        rel(f'{name.upper()} hinge D / G and feature-matching losses',
            o[f'{name}_losses'],
            [a[f'{name}_d_loss'], a[f'{name}_g_loss'], a[f'{name}_fm_loss']],
            1e-4)]
  out += [
      rel('spectral-energy scaled FM loss (generator.py:185-199)',
          o['spec_loss'], a['spec_loss']),
      rel('plain MSE FM loss (generator.py:181-184)', o['mse_loss'],
          a['mse_loss']),
      rel('Euler sampler, endpoint model, 1/2/4 steps (generator.py:236-271)',
          o['euler_x1'],
          np.stack([a[f'euler_x1_{k}'] for k in (1, 2, 4)])),
      rel('Euler sampler, velocity model, 1/2/4 steps',
          o['euler_v'],
          np.stack([a[f'euler_v_{k}'] for k in (1, 2, 4)])),
      # Compared as mel = exp(log-mel), relative to its largest value: the
      # log of a quiet bin next to loud ones carries float32 STFT rounding
      # relative to that bin (1.2e-4 in one bin here).
      rel('log-mel condition, as exp(log mel) (modules.py:119-143)',
          np.exp(o['log_mel'].astype(np.float64)) / _mel_max(a),
          np.exp(a['log_mel'].astype(np.float64)) / _mel_max(a)),
      c('log-mel condition: bins at the 1e-7 floor (count differing)',
        np.sum(_floored(o['log_mel']) != _floored(a['log_mel'])), 0, 0),
      # sin / cos of arguments up to 999 rad: one float32 ulp (6e-5) apart.
      c('sinusoidal time embedding (modules.py:217-233)', o['temb'], a['temb'],
        2e-4),
      rel('branch STFT (modules.py:52-84)',
          o['stft'],
          np.stack([a['stft_re'], a['stft_im']])),
      rel('branch iSTFT up to hop (F - 1) (modules.py:87-116)',
          o['istft'][:, :tail], a['istft_out'][:, :tail]),
      istft_tail_check(o, a),
      rel('MR-STFT (auraloss), 8 kHz resolutions, per clip',
          o['mrstft_8k'], a['mrstft_8k']),
      rel('MR-STFT (auraloss), its 24 kHz default resolutions, per clip',
          o['mrstft_auraloss_default'], a['mrstft_auraloss_default']),
  ]
  return out


def istft_tail_check(o, a) -> common.Check:
  tail = 64 * (1 + 500 // 64 - 1)
  return common.Check(
      'deliberate: iSTFT tail past hop (F - 1) samples is the overlap-add '
      '(torch.istft length=N), the reference zero-fills it',
      _rel(o['istft'][:, tail:], a['istft_out_length'][:, tail:]), 1e-5)


def test_matches_reference():
  common.assert_checks(checks())


def test_istft_tail_is_the_deliberate_difference():
  a, o = _run()
  tail = 64 * (1 + 500 // 64 - 1)
  assert np.all(a['istft_out'][:, tail:] == 0.0)  # the reference: zeros
  assert np.max(np.abs(o['istft'][:, tail:])) > 0.1  # ours: the signal
  assert istft_tail_check(o, a).ok
