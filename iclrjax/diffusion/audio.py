"""Audio utilities in JAX: STFT/iSTFT, filterbanks, log-mel, synthetic clips.

Conventions follow `torch.stft` / `torch.istft` with `center=True`,
`pad_mode='reflect'` and a periodic Hann window of length n_fft (what the
Flow2GAN and Vocos code use): a clip of N samples gives 1 + N // hop frames,
frame m covering samples [m hop - n_fft / 2, m hop + n_fft / 2) of the
reflect-padded signal.

* `stft(x, n_fft, hop)` -> complex [..., frames, n_fft // 2 + 1].
* `istft(X, n_fft, hop, length)`: windowed overlap-add divided by the
  overlap-added squared window (torch.istft's NOLA normalisation), so
  istft(stft(x)) = x whenever consecutive windows overlap (hop < n_fft).
* `mel_filterbank` / `linear_filterbank`: torchaudio's `melscale_fbanks`
  (HTK mel scale, no area normalisation) and `linear_fbanks`: triangles
  whose corners are equally spaced on the mel (linear) scale, evaluated at
  the rfft bin frequencies linspace(0, sr / 2, n_fft // 2 + 1).
* `log_mel(x)`: log(max(mel magnitude spectrogram, 1e-7)) (Vocos'
  `safe_log` of a power-1 `MelSpectrogram`, as Flow2GAN's condition).
* `synth_clip(key)`: synthetic harmonic clips
  (tones, ADSR envelopes, exact-zero gaps, a quiet high-frequency tone), a
  pure function of the key.
* `find_wavs` / `split_files` / `wav_clips`: WAV files in the LibriTTS
  layout `<root>/<subset>/<speaker>/<chapter>/<utt>.wav`, a held-out split,
  and fixed-length float32 segments cut from them (NumPy; `scipy.io.wavfile`).
"""

from __future__ import annotations

from collections.abc import Sequence
import functools
import math
import os
import pathlib
from typing import NamedTuple
import zlib

import jax
import jax.numpy as jnp
import numpy as np

LOG_FLOOR = 1e-7  # Vocos / Flow2GAN safe_log clip value


def hann_window(n: int) -> np.ndarray:
  """Periodic Hann window (torch.hann_window default): 0.5 - 0.5 cos(2 pi k / n)."""
  k = np.arange(n)
  return (0.5 - 0.5 * np.cos(2 * np.pi * k / n)).astype(np.float32)


def num_frames(length: int, hop: int) -> int:
  """Frames of a centered STFT of `length` samples."""
  return 1 + length // hop


def frames(x: jax.Array, n_fft: int, hop: int) -> jax.Array:
  """Centered, reflect-padded frames: x [..., N] -> [..., 1 + N // hop, n_fft].

  When hop divides n_fft (r = n_fft / hop), frame m is the concatenation of
  hop-sized blocks m .. m + r - 1 (slices only: gathers and their scatter
  gradients are slow on CPU); otherwise an index gather.
  """
  n = x.shape[-1]
  pad = n_fft // 2
  if n <= pad:
    raise ValueError(f'signal of {n} samples too short for reflect padding '
                     f'{pad} (n_fft={n_fft})')
  xp = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(pad, pad)], mode='reflect')
  f = num_frames(n, hop)
  if n_fft % hop == 0:
    r = n_fft // hop
    blocks = xp[..., :(f + r - 1) * hop].reshape(*x.shape[:-1], f + r - 1, hop)
    return jnp.concatenate([blocks[..., j:j + f, :] for j in range(r)], -1)
  idx = np.arange(f)[:, None] * hop + np.arange(n_fft)[None, :]
  return xp[..., idx]


def overlap_add(seg: jax.Array, hop: int) -> jax.Array:
  """sum_m seg[..., m, :] placed at m * hop: [..., F, L] -> [..., L + hop (F - 1)]."""
  f, n_fft = seg.shape[-2:]
  if n_fft % hop == 0:
    r = n_fft // hop
    parts = seg.reshape(*seg.shape[:-1], r, hop)
    lead = [(0, 0)] * (seg.ndim - 2)
    out = sum(jnp.pad(parts[..., j, :], lead + [(j, r - 1 - j), (0, 0)])
              for j in range(r))
    return out.reshape(*seg.shape[:-2], (f + r - 1) * hop)
  total = n_fft + hop * (f - 1)
  idx = np.arange(f)[:, None] * hop + np.arange(n_fft)[None, :]
  out = jnp.zeros(seg.shape[:-2] + (total,), seg.dtype)
  return out.at[..., idx.reshape(-1)].add(seg.reshape(*seg.shape[:-2], -1))


def padded_window(n_fft: int, win_length: int | None = None) -> np.ndarray:
  """Periodic Hann window of `win_length` (default n_fft) zero-padded to
  n_fft, (n_fft - win_length) // 2 zeros on the left (torch.stft's
  placement of a shorter window)."""
  win_length = n_fft if win_length is None else win_length
  if not 0 < win_length <= n_fft:
    raise ValueError(f'win_length {win_length} not in (0, n_fft={n_fft}]')
  left = (n_fft - win_length) // 2
  return np.pad(hann_window(win_length), (left, n_fft - win_length - left))


def stft(x: jax.Array, n_fft: int, hop: int,
         win_length: int | None = None) -> jax.Array:
  """Complex STFT [..., frames, n_fft // 2 + 1] (torch.stft, center=True;
  a Hann window of `win_length` <= n_fft samples, centred)."""
  return jnp.fft.rfft(frames(x, n_fft, hop) * padded_window(n_fft, win_length),
                      axis=-1)


def istft(spec: jax.Array, n_fft: int, hop: int, length: int) -> jax.Array:
  """Inverse of `stft`: [..., frames, n_fft // 2 + 1] -> [..., length].

  y = OLA(w * irfft(X)) / OLA(w^2), trimmed by n_fft // 2 at the start
  (torch.istft, center=True). Samples past the last frame are zero.
  """
  n_frames = spec.shape[-2]
  w = hann_window(n_fft)
  seg = jnp.fft.irfft(spec, n=n_fft, axis=-1) * w  # [..., F, n_fft]
  total = n_fft + hop * (n_frames - 1)
  out = overlap_add(seg, hop)
  idx = np.arange(n_frames)[:, None] * hop + np.arange(n_fft)[None, :]
  env = np.zeros(total, np.float64)
  np.add.at(env, idx.reshape(-1), np.tile(w.astype(np.float64) ** 2,
                                          n_frames))
  start = n_fft // 2
  stop = min(start + length, total)
  env = env[start:stop]
  y = out[..., start:stop] * np.where(env > 1e-11, 1.0 / np.maximum(
      env, 1e-11), 0.0).astype(np.float32)
  if stop - start < length:
    y = jnp.pad(y, [(0, 0)] * (y.ndim - 1) + [(0, length - (stop - start))])
  return y


def power_spectrogram(x: jax.Array, n_fft: int, hop: int,
                      win_length: int | None = None) -> jax.Array:
  """|STFT|^2 [..., frames, bins]."""
  s = stft(x, n_fft, hop, win_length)
  return jnp.real(s) ** 2 + jnp.imag(s) ** 2


def safe_sqrt(p: jax.Array, tiny: float = 1e-24) -> jax.Array:
  """sqrt(p), set to 0 where p <= tiny (1e-12 in magnitude) so that the
  gradient stays finite at exact or underflowed zeros (an infinite entry
  would turn a clipped gradient into NaN)."""
  ok = p > tiny
  return jnp.where(ok, jnp.sqrt(jnp.where(ok, p, 1.0)), 0.0)


def magnitude_spectrogram(x: jax.Array, n_fft: int, hop: int,
                          eps: float = 0.0) -> jax.Array:
  """|STFT| [..., frames, bins] = safe_sqrt(power + eps)."""
  return safe_sqrt(power_spectrogram(x, n_fft, hop) + eps)


def _hz_to_mel(f):
  return 2595.0 * np.log10(1.0 + np.asarray(f, np.float64) / 700.0)


def _mel_to_hz(m):
  return 700.0 * (10.0 ** (np.asarray(m, np.float64) / 2595.0) - 1.0)


def _triangles(all_freqs: np.ndarray, f_pts: np.ndarray) -> np.ndarray:
  """torchaudio `_create_triangular_filterbank`: [n_freqs, n_filters]."""
  f_diff = f_pts[1:] - f_pts[:-1]
  slopes = f_pts[None, :] - all_freqs[:, None]
  down = -slopes[:, :-2] / f_diff[:-1]
  up = slopes[:, 2:] / f_diff[1:]
  return np.maximum(0.0, np.minimum(down, up))


@functools.lru_cache(maxsize=64)
def mel_filterbank(sample_rate: int, n_fft: int, n_mels: int,
                   f_min: float = 0.0, f_max: float | None = None
                   ) -> np.ndarray:
  """HTK mel triangles [n_fft // 2 + 1, n_mels] (torchaudio, norm=None)."""
  f_max = sample_rate / 2 if f_max is None else f_max
  all_freqs = np.linspace(0, sample_rate // 2, n_fft // 2 + 1)
  m_pts = np.linspace(_hz_to_mel(f_min), _hz_to_mel(f_max), n_mels + 2)
  fb = _triangles(all_freqs, _mel_to_hz(m_pts)).astype(np.float32)
  fb.setflags(write=False)
  return fb


@functools.lru_cache(maxsize=64)
def linear_filterbank(sample_rate: int, n_fft: int, n_filters: int,
                      f_min: float = 0.0, f_max: float | None = None
                      ) -> np.ndarray:
  """Linear-frequency triangles [n_fft // 2 + 1, n_filters] (torchaudio
  `linear_fbanks`, the filterbank of Flow2GAN's spectral loss scaling)."""
  f_max = sample_rate / 2 if f_max is None else f_max
  all_freqs = np.linspace(0, sample_rate // 2, n_fft // 2 + 1)
  f_pts = np.linspace(f_min, f_max, n_filters + 2)
  fb = _triangles(all_freqs, f_pts).astype(np.float32)
  fb.setflags(write=False)
  return fb


def mel_spectrogram(x: jax.Array, sample_rate: int, n_fft: int, hop: int,
                    n_mels: int, power: float = 1.0) -> jax.Array:
  """|STFT|^power @ mel filterbank: [..., frames, n_mels]."""
  spec = power_spectrogram(x, n_fft, hop)
  if power == 1.0:
    spec = safe_sqrt(spec)
  elif power != 2.0:
    spec = spec ** (power / 2.0)
  return spec @ mel_filterbank(sample_rate, n_fft, n_mels)


def safe_log(x: jax.Array, floor: float = LOG_FLOOR) -> jax.Array:
  return jnp.log(jnp.maximum(x, floor))


def log_mel(x: jax.Array, sample_rate: int, n_fft: int, hop: int,
            n_mels: int) -> jax.Array:
  """log(max(mel magnitude spectrogram, 1e-7)): [..., frames, n_mels]."""
  return safe_log(mel_spectrogram(x, sample_rate, n_fft, hop, n_mels, 1.0))


# -- synthetic harmonic clips ------------------------------------------------------------
class ClipSpec(NamedTuple):
  """Synthetic clip parameters."""

  sample_rate: int = 8000
  length: int = 4000            # 0.5 s at 8 kHz
  f0_range: tuple[float, float] = (100.0, 600.0)
  max_tones: int = 3            # 1..max_tones simultaneous harmonic tones
  num_harmonics: int = 4        # partials k f0 (below Nyquist), amplitude 1/k
  gap_fraction: tuple[float, float] = (0.3, 0.5)  # exact-zero silence
  num_gaps: int = 2
  quiet_db: float = -30.0       # quiet tone level re the harmonic part (RMS)
  quiet_range: tuple[float, float] = (2500.0, 3500.0)  # its frequency, Hz
  peak: float = 0.5             # peak amplitude of the harmonic part


def _adsr(u: jax.Array, a: jax.Array, d: jax.Array, s: jax.Array,
          r: jax.Array) -> jax.Array:
  """ADSR envelope at relative position u in [0, 1) of a note.

  Attack to 1 over [0, a), decay to sustain level s over [a, a + d),
  sustain, release to 0 over the last r of the note.
  """
  att = u / a
  dec = 1.0 - (1.0 - s) * (u - a) / d
  env = jnp.where(u < a, att, jnp.where(u < a + d, dec, s))
  rel = jnp.clip((1.0 - u) / r, 0.0, 1.0)
  return env * rel


def synth_clip(key: jax.Array, spec: ClipSpec = ClipSpec()
               ) -> dict[str, jax.Array]:
  """One synthetic clip, a pure function of `key`.

  The clip alternates sounding segments and `num_gaps` exact-zero gaps
  (segment, gap, segment, gap, ..., segment), the gaps covering a fraction
  g ~ U(gap_fraction) of the clip. Each sounding segment is one note: the
  sum of n_tones ~ U{1..max_tones} harmonic tones (f0 ~ U(f0_range), partials
  k f0 below Nyquist with amplitude 1 / k and random phase), shaped by a
  random ADSR envelope spanning the segment, plus a quiet sinusoid
  (frequency ~ U(quiet_range)) whose RMS is `quiet_db` below the harmonic
  part's RMS over the sounding samples. The harmonic part is scaled to
  peak amplitude `peak` (the quiet tone by the same factor, so the ratio
  holds). Gap samples are exactly 0.0 (multiplied by a 0/1 mask).

  Returns:
    {'audio': [length] float32, 'gap_mask': [length] bool (True in gaps),
     'quiet': [length] the quiet component alone (as mixed in)}.
  """
  n, sr = spec.length, spec.sample_rate
  ks = jax.random.split(key, 12)
  # Layout: segment lengths and gap lengths (integers summing to n).
  g = jax.random.uniform(ks[0], (), minval=spec.gap_fraction[0],
                         maxval=spec.gap_fraction[1])
  gap_total = jnp.round(g * n).astype(jnp.int32)
  gw = jax.random.uniform(ks[1], (spec.num_gaps,), minval=0.5, maxval=1.5)
  gap_len = jnp.floor(gw / gw.sum() * gap_total).astype(jnp.int32)
  gap_len = gap_len.at[-1].add(gap_total - gap_len.sum())
  n_seg = spec.num_gaps + 1
  sw = jax.random.uniform(ks[2], (n_seg,), minval=0.5, maxval=1.5)
  seg_len = jnp.floor(sw / sw.sum() * (n - gap_total)).astype(jnp.int32)
  seg_len = seg_len.at[-1].add(n - gap_total - seg_len.sum())
  # Boundaries: seg0 | gap0 | seg1 | gap1 | ... | seg_last.
  pieces = jnp.stack([seg_len, jnp.append(gap_len, 0)], 1).reshape(-1)[:-1]
  ends = jnp.cumsum(pieces)
  starts = ends - pieces
  i = jnp.arange(n)
  piece = jnp.sum(i[:, None] >= ends[None, :], axis=1)  # piece index
  is_gap = (piece % 2) == 1
  seg = piece // 2
  u = (i - starts[piece]) / jnp.maximum(pieces[piece], 1)  # in [0, 1)
  # ADSR per segment.
  a = jax.random.uniform(ks[3], (n_seg,), minval=0.02, maxval=0.15)
  d = jax.random.uniform(ks[4], (n_seg,), minval=0.05, maxval=0.2)
  s = jax.random.uniform(ks[5], (n_seg,), minval=0.4, maxval=0.9)
  r = jax.random.uniform(ks[6], (n_seg,), minval=0.05, maxval=0.2)
  env = _adsr(u, a[seg], d[seg], s[seg], r[seg])
  # Harmonic tones: per segment, up to max_tones f0s (extra ones muted).
  t = i / sr
  f0 = jax.random.uniform(ks[7], (n_seg, spec.max_tones),
                          minval=spec.f0_range[0], maxval=spec.f0_range[1])
  n_tones = jax.random.randint(ks[8], (n_seg,), 1, spec.max_tones + 1)
  on = (jnp.arange(spec.max_tones)[None, :] < n_tones[:, None]).astype(
      jnp.float32)
  phase = jax.random.uniform(ks[9], (n_seg, spec.max_tones,
                                     spec.num_harmonics), maxval=2 * jnp.pi)
  k = jnp.arange(1, spec.num_harmonics + 1, dtype=jnp.float32)
  freqs = f0[..., None] * k  # [S, M, K]
  amp = on[..., None] / k * (freqs < 0.45 * sr)
  # Every segment's partials at every sample, then the sample's segment
  # selected by a one-hot weight (no gathers: cheaper to compile).
  arg = 2 * jnp.pi * freqs[None] * t[:, None, None, None] + phase[None]
  per_seg = jnp.sum(amp[None] * jnp.sin(arg), axis=(2, 3))  # [n, S]
  tone = jnp.sum(per_seg * jax.nn.one_hot(seg, n_seg), axis=1) * env
  sound = ~is_gap
  mask = sound.astype(jnp.float32)
  tone = tone * mask
  tone_rms = jnp.sqrt(jnp.sum(tone ** 2) / jnp.maximum(mask.sum(), 1.0))
  fq = jax.random.uniform(ks[10], (), minval=spec.quiet_range[0],
                          maxval=spec.quiet_range[1])
  ph = jax.random.uniform(ks[11], (), maxval=2 * jnp.pi)
  level = 10.0 ** (spec.quiet_db / 20.0)
  # A unit sinusoid has RMS 1 / sqrt(2) over the sounding samples.
  quiet = (jnp.sqrt(2.0) * level * tone_rms * jnp.sin(2 * jnp.pi * fq * t + ph)
           * mask)
  scale = spec.peak / jnp.maximum(jnp.max(jnp.abs(tone)), 1e-6)
  audio = (tone + quiet) * scale * mask  # exact zeros in the gaps
  return {'audio': audio.astype(jnp.float32), 'gap_mask': is_gap,
          'quiet': (quiet * scale * mask).astype(jnp.float32)}


@functools.partial(jax.jit, static_argnums=(1, 2))
def synth_batch(key: jax.Array, batch_size: int,
                spec: ClipSpec = ClipSpec()) -> dict[str, jax.Array]:
  """`synth_clip` for fold_in(key, i), i < batch_size, stacked (jitted)."""
  keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(
      jnp.arange(batch_size, dtype=jnp.uint32))
  return jax.vmap(lambda k: synth_clip(k, spec))(keys)


# -- WAV folders (LibriTTS layout) -------------------------------------------------------
HELD_OUT_PREFIXES = ('test', 'dev')  # LibriTTS test-clean / dev-clean, ...


def find_wavs(root: str | os.PathLike) -> list[pathlib.Path]:
  """The .wav files at `<root>/<subset>/<speaker>/<chapter>/*.wav`, sorted
  (empty when `root` is '' or absent)."""
  if not os.fspath(root) or not pathlib.Path(root).is_dir():
    return []
  return sorted(pathlib.Path(root).glob('*/*/*/*.wav'))


def _subset(path: pathlib.Path) -> str:
  return path.parts[-4]


def split_files(paths: Sequence[pathlib.Path], eval_fraction: float
                ) -> tuple[list[pathlib.Path], list[pathlib.Path]]:
  """(train, held-out) files of a LibriTTS-style folder.

  The held-out files are the subset folders named test-* if any, else
  dev-* (LibriTTS' test-clean, dev-clean, ...) and training the subsets
  named neither. Without both kinds, every file is split by a hash of its
  name: the ceil(eval_fraction n) files with the smallest CRC-32 of their
  utterance id (at least 1, at most n - 1) are held out, the same choice on
  any machine and in any listing order.
  """
  if len(paths) < 2:
    raise ValueError(f'need >= 2 files to hold one out, got {len(paths)}')
  kind = lambda p: next((k for k in HELD_OUT_PREFIXES
                         if _subset(p).startswith(k)), '')
  train = [p for p in paths if not kind(p)]
  for prefix in HELD_OUT_PREFIXES:
    held = [p for p in paths if kind(p) == prefix]
    if train and held:
      return train, held
  rank = sorted(paths, key=lambda p: (zlib.crc32(p.stem.encode()), p.stem))
  n_eval = min(max(1, math.ceil(eval_fraction * len(paths))), len(paths) - 1)
  held = set(rank[:n_eval])
  return ([p for p in paths if p not in held],
          [p for p in paths if p in held])


def read_wav(path: str | os.PathLike, sample_rate: int) -> np.ndarray:
  """A WAV file as float32 [N] in [-1, 1] at `sample_rate`.

  Integer PCM is divided by 2^(bits - 1) (unsigned 8-bit centred first),
  channels are averaged, and a file at another rate is resampled by
  polyphase filtering (`scipy.signal.resample_poly`).
  """
  from scipy import signal  # pylint: disable=g-import-not-at-top
  from scipy.io import wavfile  # pylint: disable=g-import-not-at-top
  rate, x = wavfile.read(os.fspath(path))
  if x.dtype.kind in 'iu':
    half = 2.0 ** (8 * x.dtype.itemsize - 1)
    x = (x.astype(np.float64) - (half if x.dtype.kind == 'u' else 0.0)) / half
  x = np.asarray(x, np.float64)
  if x.ndim == 2:
    x = x.mean(1)
  if rate != sample_rate:
    g = math.gcd(int(rate), int(sample_rate))
    x = signal.resample_poly(x, sample_rate // g, rate // g)
  return np.clip(x, -1.0, 1.0).astype(np.float32)


def wav_clips(paths: Sequence[str | os.PathLike], *, sample_rate: int,
              clip_length: int, num_clips: int, seed: int) -> np.ndarray:
  """float32 [num_clips, clip_length] segments of the files `paths`.

  Clip i comes from file i mod n, at an offset uniform over the file's
  valid starts (file j's offsets from `np.random.default_rng((seed, j))`,
  so a clip does not depend on the others); a file shorter than
  `clip_length` is zero-padded at the end. Files are read one at a time
  (memory: the output).
  """
  if not paths:
    raise ValueError('no files to cut clips from')
  out = np.zeros((num_clips, clip_length), np.float32)
  n = len(paths)
  for j in range(min(n, num_clips)):
    x = read_wav(paths[j], sample_rate)
    rows = np.arange(j, num_clips, n)
    starts = np.random.default_rng((seed, j)).integers(
        0, max(len(x) - clip_length, 0) + 1, len(rows))
    for i, s in zip(rows, starts):
      seg = x[s:s + clip_length]
      out[i, :len(seg)] = seg
  return out


def silence_mask(x: np.ndarray, hop: int, threshold_db: float) -> np.ndarray:
  """bool [..., N]: samples in hop-sample blocks whose RMS is more than
  `threshold_db` below the clip's loudest block (a trailing partial block
  counts as one), the "gaps" of real audio."""
  n = x.shape[-1]
  nb = -(-n // hop)
  xp = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, nb * hop - n)])
  rms = np.sqrt(np.mean(xp.reshape(*x.shape[:-1], nb, hop) ** 2, -1))
  level = np.max(rms, -1, keepdims=True) * 10.0 ** (threshold_db / 20.0)
  return np.repeat(rms < level, hop, -1)[..., :n]


# -- metrics -----------------------------------------------------------------------------
def db(p: jax.Array) -> jax.Array:
  return 10.0 * jnp.log10(p)


def lsd(pred: jax.Array, target: jax.Array, n_fft: int, hop: int, *,
        dynamic_range_db: float = 80.0, quiet_db: float = -40.0
        ) -> dict[str, jax.Array]:
  """Log-spectral distance per clip, overall and on quiet target bins.

  Power spectra in dB are floored at `dynamic_range_db` below the target
  clip's largest bin (the same floor for both), so exact-zero silence in
  the target sits at the floor and any residual in the prediction counts.

    LSD = mean_frames sqrt(mean_bins (P_db - Phat_db)^2)
    LSD_quiet = sqrt(mean_{quiet bins} (P_db - Phat_db)^2),

  quiet bins being those with target power below `quiet_db` re the target
  clip's largest bin.

  Args:
    pred, target: [..., N] waveforms.

  Returns:
    {'lsd': [...], 'lsd_quiet': [...]} in dB.
  """
  p = power_spectrogram(target, n_fft, hop)
  q = power_spectrogram(pred, n_fft, hop)
  pmax = jnp.max(p, axis=(-2, -1), keepdims=True)
  floor = pmax * 10.0 ** (-dynamic_range_db / 10.0)
  p_db = db(jnp.maximum(p, floor))
  q_db = db(jnp.maximum(q, floor))
  d2 = (p_db - q_db) ** 2
  out = jnp.mean(jnp.sqrt(jnp.mean(d2, axis=-1)), axis=-1)
  quiet = p_db < db(pmax) + quiet_db
  qd = jnp.sum(d2 * quiet, axis=(-2, -1)) / jnp.maximum(
      jnp.sum(quiet, axis=(-2, -1)), 1)
  return {'lsd': out, 'lsd_quiet': jnp.sqrt(qd)}


def gap_rms(pred: jax.Array, gap_mask: jax.Array) -> jax.Array:
  """RMS of `pred` over the exact-silence samples, per clip."""
  m = gap_mask.astype(pred.dtype)
  return jnp.sqrt(jnp.sum(pred ** 2 * m, -1) / jnp.maximum(m.sum(-1), 1.0))


def mrstft_loss(pred: jax.Array, target: jax.Array,
                resolutions: Sequence[tuple[int, ...]] = (
                    (64, 16), (128, 32), (256, 64)),
                eps: float = 1e-8) -> jax.Array:
  """Multi-resolution STFT loss per clip (Parallel WaveGAN / Yamamoto et
  al. 2020), in auraloss' `MultiResolutionSTFTLoss` conventions (the
  metric of the reference's scripts/compute_pesq_visqol.py:108-122): mean
  over resolutions (n_fft, hop[, win_length]) of spectral convergence
  ||S - Shat||_F / ||S||_F plus the log-magnitude L1 mean |log S - log Shat|,
  with S = sqrt(max(|STFT|^2, eps)) (centered, reflect-padded, Hann window of
  win_length, default n_fft). auraloss' default resolutions are 24 kHz ones,
  ((1024, 120, 600), (2048, 240, 1200), (512, 50, 240)); the default here
  suits 8 kHz half-second clips."""
  total = 0.0
  for res in resolutions:
    mag = lambda z, res=res: jnp.sqrt(jnp.maximum(
        power_spectrogram(z, *res), eps))
    s, sh = mag(target), mag(pred)
    sc = jnp.sqrt(jnp.sum((s - sh) ** 2, (-2, -1))) / jnp.sqrt(
        jnp.sum(s ** 2, (-2, -1)))
    log_l1 = jnp.mean(jnp.abs(jnp.log(s) - jnp.log(sh)), (-2, -1))
    total = total + sc + log_l1
  return total / len(resolutions)


__all__: Sequence[str] = [
    'ClipSpec', 'HELD_OUT_PREFIXES', 'find_wavs', 'frames', 'gap_rms',
    'hann_window', 'istft', 'linear_filterbank', 'log_mel', 'lsd',
    'magnitude_spectrogram', 'mel_filterbank', 'mel_spectrogram',
    'mrstft_loss', 'num_frames', 'padded_window', 'power_spectrogram',
    'read_wav', 'safe_log', 'silence_mask', 'split_files', 'stft',
    'synth_batch', 'synth_clip', 'wav_clips']
