"""FastMix fixture: one mixture-weight update of the released training loop.

Runs `train()` of pretrain/train_fastmix_val.py (hrtan/fastmix) for one
iteration on a tiny model (embedding -> tanh layer -> `lm_head`) whose
parameters are drawn here, with K = 3 training groups (3 examples each, in
one shuffled micro-batch) and one validation batch. The iteration is one
where the released loop takes its outer step (iter_num = eval_step_interval),
so it computes the per-group head gradients, the validation head gradient,
their inner products, the gradient on `dataset_probs` and its AdamW step,
then the alpha-weighted training loss and its backward; the fake monitor
stops the loop there. Recorded: the inner products, the gradient on z, z
after the AdamW step, the weighted loss and its parameter gradient.

The script's nested `compute_dataset_probs_gradient` is also called on its
own (rebuilt from `train`'s code object, unchanged) with lambda_reg != 0,
which the loop hard-codes to 0.

Stubs: lightning, transformers, pytorch_lightning, wandb, yaml and the
lit_gpt modules train() does not use (model, data, speed monitor); the real
lit_gpt.utils (chunked_cross_entropy) and lit_gpt.fused_cross_entropy run.
FusedCrossEntropyLoss asserts CUDA tensors: the batch is a Tensor subclass
that reports is_cuda (the computation stays on the CPU, unchanged).
Hyper-parameters are set as the script's YAML config sets them (module
globals): a constant model learning rate (decay_lr False), which is the eta
of the update.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
import tempfile
import types
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

SEED = 20260
K, PER, T, V, D, H, BV = 3, 3, 6, 11, 5, 7, 4
ETA = 0.5            # the model's learning rate = eta of the outer update
LR_Z = 0.1           # --learning_rate_dataset
LAMBDA_REG = 0.3     # for the direct call of compute_dataset_probs_gradient


class _Any:
  def __init__(self, *a, **k):
    pass

  def __getattr__(self, name):
    return _Any()

  def __call__(self, *a, **k):
    return _Any()


_stub = _common.stub


def _import_reference(ref: Path):
  _stub('lightning', Fabric=_Any, fabric=None)
  _stub('lightning.fabric')
  _stub('lightning.fabric.strategies', FSDPStrategy=_Any, XLAStrategy=_Any)
  _stub('lightning.fabric.loggers', CSVLogger=_Any)
  _stub('transformers', LlamaConfig=_Any, LlamaForCausalLM=_Any)
  _stub('pytorch_lightning')
  _stub('pytorch_lightning.loggers', WandbLogger=_Any)
  _stub('wandb', log=lambda *a, **k: None, login=lambda *a, **k: None)
  _stub('yaml')
  pkg = _stub('lit_gpt')
  pkg.__path__ = [str(ref / 'lit_gpt')]
  _stub('lit_gpt.model', GPT=_Any, Block=_Any, Config=_Any,
        CausalSelfAttention=_Any)
  _stub('lit_gpt.packed_dataset', CombinedDataset=_Any, PackedDataset=_Any)
  _stub('lit_gpt.speed_monitor', SpeedMonitorFabric=_Any,
        estimate_flops=_Any, measure_flops=_Any)
  import lit_gpt.fused_cross_entropy as fce  # the released loss
  import lit_gpt.utils  # noqa: F401  chunked_cross_entropy
  pkg.FusedCrossEntropyLoss = fce.FusedCrossEntropyLoss
  path = ref / 'pretrain' / 'train_fastmix_val.py'
  spec = importlib.util.spec_from_file_location('train_fastmix_val', path)
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod


def main():
  args = _common.cli(__doc__)
  import torch
  torch.set_default_dtype(torch.float32)
  mod = _import_reference(args.ref.resolve())
  rng = np.random.default_rng(SEED)
  embed = rng.normal(size=(V, D)).astype(np.float32)
  w1 = (rng.normal(size=(H, D)) / 2).astype(np.float32)     # torch [out, in]
  b1 = (rng.normal(size=H) / 4).astype(np.float32)
  wh = (rng.normal(size=(V, H)) / 2).astype(np.float32)
  bh = (rng.normal(size=V) / 4).astype(np.float32)
  train_data = rng.integers(0, V, size=(K * PER, T + 1))
  group_ids = rng.permutation(np.repeat(np.arange(K), PER))
  val_data = rng.integers(0, V, size=(BV, T + 1))
  z_lam = rng.normal(size=K).astype(np.float32)
  inner_lam = rng.normal(size=K).astype(np.float32)

  class CudaLike(torch.Tensor):
    """Reports is_cuda for FusedCrossEntropyLoss's assertion only."""

    @property
    def is_cuda(self):
      return True

  class Tiny(torch.nn.Module):
    def __init__(self):
      super().__init__()
      self.config = types.SimpleNamespace(max_position_embeddings=T)
      self.embed = torch.nn.Embedding(V, D)
      self.body = torch.nn.Linear(D, H)
      self.lm_head = torch.nn.Linear(H, V)
      with torch.no_grad():
        for p, v in [(self.embed.weight, embed), (self.body.weight, w1),
                     (self.body.bias, b1), (self.lm_head.weight, wh),
                     (self.lm_head.bias, bh)]:
          p.copy_(torch.from_numpy(v))

    def forward(self, ids):
      h = torch.tanh(self.body(self.embed(ids.as_subclass(torch.Tensor))))
      return types.SimpleNamespace(logits=self.lm_head(h).as_subclass(CudaLike))

  class Stop(Exception):
    pass

  printed, monitored = [], {}

  class Fabric:
    device = torch.device('cpu')
    world_size = 1

    def print(self, *a):
      printed.append([x.detach().clone() if torch.is_tensor(x) else x
                      for x in a])

    def backward(self, loss):
      loss.backward()

    def no_backward_sync(self, model, enabled):
      import contextlib
      return contextlib.nullcontext()

    def log_dict(self, *a, **k):
      pass

  class Monitor:
    def on_train_batch_end(self, *a, train_loss=None, **k):
      monitored['train_loss'] = train_loss
      raise Stop

  class Probs(torch.nn.Module):
    def __init__(self, probs):
      super().__init__()
      self.probs = probs

  # The hyper-parameters, as the script's YAML config sets them.
  mod.train_data_config = [(f'train_src{i}', 1.0) for i in range(K)]
  mod.decay_lr = False
  mod.learning_rate = ETA
  model = Tiny()
  optimizer = torch.optim.AdamW(model.parameters(), lr=ETA,
                                weight_decay=mod.weight_decay,
                                betas=(mod.beta1, mod.beta2))
  probs = Probs(torch.nn.Parameter(torch.ones(K, requires_grad=True)))
  z_opt = torch.optim.AdamW([probs.probs], lr=LR_Z, weight_decay=0,
                            betas=(mod.beta1, mod.beta2))
  state = {'model': model, 'optimizer': optimizer, 'iter_num':
           mod.eval_step_interval, 'step_count': 0, 'dataset_probs': probs,
           'dataset_optimizer': z_opt}
  batch = torch.from_numpy(train_data).as_subclass(CudaLike)
  train_loader = [(batch, torch.from_numpy(group_ids))]
  val_loaders = [[(torch.from_numpy(val_data), None)]]
  with tempfile.TemporaryDirectory() as out:
    try:
      mod.train(Fabric(), state, train_loader, val_loaders, Monitor(), False,
                Path(out))
      raise RuntimeError('the loop did not reach the monitor')
    except Stop:
      pass
  # The loop prints the inner products and then the gradient it sets on z
  # (probs.grad afterwards also holds the weighted loss's gradient on z).
  line = [p[0] for p in printed if str(p[0]).startswith('Inner products')]
  inner = np.array(ast.literal_eval(line[0].split(':', 1)[1].strip()))
  at = [i for i, p in enumerate(printed)
        if str(p[0]).startswith('The true gradient')][0]
  grad_z = printed[at + 1][0].numpy()
  z_after = probs.probs.detach().numpy().copy()
  acc = mod.gradient_accumulation_steps   # the loop backprops loss / acc
  inner_grads = {n: (p.grad.detach().numpy() * acc)
                 for n, p in model.named_parameters()}

  # The nested helper, rebuilt from train's code object (not re-written).
  code = [c for c in mod.train.__code__.co_consts
          if getattr(c, 'co_name', '') == 'compute_dataset_probs_gradient'][0]
  helper = types.FunctionType(code, mod.__dict__)
  grad_lam = helper(torch.from_numpy(z_lam), list(map(float, inner_lam)),
                    ETA, LAMBDA_REG).numpy()

  _common.write('fastmix', {
      'embed': embed, 'body_w': w1, 'body_b': b1, 'head_w': wh, 'head_b': bh,
      'train_data': train_data, 'group_ids': group_ids, 'val_data': val_data,
      'eta': np.float32(ETA), 'lr_z': np.float32(LR_Z),
      'z_lam': z_lam, 'inner_lam': inner_lam,
      'lambda_reg': np.float32(LAMBDA_REG),
      'inner': inner, 'grad_z': grad_z, 'z_after': z_after,
      'train_loss': np.float64(monitored['train_loss']),
      **{'grad_' + n.replace('.', '_'): g for n, g in inner_grads.items()},
      'grad_lam': grad_lam,
  }, args=args, repo='hrtan/fastmix',
     files=['pretrain/train_fastmix_val.py', 'lit_gpt/utils.py',
            'lit_gpt/fused_cross_entropy.py'],
     what=('one outer (mixture-weight) step of train(): per-group and '
           'validation lm_head gradients, inner products, gradient on z, '
           'AdamW step on z, then the alpha-weighted training loss and its '
           'gradient; compute_dataset_probs_gradient with lambda_reg != 0'),
     packages=('numpy', 'torch'),
     notes=('tiny model embed -> tanh(Linear) -> lm_head (torch layout '
            '[out, in]); eta = the model lr (decay_lr False); '
            'grad_<param> = gradient of the weighted loss (x accumulation '
            'steps)'))


if __name__ == '__main__':
  main()
