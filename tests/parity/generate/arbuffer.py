"""AR buffer (conorhassan/AR-nanoTabPFN): the attention masks, the buffer
positions of the sampler and of the teacher-forced joint density, the
mixture head and the log-density, run with the release's own code.

  python tests/parity/generate/arbuffer.py --ref CHECKOUT

Needs torch (>= 2.5, flex_attention; CPU is enough) and numpy. A tiny
`ARTabPFN` (one feature) gets weights drawn with NumPy; its
`ARTabPFNPredictor` runs `evaluate_joint_density` and `sample_sequence` as
released, with `_teacher_forcing_decode` / `transformer_decode` wrapped to
record the token embeddings they are handed and the backbone output they
return (the wrapped methods still run). Masks are the released BlockMasks'
own `mask_mod`s, made dense with torch's `create_mask`.
"""

from __future__ import annotations

import copy
import sys

sys.dont_write_bytecode = True  # leave the reference checkout untouched

import _common  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.attention import flex_attention  # noqa: E402

SEED = 2510  # np.random.default_rng
MODEL = dict(d_model=8, n_heads=2, n_layers=1, d_ff=16, num_features=1,
             buffer_size=3, num_components=3)
B, NC, NT = 2, 4, 7
# create_row_mask(num_rows = nc + nb + nt, nc, nb, attending_chunks); -1:
# None (the default nt // 2 nb).
ROW_MASKS = ((3, 2, 8, -1), (4, 3, 6, -1), (2, 2, 8, 3), (5, 3, 7, -1),
             (3, 2, 8, 0))


def dense(block_mask, q_len, kv_len):
  return flex_attention.create_mask(block_mask.mask_mod, None, None, q_len,
                                    kv_len, device='cpu')[0, 0].numpy()


def recorder(fn, log):
  def wrapped(embedding, *a, **k):
    z = fn(embedding, *a, **k)
    log.append((embedding.clone(), z.clone()))
    return z
  return wrapped


def main():
  args = _common.cli(__doc__)
  _common.add_path(args.ref)
  import ar_tabpfn  # pylint: disable=import-outside-toplevel
  from ar_tabpfn.model import inference  # pylint: disable=import-outside-toplevel

  rng = np.random.default_rng(SEED)
  out = {}

  # 1. Masks.
  out['row_cfg'] = np.array(ROW_MASKS, np.int64)
  for i, (nc, nb, nt, chunks) in enumerate(ROW_MASKS):
    n = nc + nb + nt
    bm = ar_tabpfn.create_row_mask(n, nc, nb, None if chunks < 0 else chunks,
                                   device='cpu')
    out[f'row_mask_{i}'] = dense(bm, n, n)
  pred_cls = inference.ARTabPFNPredictor
  tf = pred_cls._create_teacher_forcing_mask(None, NC, NT, 'cpu')
  out['tf_mask'] = dense(tf, 2 * NT, NC + 2 * NT)
  for n_new in (1, 2):
    dm = pred_cls._create_decode_mask(None, NC + 2, n_new, 'cpu')
    out[f'decode_mask_{n_new}'] = dense(dm, n_new, NC + 2 + n_new)

  # 2. A tiny model, every weight drawn with NumPy (after the head's own
  #    bias initialisation is recorded).
  model = ar_tabpfn.ARTabPFN(**MODEL)
  for name in ('mean_bias', 'std_bias', 'weight_bias'):
    out['init.' + name] = getattr(model.head, name).detach().numpy().copy()
  with torch.no_grad():
    for name, p in model.named_parameters():
      # Unit-scale ar_tokens: distinct positions, visible in the tokens; a
      # wide std_bias: some stds reach the clamp at 2.
      scale = {'ar_tokens': 1.0, 'head.std_bias': 2.0}.get(name, 0.5)
      p.copy_(torch.from_numpy(
          rng.normal(0, scale, tuple(p.shape)).astype(np.float32)))
  model.eval()
  for name, p in model.named_parameters():
    if not name.startswith('backbone.'):
      out['w.' + name] = p.detach().numpy().copy()

  xc = rng.normal(size=(B, NC, 1)).astype(np.float32)
  yc = rng.normal(size=(B, NC)).astype(np.float32)
  xt = rng.normal(size=(B, NT, 1)).astype(np.float32)
  yt = rng.normal(size=(B, NT)).astype(np.float32)
  out.update(xc=xc, yc=yc, xt=xt, yt=yt)
  t = torch.from_numpy

  # 3. The teacher-forced joint density (flex path).
  pred = pred_cls.from_trained_model(model)
  log = []
  pred._teacher_forcing_decode = recorder(pred._teacher_forcing_decode, log)
  logpdf = pred.evaluate_joint_density(t(xc), t(yc), t(xt), t(yt))
  (emb, z), = log
  out.update(tf_tokens=emb.numpy(), tf_z=z.numpy(), tf_logpdf=logpdf.numpy())
  with torch.no_grad():
    z_t = z[:, NT:]
    mean, std, _, logw = model.head._parameterize(z_t)
    out.update(mix_mean=mean[..., 0].numpy(), mix_std=std[..., 0].numpy(),
               mix_logw=logw[..., 0].numpy())
    # The same head with the tanh-approximate GELU (ours; the release's
    # nn.GELU() is exact erf).
    tanh_head = copy.deepcopy(model.head)
    tanh_head.head[1] = nn.GELU(approximate='tanh')
    mean, std, _, logw = tanh_head._parameterize(z_t)
    out.update(mix_tanh_mean=mean[..., 0].numpy(),
               mix_tanh_std=std[..., 0].numpy(),
               mix_tanh_logw=logw[..., 0].numpy())

  # 4. The sampler: the tokens handed to each cached decode step.
  pred = pred_cls.from_trained_model(model)
  log = []
  pred.transformer_decode = recorder(pred.transformer_decode, log)
  torch.manual_seed(SEED)
  ys = pred.sample_sequence(t(xc), t(yc), t(xt))
  assert len(log) == NT and log[0][0].shape[1] == 1
  out.update(samp_y=ys.numpy(), samp_first=log[0][0].numpy(),
             samp_tokens=np.stack([e.numpy() for e, _ in log[1:]]))

  _common.write(
      'arbuffer', out, args=args, repo='conorhassan/AR-nanoTabPFN',
      files=['ar_tabpfn/model/attention.py', 'ar_tabpfn/model/inference.py',
             'ar_tabpfn/model/model.py'],
      what=('dense masks of create_row_mask, _create_teacher_forcing_mask '
            'and _create_decode_mask; a tiny ARTabPFN (NumPy weights): the '
            'tokens and backbone output of evaluate_joint_density, its '
            'per-target log-density, the head mixture (exact and tanh GELU) '
            'on those outputs; the tokens each sample_sequence step hands '
            'transformer_decode and the draws'),
      packages=('numpy', 'torch'),
      notes=('w.* are the embedder, ar_tokens and head weights (torch '
             'layout); samp_tokens[t - 1] = [buffer, target] of step t >= 1, '
             'samp_first = [target] of step 0; mix_* drop the dim_y axis'))


if __name__ == '__main__':
  main()
