"""Fixture for OFTSR (yuanzhi-zhu/OFTSR): one-step sample, teacher loss,
teacher ODE solvers and the SR operators, on a stub network.

The network is a stub that returns fixed arrays (one per call, in call
order) and records what it is handed (concat(x, cond) and t * 999), so the
reference computes only its own loss / sampler arithmetic:

  one step   FM.image_restoration_t_ (fm/flow_matching.py:232-244) at the
             knob t, and the one_step_sampler of fm/sampling.py:41-63;
  teacher    FM.train_step (flow_matching.py:100-164: gaussian_VP
             perturbation, uniform t, x_t, l1 `get_flow_loss_fn`);
  solvers    euler_sampler and rk2_sampler (midpoint / Ralston / Heun) of
             fm/sampling.py:65-195, with their intermediate states;
  operators  'sr_avp' and 'sr_interp' (bicubic) forward / transpose of
             fm/measurements.py.

The student's distillation losses (a `distill_fm.py` the paper describes)
are not in the released repository, so they have no fixture.

  python tests/parity/generate/oftsr.py --ref CHECKOUT_OF_yuanzhi-zhu/OFTSR
"""

from __future__ import annotations

import types

import numpy as np

import _common

args = _common.cli(__doc__)
_common.add_path(args.ref)

import torch  # noqa: E402


_stub = _common.stub


def _unused(*a, **k):
  raise RuntimeError('stubbed: not used by the compared functions')


# Imports of fm/ that the compared functions do not use (plotting, image
# I/O, LPIPS, the Real-ESRGAN pipeline).
_stub('matplotlib')
_stub('matplotlib.pyplot')
_stub('cv2')
_stub('yaml')
_stub('lpips')
_tv = _stub('torchvision', torch=torch)   # measurements.py: torchvision.torch
_tv.utils = _stub('torchvision.utils', save_image=_unused, make_grid=_unused)
_stub('fm.realsrDataPipeline', RealSRDataPipeline=_unused)

from fm import flow_matching  # noqa: E402  (the reference's modules)
from fm import losses  # noqa: E402
from fm import measurements  # noqa: E402
from fm import sampling  # noqa: E402

B, C, H, W = 2, 3, 4, 4
SIGMA_P = 0.1          # ir.sigma_pertubation (FFHQ noiseless)
rng = np.random.default_rng(2412)


def _ns(**kw):
  return types.SimpleNamespace(**kw)


class StubNet:
  """model(x, t, label, augment_labels) -> the next fixed output; records
  its inputs. Outputs have C + 1 channels (the wrapper keeps [:, :3])."""

  def __init__(self, outs):
    self.outs, self.calls = list(outs), []

  def __call__(self, x, t, label=None, augment_labels=None):
    self.calls.append((x.numpy().copy(), t.numpy().copy()))
    return torch.from_numpy(self.outs[len(self.calls) - 1])


def outputs(n):
  return rng.normal(0.0, 1.0, (n, B, C + 1, H, W)).astype(np.float32)


def make_fm(model, sample_n=4, rk2_r=1.0):
  """The minimal FM object (flow_matching.py:23) the compared methods read."""
  fm = object.__new__(flow_matching.FM)
  fm.cfg = _ns(train=_ns(use_amp=False, weight_schedule='uniform'),
               sample=_ns(noise_var=0.0, rho=1.0, rk2_r=rk2_r))
  fm.flow_config = _ns(use_cond=True)
  fm.model = model
  fm.device = 'cpu'
  fm.eps = 1e-3
  fm._T = 1.0
  fm.sample_N = sample_n
  fm.psnr_batch_size = B
  fm.flow_t_schedule = 'uniform'
  fm.amp_dtype = torch.float32
  fm.loss_fn = losses.get_flow_loss_fn(reduce_mean=True, loss_type='l1')
  fm.noiser_pertub = measurements.get_noise(name='gaussian_VP', sigma=SIGMA_P)
  return fm


def calls_of(net):
  return (np.stack([c[0] for c in net.calls]),
          np.stack([c[1] for c in net.calls]))


arrays = {}
x0 = rng.normal(0.0, 1.0, (B, C, H, W)).astype(np.float32)
cond = rng.normal(0.0, 1.0, (B, C, H, W)).astype(np.float32)
x1 = rng.uniform(-1.0, 1.0, (B, C, H, W)).astype(np.float32)
arrays.update(x0=x0, cond=cond, x1=x1)

# -- one-step sample at the knob t -------------------------------------------------
KNOBS = np.asarray([1e-3, 0.5, 0.99])
out = outputs(len(KNOBS) + 1)
arrays['one_step_out'] = out
samples = []
for i, t in enumerate(KNOBS):
  fm = make_fm(StubNet(out[i:i + 1]))
  samples.append(flow_matching.FM.image_restoration_t_(
      fm, torch.from_numpy(x0), torch.from_numpy(cond), float(t)).numpy())
  xin, tin = calls_of(fm.model)
  arrays[f'one_step_net_x_{i}'], arrays[f'one_step_net_t_{i}'] = xin, tin
arrays['one_step_t'] = KNOBS
arrays['one_step_sample'] = np.stack(samples)
# The teacher's one-step jump (t = eps), fm/sampling.py one_step_sampler.
fm = make_fm(StubNet(out[-1:]))
fm.cond = torch.from_numpy(cond)
x, nfe = sampling.get_flow_sampler(fm, 'one_step', device='cpu')(
    fm.model, torch.from_numpy(x0))
arrays['one_step_sampler'] = x.numpy()
arrays['one_step_sampler_net_t'] = calls_of(fm.model)[1]

# -- teacher loss (l1 flow matching on the perturbed source) ----------------------
out = outputs(1)
fm = make_fm(StubNet(out))
torch.manual_seed(7)
loss = flow_matching.FM.train_step(
    fm, {'gt': torch.from_numpy(x1), 'lq': torch.from_numpy(cond)})
xin, tin = calls_of(fm.model)
arrays.update(teacher_out=out, teacher_loss=np.float64(loss.item()),
              teacher_t=fm.t.numpy(), teacher_x0=fm.x0.numpy(),
              teacher_net_x=xin, teacher_net_t=tin)

# -- teacher ODE solvers -----------------------------------------------------------
N_EULER = 4
out = outputs(N_EULER)
fm = make_fm(StubNet(out), sample_n=N_EULER)
fm.cond = torch.from_numpy(cond)
x, nfe, (x_h, t_h) = sampling.get_flow_sampler(fm, 'euler', device='cpu')(
    fm.model, torch.from_numpy(x0), return_xh=True)
arrays.update(euler_out=out, euler_x=torch.stack(x_h).numpy(),
              euler_net_t=calls_of(fm.model)[1],
              euler_net_x=calls_of(fm.model)[0])

N_RK2 = 3
for name in ('midpoint', 'ralston', 'heun'):
  out = outputs(2 * N_RK2)
  fm = make_fm(StubNet(out), sample_n=N_RK2)
  fm.cond = torch.from_numpy(cond)
  x, nfe, x_h = sampling.get_flow_sampler(fm, name, device='cpu')(
      fm.model, torch.from_numpy(x0), return_xh=True)
  xin, tin = calls_of(fm.model)
  arrays.update({f'rk2_{name}_out': out,
                 f'rk2_{name}_x': torch.stack(x_h).numpy(),
                 f'rk2_{name}_net_x': xin, f'rk2_{name}_net_t': tin})

# -- SR operators (x4 on 16 x 16) --------------------------------------------------
hr = rng.uniform(-1.0, 1.0, (B, C, 16, 16)).astype(np.float32)
arrays['op_hr'] = hr
for name, kw in (('sr_avp', {}), ('sr_interp', {'mode': 'bicubic'})):
  op = measurements.get_operator(name=name, scale_factor=4, device='cpu', **kw)
  down = op.forward(torch.from_numpy(hr))
  arrays[f'op_{name}_down'] = down.numpy()
  arrays[f'op_{name}_up'] = op.transpose(down).numpy()

_common.write(
    'oftsr', arrays, args=args, repo='yuanzhi-zhu/OFTSR',
    files=['fm/flow_matching.py', 'fm/sampling.py', 'fm/losses.py',
           'fm/measurements.py'],
    what=('Stub network returning fixed arrays (*_out, call order; C + 1 '
          'channels, the reference keeps [:, :3]) and recording its inputs '
          '(*_net_x = concat(x, cond), *_net_t = t * 999). one_step_*: '
          'FM.image_restoration_t_ at one_step_t and one_step_sampler; '
          'teacher_*: FM.train_step (t, perturbed x0, l1 loss); euler_*, '
          'rk2_{midpoint,ralston,heun}_*: the samplers of fm/sampling.py '
          'with their states x_h; op_*: sr_avp / sr_interp (bicubic) '
          'forward and transpose at x4. Arrays are NCHW.'),
    packages=('numpy', 'torch'),
    notes=('The distillation losses (student) are not in the released '
           'repository (no distill_fm.py at this commit), so only the '
           'teacher, the samplers and the operators are compared. Stubbed '
           'imports: matplotlib, cv2, yaml, lpips, torchvision, '
           'fm.realsrDataPipeline.'))
