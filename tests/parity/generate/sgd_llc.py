"""SGD / LLC fixture: devinterp's SGLD sampler and LLC estimator.

Runs timaeus-research/devinterp (its `src/` on the path, torch, CPU) on a
tiny ReLU MLP (2 -> 4 -> 1, squared-error negative log-likelihood
0.5 ||y - f(x)||^2 per example) at w*, a full-batch gradient-descent minimum
of n = 64 examples drawn here:

1. `devinterp.slt.sampler.sample` (the default sampler, `optim.sgld.SGLD`)
   with the `slt.llc.LLCEstimator` callback and a recording callback, 2
   chains x 24 draws, no burn-in, the noise saved (`save_noise`): per step
   the minibatch indices (an index column in the dataset), the Gaussian noise
   the sampler drew, the parameters after the step and the minibatch loss;
   and the estimator's LLC (mean, per chain) with init_loss = L_n(w*).
2. One step of `optim.sgld.SGLD` and of `optim.sgmcmc.SGMCMC.sgld` with
   localization and weight decay on one fixed minibatch, the noise saved.
3. `sample` + `LLCEstimator` with 8 chains x (200 burn-in + 1600 draws): the
   per-chain LLC (a Monte-Carlo estimate, compared within its spread).
4. devinterp's defaults: `utils.default_nbeta(loader)` (batch m / log m),
   the default init loss (`utils.get_init_loss_multi_batch`, as `sample`
   calls it, over num_chains minibatches, with the batches' indices) and
   `utils.get_init_loss_full_batch`.

Parameters are stored in torch's layout (Linear weight [out, in]).
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

SEED = 2503
N, M, D_IN, H = 64, 16, 2, 4
NBETA = N / np.log(N)           # n beta with beta = 1 / log n (Lau et al.)
LR = 2e-3                       # devinterp's lr = 2 x blackjax's eps
GAMMA = 10.0                    # localization
WD = 0.5                        # weight decay (the one-step checks)
TRAJ_CHAINS, TRAJ_DRAWS = 2, 24
MC_CHAINS, MC_BURNIN, MC_DRAWS = 8, 200, 1600


def main():
  args = _common.cli(__doc__)
  _common.add_path(args.ref, 'src')
  warnings.simplefilter('ignore')
  import torch
  from torch.utils.data import DataLoader, TensorDataset
  from devinterp.optim.sgld import SGLD
  from devinterp.optim.sgmcmc import SGMCMC
  from devinterp.slt.callback import SamplerCallback
  from devinterp.slt.llc import LLCEstimator
  from devinterp.slt.sampler import sample
  from devinterp import utils as di_utils

  torch.set_default_dtype(torch.float32)
  rng = np.random.default_rng(SEED)
  x = rng.normal(size=(N, D_IN)).astype(np.float32)
  teacher = [rng.normal(size=s).astype(np.float32)
             for s in ((H, D_IN), (H,), (1, H), (1,))]
  hid = np.maximum(x @ teacher[0].T + teacher[1], 0)
  y = (hid @ teacher[2].T + teacher[3]
       + 0.3 * rng.normal(size=(N, 1))).astype(np.float32)
  w_init = [t + 0.3 * rng.normal(size=t.shape).astype(np.float32)
            for t in teacher]

  def make_model(ws):
    model = torch.nn.Sequential(torch.nn.Linear(D_IN, H), torch.nn.ReLU(),
                                torch.nn.Linear(H, 1))
    with torch.no_grad():
      for p, w in zip(model.parameters(), ws):
        p.copy_(torch.as_tensor(w))
    return model

  def evaluate(model, data):
    xb, yb = data[0], data[1]
    return 0.5 * ((model(xb) - yb)**2).sum(-1).mean()

  xt, yt = torch.as_tensor(x), torch.as_tensor(y)
  # w*: full-batch gradient descent (setup, not under test)
  model = make_model(w_init)
  opt = torch.optim.SGD(model.parameters(), lr=0.05)
  for _ in range(4000):
    opt.zero_grad()
    evaluate(model, (xt, yt)).backward()
    opt.step()
  w_star = [p.detach().numpy().copy() for p in model.parameters()]
  with torch.no_grad():
    loss_star = float(evaluate(model, (xt, yt)))
  model.zero_grad()
  evaluate(model, (xt, yt)).backward()
  grad_norm = float(sum((p.grad**2).sum() for p in model.parameters())**0.5)

  dataset = TensorDataset(xt, yt, torch.arange(N))

  def loader(seed):
    return DataLoader(dataset, batch_size=M, shuffle=True,
                      generator=torch.Generator().manual_seed(seed))

  class Record(SamplerCallback):
    """Per (chain, draw): batch indices, noise, params after, loss."""

    def __init__(self, chains, draws):
      super().__init__()
      self.idx = np.zeros((chains, draws, M), np.int64)
      self.noise = [np.zeros((chains, draws) + w.shape, np.float32)
                    for w in w_star]
      self.after = [np.zeros((chains, draws) + w.shape, np.float32)
                    for w in w_star]
      self.loss = np.zeros((chains, draws), np.float32)

    def __call__(self, chain, draw, data, optimizer, model, loss, **kw):
      self.idx[chain, draw] = data[2].numpy()
      for k, (nz, p) in enumerate(zip(optimizer.noise[0],
                                      model.parameters())):
        self.noise[k][chain, draw] = nz.numpy()
        self.after[k][chain, draw] = p.detach().numpy()
      self.loss[chain, draw] = float(loss)

    def get_results(self):
      return {}

  out = dict(x=x, y=y, loss_star=np.float32(loss_star),
             grad_norm_star=np.float32(grad_norm), nbeta=np.float32(NBETA),
             lr=np.float32(LR), gamma=np.float32(GAMMA), wd=np.float32(WD),
             mc_burnin=np.int64(MC_BURNIN), mc_draws=np.int64(MC_DRAWS))
  for k, w in enumerate(w_star):
    out[f'w_star{k}'] = w

  # 1. the trajectory through devinterp's sample loop
  rec = Record(TRAJ_CHAINS, TRAJ_DRAWS)
  llc = LLCEstimator(TRAJ_CHAINS, TRAJ_DRAWS, torch.tensor(loss_star),
                     nbeta=NBETA)
  res = sample(make_model(w_star), loader(1), callbacks=[llc, rec],
               evaluate=evaluate, sampling_method=SGLD,
               optimizer_kwargs=dict(lr=LR, localization=GAMMA, nbeta=NBETA,
                                     save_noise=True),
               num_draws=TRAJ_DRAWS, num_chains=TRAJ_CHAINS,
               num_burnin_steps=0, init_loss=loss_star, seed=7,
               verbose=False)
  out.update(traj_idx=rec.idx, traj_loss=rec.loss,
             traj_loss_trace=res['loss/trace'],
             traj_llc_mean=np.float32(res['llc/mean']),
             traj_llc_chain=np.array([res[f'llc-chain/{i}']
                                      for i in range(TRAJ_CHAINS)],
                                     np.float32))
  for k in range(len(w_star)):
    out[f'traj_noise{k}'] = rec.noise[k]
    out[f'traj_after{k}'] = rec.after[k]

  # 2. one step of each sampler class, weight decay and localization on
  idx1 = rng.permutation(N)[:M]
  out['step_idx'] = idx1
  for name, make_opt, noise_of in (
      ('sgld', lambda ps: SGLD(ps, lr=LR, localization=GAMMA, nbeta=NBETA,
                               weight_decay=WD, save_noise=True),
       lambda o: o.noise[0]),
      ('sgmcmc', lambda ps: SGMCMC.sgld(ps, lr=LR, localization=GAMMA,
                                        nbeta=NBETA, weight_decay=WD,
                                        metrics=['noise']),
       lambda o: o.param_groups[0]['metrics']['noise'])):
    # start off w* (the localization term is not zero), centre at w*: the
    # prior's centre is the parameters at the sampler's construction
    start = [w + 0.05 * rng.normal(size=w.shape).astype(np.float32)
             for w in w_star]
    model_c = make_model(w_star)
    o = make_opt(list(model_c.parameters()))
    with torch.no_grad():
      for p, s in zip(model_c.parameters(), start):
        p.copy_(torch.as_tensor(s))
    o.zero_grad()
    evaluate(model_c, (xt[idx1], yt[idx1])).backward()
    o.step()
    for k, (nz, p, s) in enumerate(zip(noise_of(o), model_c.parameters(),
                                       start)):
      out[f'{name}_start{k}'] = s
      out[f'{name}_noise{k}'] = nz.numpy()
      out[f'{name}_after{k}'] = p.detach().numpy()

  # 3. the Monte-Carlo LLC, many chains
  llc = LLCEstimator(MC_CHAINS, MC_DRAWS, torch.tensor(loss_star),
                     nbeta=NBETA)
  res = sample(make_model(w_star), loader(2), callbacks=[llc],
               evaluate=evaluate, sampling_method=SGLD,
               optimizer_kwargs=dict(lr=LR, localization=GAMMA, nbeta=NBETA),
               num_draws=MC_DRAWS, num_chains=MC_CHAINS,
               num_burnin_steps=MC_BURNIN, init_loss=loss_star, seed=3,
               verbose=False)
  out['mc_llc_chain'] = np.array([res[f'llc-chain/{i}']
                                  for i in range(MC_CHAINS)], np.float32)
  out['mc_llc_mean'] = np.float32(res['llc/mean'])

  # 4. devinterp's defaults
  out['default_nbeta'] = np.float32(di_utils.default_nbeta(loader(0)))
  seeded = di_utils.get_seeded_dataloader(loader(0), 5)
  out['default_init_idx'] = np.stack(
      [b[2].numpy() for _, b in zip(range(TRAJ_CHAINS), seeded)])
  out['default_init_loss'] = np.float32(di_utils.get_init_loss_multi_batch(
      loader(0), TRAJ_CHAINS, make_model(w_star), evaluate, 'cpu', seed=5))
  out['full_batch_init_loss'] = np.float32(
      di_utils.get_init_loss_full_batch(loader(0), make_model(w_star),
                                        evaluate, 'cpu'))

  _common.write(
      'sgd_llc', out, args=args, repo='timaeus-research/devinterp',
      files=['src/devinterp/slt/sampler.py',
             'src/devinterp/backends/default/slt/sampler.py',
             'src/devinterp/optim/sgld.py', 'src/devinterp/optim/sgmcmc.py',
             'src/devinterp/optim/prior.py', 'src/devinterp/slt/llc.py',
             'src/devinterp/utils.py'],
      what=('SGLD trajectory (batches, noise, parameters, losses) and LLC '
            'of devinterp.slt.sampler.sample with SGLD + LLCEstimator; one '
            'step of SGLD and SGMCMC.sgld with weight decay; an 8-chain '
            'Monte-Carlo LLC; default nbeta and init losses'),
      packages=('numpy', 'torch', 'devinterp'),
      notes=('tiny ReLU MLP 2-4-1, squared-error NLL, n=64, batch 16, '
             f'nbeta=n/log n, lr={LR}, localization={GAMMA}; '
             'imported from the checkout src/ (PyPI devinterp 1.3.2 has '
             'the same version)'))


if __name__ == '__main__':
  main()
