"""Fixture for OFTSR (yuanzhi-zhu/OFTSR): one-step sample, teacher loss,
teacher ODE solvers, the SR operators (stub network) and the student's
distillation losses (fixed linear stand-in networks).

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

Student losses (distill_*): the release's `distill_fm.py` is at commit
81730f3fc067e4a47e750d74b2c97137b19b3f64 only (not an ancestor of the
003b6f4 checkout the rest is run from; its fm/ and models/ are unchanged
there): put that file into the checkout (at its path, distill_fm.py) before
running this script. Its losses are inline in `main()` (the training loop,
distill_fm.py:383-456 at 81730f3), beside DDP, data loading and logging;
this script parses the file and executes those statements of the loop body
as they are (from `x_0 = yn.to(device)` to the backward pass) with the
names they read bound to small objects: the noised source `yn`, the HR
batch (its shape), `boot_config` / `train_config`, and an `FM` whose
student and teacher are fixed linear maps of concat(x, cond) with a
quadratic time term, written in torch. It records the times t, s they draw,
every network call (input, t * 999), the three losses and the total, and
the gradient of the total in the student's weights.

  python tests/parity/generate/oftsr.py --ref CHECKOUT_OF_yuanzhi-zhu/OFTSR
"""

from __future__ import annotations

import ast
import types

import numpy as np

import _common

args = _common.cli(__doc__)
_common.add_path(args.ref)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


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

# -- student distillation losses (distill_fm.py at 81730f3) -------------------
DISTILL = args.ref / 'distill_fm.py'
if not DISTILL.is_file():
  raise SystemExit(
      f'{DISTILL} is missing: it is in yuanzhi-zhu/OFTSR at commit '
      '81730f3fc067e4a47e750d74b2c97137b19b3f64 only; add it to the checkout')


def _train_step_body():
  """The statements of distill_fm.py's generator step that compute the
  losses (from `x_0 = yn.to(device)` through the backward pass and the
  loss log), compiled from the file itself (tracebacks keep its lines)."""
  src = DISTILL.read_text()
  tree = ast.parse(src, str(DISTILL))
  main = next(n for n in tree.body
              if isinstance(n, ast.FunctionDef) and n.name == 'main')
  inner = next(n for n in ast.walk(main) if isinstance(n, ast.For)
               and 'accumulation_steps' in ast.get_source_segment(src, n.iter))
  start = next(i for i, n in enumerate(inner.body)
               if isinstance(n, ast.Assign)
               and getattr(n.targets[0], 'id', None) == 'x_0')
  body = inner.body[start:]
  lines = (body[0].lineno, body[-1].end_lineno)
  mod = ast.Module(body=body, type_ignores=[])
  return compile(mod, str(DISTILL), 'exec'), lines


class LinearNet:
  """v = A z + tau B z + tau^2 c, z = concat(x, cond) flattened (NCHW),
  tau = (t * 999) / 999; called as model(x, t * 999, label, augment_labels)
  by FM.model_forward_wrapper. Records (input, t * 999) of every call."""

  def __init__(self, a, b, c, grad):
    self.p = {k: torch.tensor(v, requires_grad=grad)
              for k, v in (('A', a), ('B', b), ('c', c))}
    self.calls = []

  def __call__(self, x, t999, label=None, augment_labels=None):
    self.calls.append((x.detach().numpy().copy(),
                       t999.detach().numpy().copy()))
    z = x.reshape(x.shape[0], -1)
    tau = (t999 / 999.0)[:, None]
    out = (z @ self.p['A'].T + tau * (z @ self.p['B'].T)
           + tau ** 2 * self.p['c'])
    return out.reshape(x.shape[0], C, *x.shape[2:])


BODY, BODY_LINES = _train_step_body()
DB, DH, DW = 8, 2, 2          # batch and image size of the distillation
D_OUT = C * DH * DW
D_IN = 2 * D_OUT
rng_d = np.random.default_rng(81730)   # its own stream: the arrays above stay
# (t_min, t_max, t_step, rk2_r, (lambda_distil, lambda_boundary,
#  lambda_align), torch seed)
CASES = (
    (0.01, 0.99, 0.05, 0.5, (1.0, 0.1, 0.01), 0),      # configs/dis_fm_*.yml
    (0.05, 0.9, 0.3, 1.0, (0.7, 0.3, 0.2), 3),         # Heun; s clamps
)
for k, (t_lo, t_hi, t_step, rk2_r, lams, seed) in enumerate(CASES):
  scale = 1.0 / np.sqrt(D_IN)
  ps = [rng_d.normal(0.0, scale, (D_OUT, D_IN)).astype(np.float32),
        rng_d.normal(0.0, scale, (D_OUT, D_IN)).astype(np.float32),
        rng_d.normal(0.0, 0.5, (D_OUT,)).astype(np.float32)]
  pt = [p + rng_d.normal(0.0, 0.3 * p.std(), p.shape).astype(np.float32)
        for p in ps]
  yn = rng_d.normal(0.0, 1.0, (DB, C, DH, DW)).astype(np.float32)
  cond_d = rng_d.normal(0.0, 1.0, (DB, C, DH, DW)).astype(np.float32)
  hr = rng_d.uniform(-1.0, 1.0, (DB, C, DH, DW)).astype(np.float32)
  student, teacher = LinearNet(*ps, grad=True), LinearNet(*pt, grad=False)
  flow = object.__new__(flow_matching.FM)      # flow_matching.py:23
  flow.flow_config = _ns(use_cond=True)
  flow.cond = torch.from_numpy(cond_d)
  flow.model, flow.teacher = student, teacher
  flow.eps, flow._T = 1e-3, 1.0
  flow.amp_scaler = _ns(scale=lambda loss: loss)   # use_amp False: identity
  boot = _ns(t_min=t_lo, t_max=t_hi, t_step=t_step, teacher_solver='rk2',
             rk2_r=rk2_r, distil_loss='v_boot', lambda_distil=lams[0],
             lambda_boundary=lams[1], lambda_align=lams[2])
  ns = dict(torch=torch, F=F, flow=flow, boot_config=boot,
            train_config=_ns(accumulation_steps=1), device='cpu',
            yn=torch.from_numpy(yn), batch=torch.from_numpy(hr),
            loss_dict={'loss_generator': 0.0, 'loss_boot': 0.0,
                       'loss_boundary': 0.0, 'loss_align': 0.0})
  torch.manual_seed(seed)
  exec(BODY, ns)  # noqa: S102  (the release's own statements)
  t, s = ns['t'].numpy(), ns['s'].numpy()
  if k == 1:
    assert (s == np.float32(t_hi)).any() and (s < t_hi).any(), s
  _, st = calls_of(student)
  tx, tt = calls_of(teacher)
  arrays.update({
      f'distill{k}_student_p': np.concatenate([p.ravel() for p in ps]),
      f'distill{k}_teacher_p': np.concatenate([p.ravel() for p in pt]),
      f'distill{k}_x0': yn, f'distill{k}_cond': cond_d,
      f'distill{k}_cfg': np.asarray([t_lo, t_hi, t_step, rk2_r, *lams]),
      f'distill{k}_t': t, f'distill{k}_s': s,
      f'distill{k}_losses': np.asarray(
          [ns['loss_distil'].item(), ns['loss_boundary'].item(),
           ns['loss_v_align'].item(), ns['loss'].item()]),
      f'distill{k}_grad': np.concatenate(
          [student.p[n].grad.numpy().ravel() for n in ('A', 'B', 'c')]),
      f'distill{k}_student_net_t': st, f'distill{k}_teacher_net_t': tt,
      f'distill{k}_teacher_net_x': tx[:, :, :C]})

_common.write(
    'oftsr', arrays, args=args, repo='yuanzhi-zhu/OFTSR',
    files=['fm/flow_matching.py', 'fm/sampling.py', 'fm/losses.py',
           'fm/measurements.py',
           'distill_fm.py (at 81730f3fc067e4a47e750d74b2c97137b19b3f64, '
           f'lines {BODY_LINES[0]}-{BODY_LINES[1]})'],
    what=('Stub network returning fixed arrays (*_out, call order; C + 1 '
          'channels, the reference keeps [:, :3]) and recording its inputs '
          '(*_net_x = concat(x, cond), *_net_t = t * 999). one_step_*: '
          'FM.image_restoration_t_ at one_step_t and one_step_sampler; '
          'teacher_*: FM.train_step (t, perturbed x0, l1 loss); euler_*, '
          'rk2_{midpoint,ralston,heun}_*: the samplers of fm/sampling.py '
          'with their states x_h; op_*: sr_avp / sr_interp (bicubic) '
          'forward and transpose at x4. distill{0,1}_*: the student step '
          'of distill_fm.py (v_boot, RK2 teacher, boundary, alignment) '
          'with linear stand-in networks v = A z + tau B z + tau^2 c '
          '(z = concat(x, cond) flattened NCHW, tau = t * 999 / 999; '
          '*_student_p / *_teacher_p = A, B, c raveled); cfg = (t_min, '
          't_max, t_step, rk2_r, lambda_distil, lambda_boundary, '
          'lambda_align); losses = (distil, boundary, align, total); grad '
          '= d total / d (A, B, c) of the student; *_net_t / *_net_x: the '
          'calls in order (student: t, s, t_min; teacher: (x_t, t), '
          '(x_2, t_2), (x_0, t_min)). Arrays are NCHW.'),
    packages=('numpy', 'torch'),
    notes=('The commit field is the checkout the fm/ modules were run '
           'from; distill_fm.py is the file of commit 81730f3 (not an '
           'ancestor of 003b6f4) added to it. Its loss statements are '
           'executed from the file (parsed, not copied). Stubbed imports: '
           'matplotlib, cv2, yaml, lpips, torchvision, '
           'fm.realsrDataPipeline.'))
