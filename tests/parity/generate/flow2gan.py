"""Flow2GAN parity fixture: the released losses, spectrograms, discriminators
and Euler sampler run on NumPy-drawn signals.

  python tests/parity/generate/flow2gan.py --ref CHECKOUT

CHECKOUT is a clone of k2-fsa/Flow2GAN. Needs torch, torchaudio, einops and
auraloss (the paper's MR-STFT metric, scripts/compute_pesq_visqol.py); the
package's unused imports (huggingface_hub, lhotse, tensorboard) are stubbed.
What runs (all the reference's own code):
  * GAN.mel_recon_loss (models/gan.py), built by GAN.__init__ at our 8 kHz
    scales (32..512 / 5..80 mels) and at the paper's two largest 24 kHz ones
    (1024 / 160, 2048 / 320 mels);
  * GAN.discriminator_loss / generator_loss / feature_matching_loss on fixed
    score and feature-map arrays;
  * DiscriminatorP (period 3; its convs rebuilt with the same kernel, stride
    and padding at 4..8 channels) and DiscriminatorR (n_fft 64, 4 channels)
    with NumPy-drawn weights: scores, feature-map counts / shapes / mean |f|,
    their hinge and feature-matching losses;
  * BaseAudioGenerator.compute_loss (spectral-energy scaled and plain MSE),
    BaseAudioGenerator.infer (Euler) with a fixed stand-in for the network,
    LogMelSpectrogram (the condition), SinusoidalPosEmb, the STFT / ISTFT
    modules (+ utils.convert_length, the branch's output wiring);
  * auraloss.freq.MultiResolutionSTFTLoss per clip.
"""

from __future__ import annotations

import sys
import types

import numpy as np

import _common

SEED = 20260


def _stub_imports():
  tb = types.ModuleType('torch.utils.tensorboard')
  tb.SummaryWriter = object
  sys.modules['torch.utils.tensorboard'] = tb
  hf = types.ModuleType('huggingface_hub')
  hf.hf_hub_download = None
  sys.modules['huggingface_hub'] = hf
  for name in ('lhotse', 'lhotse.dataset', 'lhotse.dataset.sampling',
               'lhotse.dataset.sampling.base'):
    sys.modules[name] = types.ModuleType(name)
  sys.modules['lhotse.dataset.sampling.base'].CutSampler = object


def signals(rng):
  """y (target) and yhat (estimate) [2, 4096]: tones + noise; clip 0 has an
  exact-zero gap in y (1500:2300) and in yhat (1600:2000); clip 1 is loud
  (the spectral scale clamps at 1e-2 there and at 1e2 in clip 0's gap)."""
  n = 4096
  t = np.arange(n) / 8000.0
  y = np.stack([0.4 * np.sin(2 * np.pi * 220 * t) + 0.1 * np.sin(
      2 * np.pi * 1330 * t + 0.3), 3.0 * np.sin(2 * np.pi * 450 * t)
                + 1.5 * np.sin(2 * np.pi * 2900 * t)])
  y = y + 0.02 * rng.normal(size=y.shape)
  y[0, 1500:2300] = 0.0
  yhat = y + 0.05 * rng.normal(size=y.shape) * np.abs(y).max(-1, keepdims=True)
  yhat[0, 1600:2000] = 0.0
  return y.astype(np.float32), yhat.astype(np.float32)


def main():
  args = _common.cli(__doc__)
  _stub_imports()
  _common.add_path(args.ref)
  # pylint: disable=g-import-not-at-top
  import torch
  from auraloss.freq import MultiResolutionSTFTLoss
  from flow2gan import utils
  from flow2gan.models import discriminators as dmod
  from flow2gan.models import gan as gan_mod
  from flow2gan.models import generator as gen_mod
  from flow2gan.models import modules
  # pylint: enable=g-import-not-at-top

  torch.manual_seed(0)
  rng = np.random.default_rng(SEED)
  T = lambda a: torch.tensor(np.asarray(a))  # pylint: disable=invalid-name
  N = lambda a: a.detach().numpy().astype(np.float32)  # pylint: disable=C0103
  out = {}
  y, yhat = signals(rng)
  out['y'], out['yhat'] = y, yhat

  # -- mel reconstruction loss (models/gan.py:89-99) at two settings.
  stub_gen = types.SimpleNamespace(sampling_rate=8000)
  ours = gan_mod.GAN(stub_gen, mel_recon_n_ffts=(32, 64, 128, 256, 512),
                     mel_recon_n_mels=(5, 10, 20, 40, 80))
  out['mel_loss_8k'] = N(ours.mel_recon_loss(T(y), T(yhat)))
  # The paper's two largest scales (24 kHz; its others are ours' n_ffts).
  paper = gan_mod.GAN(types.SimpleNamespace(sampling_rate=24000),
                      mel_recon_n_ffts=(1024, 2048),
                      mel_recon_n_mels=(160, 320))
  out['mel_loss_24k'] = N(paper.mel_recon_loss(T(y), T(yhat)))

  # -- hinge and feature-matching losses on fixed arrays (gan.py:57-87).
  score_shapes = [(2, 30), (2, 20), (2, 12)]
  fmap_shapes = [[(2, 4, 10, 3), (2, 4, 5, 3), (2, 1, 5, 3)],
                 [(2, 4, 7, 2), (2, 1, 7, 2)], [(2, 6, 9)]]
  sr = [rng.normal(0.5, 1.5, s).astype(np.float32) for s in score_shapes]
  sf = [rng.normal(-0.5, 1.5, s).astype(np.float32) for s in score_shapes]
  fr = [[rng.normal(size=s).astype(np.float32) for s in g] for g in fmap_shapes]
  ff = [[rng.normal(size=s).astype(np.float32) for s in g] for g in fmap_shapes]
  for i, (a, b) in enumerate(zip(sr, sf)):
    out[f'score_real_{i}'], out[f'score_fake_{i}'] = a, b
  for i, (gr, gf) in enumerate(zip(fr, ff)):
    for j, (a, b) in enumerate(zip(gr, gf)):
      out[f'fmap_real_{i}_{j}'], out[f'fmap_fake_{i}_{j}'] = a, b
  out['d_loss'] = N(ours.discriminator_loss([T(a) for a in sr],
                                            [T(a) for a in sf]))
  out['g_loss'] = N(ours.generator_loss([T(a) for a in sf]))
  out['fm_loss'] = N(ours.feature_matching_loss(
      [[T(a) for a in g] for g in fr], [[T(a) for a in g] for g in ff]))

  # -- the discriminators with NumPy-drawn weights (discriminators.py).
  def set_conv(conv, prefix):
    w = rng.normal(size=tuple(conv.weight.shape)) / np.sqrt(
        np.prod(conv.weight.shape[1:]))
    b = 0.1 * rng.normal(size=tuple(conv.bias.shape))
    with torch.no_grad():
      conv.weight.copy_(T(w.astype(np.float32)))
      conv.bias.copy_(T(b.astype(np.float32)))
    out[f'{prefix}_w'] = w.astype(np.float32)  # torch layout [out, in, kh, kw]
    out[f'{prefix}_b'] = b.astype(np.float32)

  dp = dmod.DiscriminatorP(period=3)
  widths = (1, 4, 8, 8, 8, 8)
  dp.convs = torch.nn.ModuleList([
      torch.nn.Conv2d(widths[i], widths[i + 1], c.kernel_size, c.stride,
                      padding=c.padding) for i, c in enumerate(dp.convs)])
  c = dp.conv_post
  dp.conv_post = torch.nn.Conv2d(widths[-1], 1, c.kernel_size, c.stride,
                                 padding=c.padding)
  for i, conv in enumerate(dp.convs):
    set_conv(conv, f'mp_conv{i}')
  set_conv(dp.conv_post, 'mp_post')
  dr = dmod.DiscriminatorR(window_length=64, channels=4)
  for b, stack in enumerate(dr.band_convs):
    for i, conv in enumerate(stack):
      set_conv(conv, f'mr_band{b}_conv{i}')
  set_conv(dr.conv_post, 'mr_post')
  out['mr_bands'] = np.array(dr.bands, np.int64)
  yd, yhd = y[:, :512], yhat[:, :512]
  with torch.no_grad():
    for name, d in (('mp', dp), ('mr', dr)):
      s_r, f_r = d(x=T(yd))
      s_g, f_g = d(x=T(yhd))
      out[f'{name}_score_real'] = N(s_r).reshape(2, -1)
      out[f'{name}_score_fake'] = N(s_g).reshape(2, -1)
      out[f'{name}_fmap_sizes'] = np.array([f.numel() for f in f_r], np.int64)
      out[f'{name}_fmap_absmean'] = np.array(
          [float(f.abs().mean()) for f in f_r], np.float32)
      out[f'{name}_d_loss'] = N(ours.discriminator_loss([s_r], [s_g]))
      out[f'{name}_g_loss'] = N(ours.generator_loss([s_g]))
      out[f'{name}_fm_loss'] = N(ours.feature_matching_loss([f_r], [f_g]))
    # The MR input: DC removal, peak normalisation, complex STFT, bands.
    for b, x in enumerate(dr.spectrogram(T(yd))):
      out[f'mr_input_band{b}'] = N(x)  # [B, 2, frames, bins]

  # -- stage 1: spectral-energy scaled loss and MSE (generator.py:172-200).
  g = gen_mod.BaseAudioGenerator(
      sampling_rate=8000, n_ffts=(128, 64, 32), hop_lengths=(64, 32, 16),
      channels=(8, 8, 8), time_embed_channels=8, conv_kernel_sizes=(7, 7, 7),
      num_layers=(1, 1, 1), cond_dim=32, cond_hop_length=64,
      cond_enc_channels=8, cond_enc_num_layers=1, loss_n_filters=64,
      loss_n_fft=256, loss_hop_length=64)
  lens = torch.full((2,), y.shape[1])
  err = (yhat - y).astype(np.float32)
  ref = np.zeros_like(y)  # compute_loss takes err = pred - ref
  out['spec_loss'] = N(g.compute_loss(T(err), T(ref), lens, gt_audio=T(y)))
  g.spec_scaling_loss = False
  out['mse_loss'] = N(g.compute_loss(T(err), T(ref), lens))

  # -- Euler inference (generator.py:236-271) with a fixed stand-in network
  # pred(x, t) = 0.5 tanh(x) (1 + t) + target, target = y[:, :512] / 4.
  target = T(y[:, :512] / 4)
  g.process_model = (lambda x, cond, t, audio_lens: 0.5 * torch.tanh(x)
                     * (1.0 + t) + target)
  noise = (0.1 * rng.normal(size=(2, 512))).astype(np.float32)
  out['euler_noise'] = noise
  for pred_x1 in (True, False):
    g.pred_x1 = pred_x1
    for steps in (1, 2, 4):
      out[f'euler_{"x1" if pred_x1 else "v"}_{steps}'] = N(
          g.infer(T(noise), cond=None, n_timesteps=steps))

  # -- the log-mel condition (modules.py:119-143), 8 kHz / 256 / 64 / 32.
  lm = modules.LogMelSpectrogram(sampling_rate=8000, n_fft=256, hop_length=64,
                                 n_mels=32)
  out['log_mel'] = N(lm(T(y)))  # [B, n_mels, frames]

  # -- sinusoidal time embedding (modules.py:217-233).
  tt = np.array([0.0, 0.25, 0.7, 0.999], np.float32)
  out['temb_t'] = tt
  out['temb'] = N(modules.SinusoidalPosEmb(32)(T(tt), scale=1000))

  # -- a branch's STFT and iSTFT (modules.py:52-116, the branch's
  # convert_length to the input length at modules.py:716-720).
  xs = y[:, :500]
  spec, _ = modules.STFT(128, 64)(T(xs))
  out['stft_re'], out['stft_im'] = N(spec.real), N(spec.imag)  # [B, K, F]
  k, f = 65, 1 + 500 // 64
  rs = rng.normal(size=(2, k, f)) + 1j * rng.normal(size=(2, k, f))
  rs[:, 0] = rs[:, 0].real
  rs[:, -1] = rs[:, -1].real
  out['istft_in_re'] = rs.real.astype(np.float32)
  out['istft_in_im'] = rs.imag.astype(np.float32)
  wav = modules.ISTFT(128, 64)(T(rs.astype(np.complex64)))
  out['istft_out'] = N(utils.convert_length(wav, 500))
  # torch.istft given the length (our convention) on the same spectrum.
  out['istft_out_length'] = N(torch.istft(
      T(rs.astype(np.complex64)), 128, 64, window=torch.hann_window(128),
      center=True, length=500))

  # -- the MR-STFT metric (auraloss), per clip as in the reference's script.
  for name, res in (('8k', [(64, 16, 64), (128, 32, 128), (256, 64, 256)]),
                    ('auraloss_default', None)):
    kw = {} if res is None else dict(
        fft_sizes=[r[0] for r in res], hop_sizes=[r[1] for r in res],
        win_lengths=[r[2] for r in res])
    fn = MultiResolutionSTFTLoss(**kw)
    out[f'mrstft_{name}'] = np.array(
        [N(fn(T(yhat[i])[None, None], T(y[i])[None, None])) for i in range(2)],
        np.float32)

  _common.write(
      'flow2gan', out, args=args, repo='k2-fsa/Flow2GAN',
      files=['flow2gan/models/gan.py', 'flow2gan/models/generator.py',
             'flow2gan/models/modules.py', 'flow2gan/models/discriminators.py',
             'flow2gan/utils.py', 'scripts/compute_pesq_visqol.py (auraloss)'],
      what=('mel reconstruction loss (8 kHz scales, 24 kHz largest), hinge / '
            'feature-matching losses on fixed arrays, MPD and MRD forward '
            'with NumPy weights, spectral-energy scaled loss, MSE, Euler '
            'sampler with a fixed stand-in network, log-mel condition, time '
            'embedding, branch STFT / iSTFT, auraloss MR-STFT'),
      packages=('numpy', 'torch', 'torchaudio', 'einops', 'auraloss'),
      notes=('Discriminator weights are stored in torch layout [out, in, '
             'kh, kw]; DiscriminatorP runs with its convs rebuilt at widths '
             '1-4-8-8-8-8 (same kernels, strides, padding).'))


if __name__ == '__main__':
  main()
