"""Our DiT (JAX) beside the diffusers DiT (PyTorch) in one process.

  python -m benchmarks.dit_peer [--repeats=5] [--chunk_steps=50]
      [--samples=256] [--sample_steps=50] [--reuse_steps=5] [--quick]

The peer is `diffusers.DiTTransformer2DModel` (the DiT most PyTorch
diffusion code, including BWCache's released code, builds on) at the size
of configs/bwcache.py's default: 4 blocks, 4 heads x 16 = width 64, patch 2,
8x8x1 images, 10 classes (+ the null class of classifier-free guidance),
adaLN-zero. Both are class-conditional; parameter counts are printed (the
diffusers model has QKV/MLP biases and its own class-dropout embedding, so
they differ slightly). Needs the `bench` extra (torch, diffusers).

Rows (median of `--repeats` timed calls after warm-up, `benchmarks.timing`;
ratios are peer time / our time, so > 1 means ours is faster):

1. Training: `--chunk_steps` rectified-flow steps at batch 128 (minibatch
   gather, t ~ U(0, 1), x_t = (1 - t) eps + t x, loss |v - (x - eps)|^2,
   backward, AdamW 1e-3, an EMA of the parameters). Ours: one compiled
   `core.loop.chunk_fn` (lax.scan over steps). Peer: a Python loop of eager
   torch steps (`torch.optim.AdamW`, `torch._foreach_lerp_` for the EMA).
2. Sampling: `--samples` noises, Euler with `--sample_steps` steps,
   uncached, and BWCache at the schedule's maximum reuse (delta = inf, R =
   `--reuse_steps`): both skip exactly the steps of
   `bwcache.expected_computed_steps(T, R)` (so the work is equal) and both
   compute the indicator at every computed step. Ours: `bwcache.make_sampler`
   (one jitted scan, lax.cond per step). Peer: a Python loop under
   torch.no_grad() with the diffusers model's own blocks (pos_embed, the
   blocks, its adaLN-zero output head), cache held in a Python variable, as
   in BWCache's released code.

Both frameworks get every core this process may use (torch.set_num_threads).
Nothing is asserted; on a machine shared with other jobs the numbers move.
"""

from __future__ import annotations

import os

from absl import app
from absl import flags
import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import timing
from configs import bwcache as bwcache_config
from iclrjax.core import loop
from iclrjax.diffusion import bwcache
from iclrjax.diffusion import dit
from iclrjax.diffusion import features
from iclrjax.diffusion import flow

_REPEATS = flags.DEFINE_integer('repeats', 5, 'Timed calls per row.')
_CHUNK = flags.DEFINE_integer('chunk_steps', 50, 'Training steps per call.')
_SAMPLES = flags.DEFINE_integer('samples', 256, 'Noises sampled.')
_STEPS = flags.DEFINE_integer('sample_steps', 50, 'Euler steps T.')
_REUSE = flags.DEFINE_integer('reuse_steps', 5, 'BWCache R.')
_BUDGET = flags.DEFINE_float('row_budget_s', 30.0,
                             'Fewer timed calls for a slower row.')
_QUICK = flags.DEFINE_bool('quick', False, 'Tiny run: checks it works.')

NUM_CLASSES = 10


def _peer_model(c):
  import torch  # pylint: disable=g-import-not-at-top
  from diffusers import DiTTransformer2DModel  # pylint: disable=g-import-not-at-top
  torch.manual_seed(0)
  m = DiTTransformer2DModel(
      num_attention_heads=c.heads, attention_head_dim=c.width // c.heads,
      in_channels=1, out_channels=1, num_layers=c.depth, sample_size=8,
      patch_size=c.patch, num_embeds_ada_norm=NUM_CLASSES)
  # adaLN-zero zero-initialises the modulation: give every weight a random
  # value so no block is the identity (the cost does not depend on it).
  with torch.no_grad():
    for p in m.parameters():
      if p.dim() > 1:
        p.normal_(0.0, 1.0 / np.sqrt(p.shape[1]))
  return m


def _timed(fn, repeats):
  t, calls = timing.median_time(fn, repeats, _BUDGET.value)
  return t, calls


def _train_rows(c, x, y, repeats, chunk_steps):
  import torch  # pylint: disable=g-import-not-at-top
  model = dit.DiT(patch=c.patch, width=c.width, depth=c.depth,
                  heads=c.heads, num_classes=NUM_CLASSES)
  data = (jnp.asarray(x), jnp.asarray(y))
  init, step = flow.make_trainer(model, data, dict(
      batch_size=c.batch_size, learning_rate=c.learning_rate,
      ema_decay=c.ema_decay, objective='flow', label_dropout=0.0))
  state = loop.init_states(init, loop.seed_keys(0, 1))
  n_ours = sum(int(np.prod(v.shape[1:]))
               for v in jax.tree.leaves(state.params))
  chunk = loop.chunk_fn(step, chunk_steps)
  box = {'state': state, 'start': 0}

  def ours():
    box['state'], m = chunk(box['state'], jnp.int32(box['start']), data)
    jax.block_until_ready((box['state'], m))
    box['start'] += chunk_steps

  t_ours, calls_ours = _timed(ours, repeats)

  peer = _peer_model(c)
  n_peer = sum(p.numel() for p in peer.parameters())
  ema = [p.detach().clone() for p in peer.parameters()]
  opt = torch.optim.AdamW(peer.parameters(), lr=c.learning_rate,
                          weight_decay=0.0)
  xt = torch.from_numpy(np.array(x)).permute(0, 3, 1, 2).contiguous()
  yt = torch.from_numpy(np.array(y)).long()
  gen = torch.Generator().manual_seed(0)
  b = c.batch_size

  def peer_chunk():
    for _ in range(chunk_steps):
      idx = torch.randint(0, xt.shape[0], (b,), generator=gen)
      x1, lab = xt[idx], yt[idx]
      eps = torch.randn(x1.shape, generator=gen)
      t = torch.rand((b,), generator=gen)
      xs = (1 - t)[:, None, None, None] * eps + t[:, None, None, None] * x1
      v = peer(xs, timestep=t * 1000, class_labels=lab).sample
      loss = ((v - (x1 - eps)) ** 2).mean()
      opt.zero_grad(set_to_none=True)
      loss.backward()
      opt.step()
      with torch.no_grad():
        torch._foreach_lerp_(ema, [p.detach() for p in peer.parameters()],
                             1 - c.ema_decay)

  t_peer, calls_peer = _timed(peer_chunk, repeats)
  sps = lambda t: chunk_steps / t
  print(f'\n1. Training, {chunk_steps} steps per call, batch {b}:')
  print(f'{"":28s} {"params":>8s} {"s/call":>8s} {"steps/s":>8s} '
        f'{"calls":>5s}')
  print(f'{"ours (jit + scan)":28s} {n_ours:8d} {t_ours:8.3f} '
        f'{sps(t_ours):8.1f} {calls_ours:5d}')
  print(f'{"diffusers DiT (torch eager)":28s} {n_peer:8d} {t_peer:8.3f} '
        f'{sps(t_peer):8.1f} {calls_peer:5d}')
  print(f'ratio peer / ours: {t_peer / t_ours:.2f}x')
  return params_of(box['state']), model


def params_of(state):
  return jax.tree.map(lambda a: a[0], state.params)


def _peer_sampler(peer, x1, labels, T, computed):
  """Euler with BWCache in the peer: the diffusers model's pieces."""
  import torch  # pylint: disable=g-import-not-at-top
  import torch.nn.functional as F  # pylint: disable=g-import-not-at-top
  p = peer.patch_size
  out_c = peer.out_channels

  def head(h, t):
    cond = peer.transformer_blocks[0].norm1.emb(t, labels,
                                                hidden_dtype=h.dtype)
    shift, scale = peer.proj_out_1(F.silu(cond)).chunk(2, dim=1)
    h = peer.norm_out(h) * (1 + scale[:, None]) + shift[:, None]
    h = peer.proj_out_2(h)
    s = int(h.shape[1] ** 0.5)
    h = h.reshape(-1, s, s, p, p, out_c)
    return torch.einsum('nhwpqc->nchpwq', h).reshape(-1, out_c, s * p, s * p)

  @torch.no_grad()
  def run():
    x = x1.clone()
    prev, cached, inds = None, None, []
    for k in range(T):
      t = torch.full((x.shape[0],), k / T)
      tt = t * 1000
      if computed[k]:
        h = peer.pos_embed(x)
        outs = []
        for blk in peer.transformer_blocks:
          h = blk(h, timestep=tt, class_labels=labels)
          outs.append(h)
        if prev is not None:   # the indicator (mean relative L1 per block)
          inds.append(float(torch.stack([
              (a - b).abs().sum() / b.abs().sum()
              for a, b in zip(outs, prev)]).mean()))
        prev, cached = outs, h
      v = head(cached, tt)
      x = x + v / T
    return x, inds

  return run


def _sample_rows(c, params, model, repeats, samples, T, R):
  import torch  # pylint: disable=g-import-not-at-top
  x1 = jax.random.normal(jax.random.key(0), (samples, 8, 8, 1))
  labels = jnp.arange(samples, dtype=jnp.int32) % NUM_CLASSES
  computed = np.asarray(bwcache.expected_computed_steps(T, R)).astype(bool)
  unc = bwcache.make_sampler(model, T, cache=False)
  cac = bwcache.make_sampler(model, T)
  rows = []
  for name, fn, delta, r in (('uncached', unc, 0.0, 0),
                             ('BWCache (delta inf)', cac, float('inf'), R)):
    out = {}

    def call(fn=fn, delta=delta, r=r):
      out['res'] = jax.block_until_ready(fn(params, x1, delta, r, labels))

    t, calls = _timed(call, repeats)
    if delta == float('inf'):
      got = np.asarray(out['res'].computed).astype(bool)
      assert np.array_equal(got, computed), (got, computed)
    rows.append((f'ours {name}', t, calls, int(computed.sum()) if r else T))
  peer = _peer_model(c).eval()
  xt = torch.from_numpy(np.array(x1)).permute(0, 3, 1, 2).contiguous()
  lt = torch.from_numpy(np.array(labels)).long()
  for name, mask in (('uncached', np.ones(T, bool)),
                     ('BWCache (delta inf)', computed)):
    run = _peer_sampler(peer, xt, lt, T, mask)
    t, calls = _timed(run, repeats)
    rows.append((f'diffusers {name}', t, calls, int(mask.sum())))
  print(f'\n2. Sampling {samples} noises, Euler T = {T}, R = {R} (both skip '
        f'the same {T - int(computed.sum())} steps):')
  print(f'{"":34s} {"computed":>8s} {"s/call":>8s} {"calls":>5s}')
  for name, t, calls, comp in rows:
    print(f'{name:34s} {comp:8d} {t:8.3f} {calls:5d}')
  (_, ou, _, _), (_, oc, _, _), (_, pu, _, _), (_, pc, _, _) = rows
  print(f'ratio peer / ours: uncached {pu / ou:.2f}x, BWCache {pc / oc:.2f}x;'
        f' caching speedup ours {ou / oc:.2f}x, peer {pu / pc:.2f}x '
        f'(compute ceiling {T / computed.sum():.2f}x)')


def main(argv):
  del argv
  import torch  # pylint: disable=g-import-not-at-top
  cpus = timing.num_cpus()
  torch.set_num_threads(cpus)
  c = bwcache_config.get_config(None)
  quick = _QUICK.value
  repeats = 2 if quick else _REPEATS.value
  chunk_steps = 5 if quick else _CHUNK.value
  samples = 16 if quick else _SAMPLES.value
  T = 10 if quick else _STEPS.value
  R = 2 if quick else _REUSE.value
  print(f'jax {jax.__version__} ({jax.default_backend()}), torch '
        f'{torch.__version__}, diffusers {timing.version("diffusers")}; '
        f'{cpus} CPU threads; load average '
        f'{", ".join(f"{v:.2f}" for v in os.getloadavg())}')
  print(f'DiT: width {c.width}, {c.depth} blocks, {c.heads} heads, patch '
        f'{c.patch}, 8x8x1 digits, {NUM_CLASSES} classes')
  x, y = features.digits_labeled('train')
  params, model = _train_rows(c, x, y, repeats, chunk_steps)
  _sample_rows(c, params, model, repeats, samples, T, R)


if __name__ == '__main__':
  app.run(main)
