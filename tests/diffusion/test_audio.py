"""Audio utilities against torch / numpy references; synthetic clip properties;
the LibriTTS-layout WAV reader on a fake folder."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclrjax.diffusion import audio
from tests.diffusion.conftest import write_libritts


def _np_stft(x, n_fft, hop):
  """Direct numpy STFT: reflect pad, explicit frame loop, periodic Hann."""
  xp = np.pad(x, (n_fft // 2, n_fft // 2), mode='reflect')
  w = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n_fft) / n_fft)
  out = [np.fft.rfft(xp[m * hop:m * hop + n_fft] * w)
         for m in range(1 + len(x) // hop)]
  return np.array(out)


def _np_triangles(bin_freqs, corners):
  """Triangular filters from their corner frequencies, one filter at a time."""
  fb = np.zeros((len(bin_freqs), len(corners) - 2))
  for m in range(len(corners) - 2):
    lo, mid, hi = corners[m:m + 3]
    for k, f in enumerate(bin_freqs):
      if lo <= f <= mid:
        fb[k, m] = (f - lo) / (mid - lo)
      elif mid < f <= hi:
        fb[k, m] = (hi - f) / (hi - mid)
  return fb


@pytest.mark.parametrize('n_fft,hop', [(128, 64), (64, 16), (256, 64),
                                       (100, 30)])
def test_stft_matches_torch_and_numpy(n_fft, hop):
  torch = pytest.importorskip('torch')  # the `bench` extra
  x = np.random.default_rng(0).normal(size=(2, 1000)).astype(np.float32)
  ours = np.asarray(audio.stft(jnp.asarray(x), n_fft, hop))
  ref = torch.stft(torch.tensor(x), n_fft, hop,
                   window=torch.hann_window(n_fft), center=True,
                   return_complex=True).numpy().transpose(0, 2, 1)
  assert ours.shape == ref.shape == (2, 1 + 1000 // hop, n_fft // 2 + 1)
  np.testing.assert_allclose(ours, ref, atol=2e-4)
  np.testing.assert_allclose(ours[1], _np_stft(x[1].astype(np.float64),
                                               n_fft, hop), atol=2e-4)


@pytest.mark.parametrize('n_fft,hop', [(128, 64), (32, 16), (256, 64),
                                       (100, 30)])
def test_istft_inverts_and_matches_torch(n_fft, hop):
  torch = pytest.importorskip('torch')  # the `bench` extra
  rng = np.random.default_rng(1)
  x = rng.normal(size=(3, 1000)).astype(np.float32)
  y = audio.istft(audio.stft(jnp.asarray(x), n_fft, hop), n_fft, hop, 1000)
  np.testing.assert_allclose(y, x, atol=1e-5)
  # An arbitrary (inconsistent) spectrum: same OLA / window normalisation.
  f, k = 1 + 1000 // hop, n_fft // 2 + 1
  spec = (rng.normal(size=(2, f, k)) + 1j * rng.normal(size=(2, f, k)))
  spec[..., 0] = spec[..., 0].real  # DC and Nyquist bins are real
  if n_fft % 2 == 0:
    spec[..., -1] = spec[..., -1].real
  spec = spec.astype(np.complex64)
  ours = audio.istft(jnp.asarray(spec), n_fft, hop, 1000)
  ref = torch.istft(torch.tensor(spec.transpose(0, 2, 1)), n_fft, hop,
                    window=torch.hann_window(n_fft), center=True,
                    length=1000).numpy()
  np.testing.assert_allclose(ours, ref, atol=1e-4)


def test_filterbanks_match_loop_reference():
  sr, n_fft = 8000, 256
  freqs = np.linspace(0, sr / 2, n_fft // 2 + 1)
  hz_to_mel = lambda f: 2595 * np.log10(1 + f / 700)
  mel_to_hz = lambda m: 700 * (10 ** (m / 2595) - 1)
  corners = mel_to_hz(np.linspace(0, hz_to_mel(sr / 2), 32 + 2))
  np.testing.assert_allclose(audio.mel_filterbank(sr, n_fft, 32),
                             _np_triangles(freqs, corners), atol=1e-6)
  lin = audio.linear_filterbank(sr, n_fft, 64)
  np.testing.assert_allclose(
      lin, _np_triangles(freqs, np.linspace(0, sr / 2, 66)), atol=1e-6)
  # Filter m of the linear bank peaks at (m + 1) * (sr / 2) / 65 Hz.
  peak_hz = freqs[np.argmax(lin, axis=0)]
  np.testing.assert_allclose(peak_hz, np.arange(1, 65) * 4000 / 65,
                             atol=freqs[1] / 2 + 1e-6)


def test_log_mel_matches_numpy():
  x = np.random.default_rng(2).normal(size=4000) * 0.3
  x[1000:2000] = 0.0  # silence: the log floor applies
  fb = _np_triangles(np.linspace(0, 4000, 129), 700 * (10 ** (np.linspace(
      0, 2595 * np.log10(1 + 4000 / 700), 34) / 2595) - 1))
  ref = np.log(np.maximum(np.abs(_np_stft(x, 256, 64)) @ fb, 1e-7))
  ours = audio.log_mel(jnp.asarray(x, jnp.float32), 8000, 256, 64, 32)
  assert ours.shape == (63, 32)
  # float32 STFT: relative error ~1e-5 of the frame energy; compare where the
  # mel energy is not near the floor.
  ok = ref > np.log(1e-4)
  np.testing.assert_allclose(np.asarray(ours)[ok], ref[ok], atol=2e-3)
  assert np.all(np.asarray(ours)[25:28] <= np.log(1e-4))  # inside the gap


@pytest.fixture(scope='module')
def clips():
  return jax.device_get(audio.synth_batch(jax.random.key(0), 16))


def test_clip_exact_zero_gaps_and_layout(clips):
  x, gaps = clips['audio'], clips['gap_mask']
  assert x.shape == (16, 4000) and x.dtype == np.float32
  assert np.all(x[gaps] == 0.0)  # exactly zero, not merely small
  frac = gaps.mean(1)
  assert np.all((frac >= 0.3 - 1e-3) & (frac <= 0.5 + 1e-3)), frac
  for row in gaps:  # two gap runs, none at the very start or end
    assert np.sum(np.diff(row.astype(int)) == 1) == 2
    assert not row[0] and not row[-1]
  # Sounding samples are mostly non-zero (envelopes only vanish at edges).
  assert np.mean(x[~gaps] != 0.0) > 0.99
  np.testing.assert_allclose(np.abs(x).max(1), 0.5, atol=0.02)
  again = jax.device_get(audio.synth_batch(jax.random.key(0), 16))
  np.testing.assert_array_equal(again['audio'], x)  # a pure function of key
  other = jax.device_get(audio.synth_batch(jax.random.key(1), 16))
  assert not np.allclose(other['audio'], x)


def test_clip_quiet_band_level(clips):
  x, q = clips['audio'], clips['quiet']
  tone = x - q
  level = 10 * np.log10((q ** 2).sum(1) / (tone ** 2).sum(1))
  np.testing.assert_allclose(level, -30.0, atol=0.05)
  # In the spectrum: power above 2.45 kHz (the quiet tone lives in 2.5-3.5
  # kHz; partials stay below 4 x 600 Hz) is ~-30 dB re the rest.
  p = np.abs(_np_stft(x[0].astype(np.float64), 256, 64)) ** 2
  f = np.linspace(0, 4000, 129)
  hi = p[:, f > 2450].sum() / p[:, f <= 2450].sum()
  assert -32.0 < 10 * np.log10(hi) < -28.0


def test_lsd_gap_rms_mrstft():
  rng = np.random.default_rng(3)
  t = rng.normal(size=(2, 1000)).astype(np.float32)
  t[:, 400:600] = 0.0
  p = t + 0.05 * rng.normal(size=t.shape).astype(np.float32)
  out = audio.lsd(jnp.asarray(p), jnp.asarray(t), 128, 32)
  # numpy: dB power with the floor 80 dB under the target's maximum.
  for i in range(2):
    pt = np.abs(_np_stft(t[i].astype(np.float64), 128, 32)) ** 2
    pp = np.abs(_np_stft(p[i].astype(np.float64), 128, 32)) ** 2
    fl = pt.max() * 1e-8
    dt, dp = 10 * np.log10(np.maximum(pt, fl)), 10 * np.log10(np.maximum(pp, fl))
    ref = np.mean(np.sqrt(np.mean((dt - dp) ** 2, 1)))
    quiet = dt < 10 * np.log10(pt.max()) - 40
    ref_q = np.sqrt(np.mean((dt - dp)[quiet] ** 2))
    np.testing.assert_allclose(out['lsd'][i], ref, rtol=1e-3)
    np.testing.assert_allclose(out['lsd_quiet'][i], ref_q, rtol=1e-3)
  same = audio.lsd(jnp.asarray(t), jnp.asarray(t), 128, 32)
  np.testing.assert_allclose(same['lsd'], 0.0, atol=1e-4)
  # Gap RMS by hand: a constant 0.1 inside the gap.
  pred = np.zeros((1, 10), np.float32)
  pred[0, 2:5] = [0.1, -0.1, 0.1]
  mask = np.zeros((1, 10), bool)
  mask[0, 2:6] = True
  np.testing.assert_allclose(audio.gap_rms(pred, mask), np.sqrt(0.03 / 4),
                             rtol=1e-6)
  m_same = audio.mrstft_loss(jnp.asarray(t), jnp.asarray(t))
  np.testing.assert_allclose(m_same, 0.0, atol=1e-5)
  assert np.all(np.asarray(audio.mrstft_loss(jnp.asarray(p),
                                             jnp.asarray(t))) > 0.05)


def test_short_window_and_mrstft_floor():
  # A window shorter than n_fft sits centred (torch.stft); the MR-STFT
  # magnitude is sqrt(max(|X|^2, 1e-8)) (auraloss).
  w = audio.padded_window(10, 5)
  np.testing.assert_array_equal(w[:2], 0.0)
  np.testing.assert_array_equal(w[7:], 0.0)
  np.testing.assert_allclose(w[2:7], audio.hann_window(5))
  x = np.random.default_rng(4).normal(size=(1, 300)).astype(np.float32)
  ref = np.array([np.fft.rfft(f * w) for f in np.asarray(
      audio.frames(jnp.asarray(x), 10, 4))[0]])
  np.testing.assert_allclose(audio.stft(jnp.asarray(x), 10, 4, 5)[0], ref,
                             atol=1e-5)
  # Silent target: every bin at the floor 1e-4; a prediction of one bin's
  # worth of energy above it counts through log(|X| / 1e-4).
  zero = jnp.zeros((1, 256))
  np.testing.assert_allclose(audio.mrstft_loss(zero, zero), 0.0, atol=1e-7)
  p = np.abs(np.asarray(audio.stft(jnp.asarray(x[:, :256]), 64, 16)))
  mag = np.sqrt(np.maximum(p ** 2, 1e-8))
  sc = np.linalg.norm(1e-4 - mag) / np.linalg.norm(np.full_like(mag, 1e-4))
  want = sc + np.mean(np.abs(np.log(1e-4) - np.log(mag)))
  np.testing.assert_allclose(
      audio.mrstft_loss(jnp.asarray(x[:, :256]), zero, ((64, 16),)), [want],
      rtol=1e-5)


def test_magnitude_gradients_finite_at_exact_silence():
  # A zero-power bin must not give an infinite sqrt' (it turned the clipped
  # GAN gradient into NaN); values are unchanged above 1e-12 in magnitude.
  x = jnp.zeros((1, 400)).at[0, 100:200].set(1.0)
  g = jax.grad(lambda x: jnp.sum(audio.log_mel(x, 8000, 32, 8, 5))
               + jnp.sum(audio.magnitude_spectrogram(x, 64, 16)))(x)
  assert np.isfinite(np.asarray(g)).all()
  p = jnp.array([0.0, 1e-30, 4.0])
  np.testing.assert_array_equal(audio.safe_sqrt(p), [0.0, 0.0, 2.0])
  np.testing.assert_array_equal(jax.grad(lambda p: audio.safe_sqrt(p).sum())(p),
                                [0.0, 0.0, 0.25])


def test_wav_reader_split_segments_and_range(libritts_dir, tmp_path):
  from scipy.io import wavfile  # pylint: disable=g-import-not-at-top
  files = audio.find_wavs(libritts_dir)
  assert len(files) == 6 and audio.find_wavs(tmp_path / 'absent') == []
  assert audio.find_wavs('') == []
  train, held = audio.split_files(files, 0.5)
  assert {p.parts[-4] for p in held} == {'test-clean'}   # the test subset
  assert len(train) == 4 and not set(train) & set(held)
  # Integer PCM / 2^15, exactly.
  x = audio.read_wav(files[0], 8000)
  raw = wavfile.read(files[0])[1]
  assert x.dtype == np.float32 and len(x) == 4000
  np.testing.assert_array_equal(x, raw / 32768.0)
  # Another rate is resampled: 8 kHz read at 4 kHz has half the samples,
  # and a 200 Hz tone keeps its frequency.
  tone = tmp_path / 'tone.wav'
  wavfile.write(tone, 8000, (0.5 * np.sin(2 * np.pi * 200 * np.arange(8000)
                                          / 8000) * 32767).astype(np.int16))
  y = audio.read_wav(tone, 4000)
  assert len(y) == 4000
  assert np.argmax(np.abs(np.fft.rfft(y))) == 200    # 1 Hz bins over 1 s
  # Segments: shape, range, a short file (0.1 s = 800 samples) zero-padded,
  # each clip a contiguous piece of its file, reproducible from the seed.
  clips = audio.wav_clips(train, sample_rate=8000, clip_length=1000,
                          num_clips=9, seed=3)
  assert clips.shape == (9, 1000) and clips.dtype == np.float32
  assert np.abs(clips).max() <= 1.0 and np.abs(clips).max() > 0.1
  short = audio.read_wav(train[3], 8000)
  assert len(short) == 800
  np.testing.assert_array_equal(clips[3, :800], short)
  np.testing.assert_array_equal(clips[3, 800:], 0.0)
  whole = audio.read_wav(train[0], 8000)
  for i in (0, 4, 8):                                 # clips of file 0
    s = [o for o in range(3001) if np.array_equal(whole[o:o + 1000], clips[i])]
    assert s, i
  np.testing.assert_array_equal(clips, audio.wav_clips(
      train, sample_rate=8000, clip_length=1000, num_clips=9, seed=3))
  assert not np.array_equal(clips, audio.wav_clips(
      train, sample_rate=8000, clip_length=1000, num_clips=9, seed=4))
  # The pause (samples n/3..n/2 of every file) is silent, the tones not.
  m = audio.silence_mask(whole[None], 32, -40.0)[0]
  assert m[1400:1950].all() and not m[:1300].any() and not m[2050:].any()


def test_hash_split_without_test_subsets(tmp_path):
  # Only a training subset (or only dev-* / test-*): held out by name hash.
  paths = write_libritts(tmp_path, [('train-clean-100', 19, 198, u, 0.05)
                                    for u in range(20)])
  train, held = audio.split_files(paths, 0.1)
  assert len(held) == 2 and len(train) == 18 and not set(train) & set(held)
  assert set(audio.split_files(paths[::-1], 0.1)[1]) == set(held)  # any order
  assert len(audio.split_files(paths[:2], 0.01)[1]) == 1   # >= 1 held out
  assert len(audio.split_files(paths[:2], 0.99)[0]) == 1   # >= 1 trains
  with pytest.raises(ValueError, match='>= 2 files'):
    audio.split_files(paths[:1], 0.1)
