"""Fixture for the ReMDM sampler step (kuleshov-group/remdm, diffusion.py).

Runs the reference's own `Diffusion._ddpm_caching_update` (one sampler step:
'mdlm', 'remdm-cap', 'remdm-rescale', 'remdm-conf', 'remdm-loop') and its
`Diffusion._sample` loop on a stub backbone that returns fixed logits, and
records the per-position categorical law of x_s given x_t.

The step draws x_s with `diffusion._sample_categorical(q)`, then (MDLM
branches) copies the decoded tokens of x_t. To get the exact law of x_s,
not a sample, the step is re-run once per category k with
`_sample_categorical` patched to return k everywhere: position i lands on
xs_k[i], so P(x_s^i = v) = sum_k q^i_k / sum(q^i) [xs_k[i] == v]. That is
the reference's own arithmetic and post-processing; nothing is re-written.

  python tests/parity/generate/dlm.py --ref CHECKOUT_OF_kuleshov-group/remdm
"""

from __future__ import annotations

import types

import numpy as np

import _common

args = _common.cli(__doc__)
_common.add_path(args.ref)


# -- stubs for the imports the sampler step does not use ---------------------------
_stub = _common.stub


class _Plain:  # LightningModule / MeanMetric stand-in: a plain object
  pass


_hydra = _stub('hydra')
_hydra.utils = _stub('hydra.utils')
_stub('lightning', LightningModule=_Plain)
_tm = _stub('torchmetrics')
_tm.aggregation = _stub('torchmetrics.aggregation', MeanMetric=_Plain)
_stub('transformers', PreTrainedTokenizer=object)
for _name in ('dataloader', 'models', 'utils'):
  _stub(_name)

import torch  # noqa: E402

import diffusion  # noqa: E402  (the reference's module)
import noise_schedule  # noqa: E402

N, L, V = 4, 8, 5          # batch, length, tokens; MASK = V (vocab V + 1)
MASK = V
rng = np.random.default_rng(20260)
logits = rng.normal(0.0, 1.5, (N, L, V + 1)).astype(np.float32)


class _Backbone:
  """The network: fixed logits [N, L, V + 1] whatever x and sigma are."""

  def __call__(self, x, sigma):
    del sigma
    assert tuple(x.shape) == (N, L)
    return torch.from_numpy(logits.copy())


def _ns(**kw):
  return types.SimpleNamespace(**kw)


def make(sampler, eta=0.0, t_on=0.0, t_off=0.0, alpha_on=0.0):
  """The minimal Diffusion object the sampler step and `_sample` read."""
  d = object.__new__(diffusion.Diffusion)
  d.config = _ns(
      noise=_ns(type='loglinear'),
      sampling=_ns(sampler=sampler, eta=eta, t_on=t_on, t_off=t_off,
                   alpha_on=alpha_on, nucleus_p=1.0, steps=16, dfm=False,
                   noise_removal=False),
      loader=_ns(eval_batch_size=N), model=_ns(length=L))
  d.noise = noise_schedule.LogLinearNoise()
  d.backbone = _Backbone()
  d.mask_index = MASK
  d.vocab_size = V + 1
  d.parameterization = 'subs'
  d.time_conditioning = False
  d.neg_infinity = -1000000.0
  d.sampler = 'ddpm_cache'
  d.device = 'cpu'
  return d


# -- the exact law of one step, through the reference's own code ---------------------
_ORIG_CAT = diffusion._sample_categorical
_mode = {'force': None, 'q': None}


def _categorical(q):
  _mode['q'] = q.detach().to(torch.float64).clone()
  if _mode['force'] is not None:
    return torch.full(q.shape[:-1], _mode['force'], dtype=torch.long)
  return _ORIG_CAT(q)   # real draws (trajectories), torch's global seed


diffusion._sample_categorical = _categorical
_STEP = diffusion.Diffusion._ddpm_caching_update


def step_law(d, x, t, dt, conf=None):
  """P(x_s = v | x_t = x) [N, L, V + 1] of one reference step at time t."""
  law = np.zeros((N, L, V + 1))
  tt = torch.full((N, 1), float(t))
  for k in range(V + 1):
    _mode['force'] = k
    _, xs, _ = _STEP(d, x.clone(), tt, dt,
                     conf=None if conf is None else conf.clone())
    q = _mode['q'].numpy()
    # (alpha_s - (1 - sigma) alpha_t) rounds to -1e-17 at sigma = sigma_max;
    # the Gumbel argmax never picks a negative weight, i.e. weight 0.
    assert np.all(q >= -1e-6), 'negative categorical weight'
    q = np.maximum(q, 0.0)
    w = q[..., k] / q.sum(-1)
    law[np.arange(N)[:, None], np.arange(L)[None], xs.numpy()] += w
  _mode['force'] = None
  return law


# -- A. single steps at given (t, dt) ---------------------------------------------------
x_t = rng.integers(0, V, (N, L))
x_t[rng.random((N, L)) < 0.5] = MASK
x_t[0] = MASK                                   # one all-masked row
x_t[1, :] = rng.integers(0, V, L)               # one fully decoded row
x_t[1, 0] = MASK
x_t = torch.from_numpy(x_t.astype(np.int64))
dec = (x_t != MASK).numpy()
# conf as `remdm-conf` keeps it: -p_theta(token) where decoded, -inf masked.
conf_np = np.where(dec, -rng.uniform(0.05, 1.0, (N, L)), -np.inf)
conf_np = conf_np.astype(np.float32)

# (sampler, t, dt, eta)
CASES = [('mdlm', 0.6, 0.2, 0.0),
         ('remdm-cap', 0.3, 0.1, 0.05),     # sigma = eta < sigma_max
         ('remdm-cap', 0.3, 0.1, 0.5),      # sigma = sigma_max (cap binds)
         ('remdm-cap', 1.0, 0.25, 0.5),     # alpha_t = 0: sigma = eta
         ('remdm-rescale', 0.3, 0.1, 0.5),  # sigma = eta sigma_max
         ('remdm-conf', 0.3, 0.1, 0.0)]
laws = []
for sampler, t, dt, eta in CASES:
  conf = torch.from_numpy(conf_np) if sampler == 'remdm-conf' else None
  laws.append(step_law(make(sampler, eta=eta), x_t, t, dt, conf))

# -- B. whole `_sample` runs: the grid, the loop's branches, the states --------------
K = 16


def trajectory(d, eps, seed):
  """Runs the reference's `_sample(K, eps)`; per step: x_t, t, dt, law."""
  rec = {'x': [], 't': [], 'dt': [], 'law': []}

  def update(x, t, dt, p_x0=None, conf=None):
    rec['x'].append(x.numpy().copy())
    rec['t'].append(t[0, 0].item())
    rec['dt'].append(float(dt))
    rec['law'].append(step_law(d, x, t[0, 0].item(), dt, conf))
    return _STEP(d, x, t, dt, p_x0=p_x0, conf=conf)

  d._ddpm_caching_update = update
  torch.manual_seed(seed)
  out = diffusion.Diffusion._sample(d, num_steps=K, eps=eps)
  return ({k: np.asarray(v) for k, v in rec.items()}, out.numpy())


LOOP = dict(eta=0.1, t_on=0.5, t_off=0.125, alpha_on=0.9)   # on the grid
PAPER = dict(eta=0.1, t_on=0.55, t_off=0.05, alpha_on=0.9)  # scripts/remdm-loop.sh
mdlm_run, _ = trajectory(make('mdlm'), 0.0, 1)
loop_run, _ = trajectory(make('remdm-loop', **LOOP), 0.0, 2)
paper_run, _ = trajectory(make('remdm-loop', **PAPER), 0.0, 3)
default_run, _ = trajectory(make('mdlm'), 1e-5, 4)        # main.py's eps

arrays = {
    'logits': logits, 'x_t': x_t.numpy(), 'conf': conf_np,
    'case_sampler': np.asarray([c[0] for c in CASES]),
    'case_t': np.asarray([c[1] for c in CASES]),
    'case_dt': np.asarray([c[2] for c in CASES]),
    'case_eta': np.asarray([c[3] for c in CASES]),
    'case_law': np.stack(laws).astype(np.float32),
    'loop_params': np.asarray([LOOP[k] for k in ('eta', 't_on', 't_off',
                                                 'alpha_on')]),
    'paper_params': np.asarray([PAPER[k] for k in ('eta', 't_on', 't_off',
                                                   'alpha_on')]),
    'default_t': default_run['t'], 'default_dt': default_run['dt'],
}
for name, run in (('mdlm', mdlm_run), ('loop', loop_run),
                  ('paper', paper_run)):
  arrays[f'{name}_x'] = run['x'].astype(np.int8)
  arrays[f'{name}_t'] = run['t']
  arrays[f'{name}_dt'] = run['dt']
  arrays[f'{name}_law'] = run['law'].astype(np.float32)

_common.write(
    'dlm', arrays, args=args, repo='kuleshov-group/remdm',
    files=['diffusion.py', 'noise_schedule.py'],
    what=('Diffusion._ddpm_caching_update (diffusion.py:658-793): the exact '
          'per-position law of x_s given x_t and fixed SUBS logits, for '
          "'mdlm', 'remdm-cap', 'remdm-rescale', 'remdm-conf' at given "
          "(t, dt) (case_*), and per step of Diffusion._sample "
          "(diffusion.py:847-893) for 'mdlm' and 'remdm-loop' with K = 16 "
          '(*_x: the state fed to each step, *_t, *_dt, *_law); default_t: '
          "the grid of _sample at main.py's eps = 1e-5."),
    packages=('numpy', 'torch'),
    notes=('The law is read off the reference by re-running each step with '
           '_sample_categorical patched to return each category k; the '
           'backbone is a stub returning `logits` (MASK column = index V, '
           'removed by the reference SUBS parameterisation). conf is passed '
           'in float32 (_sample keeps it in bfloat16, diffusion.py:864). '
           'Trajectories use eps = 0 so the grid is t_k = 1 - k/K; the states '
           "come from the reference's own draws (torch.manual_seed)."))
