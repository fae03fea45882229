"""OFTSR against yuanzhi-zhu/OFTSR (003b6f4; distill_fm.py at 81730f3).

The reference (generate/oftsr.py) runs its own one-step sample
(`FM.image_restoration_t_`, fm/flow_matching.py:232-244, and the
one_step_sampler, fm/sampling.py:41-63), teacher loss (`FM.train_step`,
flow_matching.py:100-164 with `get_flow_loss_fn`, fm/losses.py:98-155),
Euler and generic-RK2 samplers (fm/sampling.py:65-195) and SR operators
(fm/measurements.py:69-113) with a network stub that returns fixed arrays
in call order and records its inputs. Ours gets the same arrays from a
stub velocity: `oftsr.one_step`, `teacher_loss`, `euler_sample`,
`rk2_velocity` (the teacher solver of the distillation), `avg_pool` /
`upsample`, `bicubic_down` / `bicubic_up`.

Student losses: the release's `distill_fm.py` (commit 81730f3, not an
ancestor of 003b6f4) computes them inline in its training loop
(distill_fm.py:383-456 at 81730f3: t, s at 385-386, the RK2 teacher with
t_2 = r s + (1 - r) t at 396-409, 'v_boot' with (s - t)/s at 422-423,
boundary at 435-438, alignment at 446-448, the weighted total at 453); the
generator executes those statements with fixed linear stand-in networks
(v = A z + tau B z + tau^2 c on z = concat(x, y)). Ours, `distill_losses`
and `student_loss` with the same weights through `bind` (the student called
on 3B rows, the teacher on 2B then B), on the reference's draws of t and s:
the times and inputs every network call sees, the three losses, the total,
and its gradient in the student's weights (which the stop-gradients decide).

Deliberate: the Euler sampler's step (ours (T - eps)/N, theirs 1/N on a
grid spaced (T - eps)/N). Not compared (stochastic, documented in
`oftsr.distill_losses`): the release's teacher is a deep copy of the
student net never put in eval mode (distill_fm.py:241; only the student's
mode is set, 259), so its dropout is on; ours calls the teacher without
dropout.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from iclrjax.diffusion import oftsr
from tests.parity import common

PAPER = ('OFTSR: One-Step Flow for Image Super-Resolution with Tunable '
         'Fidelity-Realism Trade-offs (arXiv 2412.09465)')
FIXTURE = 'oftsr'

# float32 on both sides: O(1) images through a few multiply-adds (ulp 1.2e-7
# at 1, values up to ~4); the times t * 999: float32 numbers up to 999
# (ulp 6e-5), a few roundings apart.
TOL = 2e-6
TOL_TIME = 2e-4
# Student losses: mean squares of O(0.1-1) velocity gaps, compared relative
# to their value (float32 sums of a few hundred terms); the gradient of the
# total (|g| up to ~0.07) as max |diff| relative to max |g|.
TOL_LOSS = 1e-5
TOL_GRAD = 1e-5
C = 3


def _nhwc(x):
  return np.moveaxis(np.asarray(x), -3, -1)


class _Stub:
  """velocity(x, t): the next fixed output (the reference's first C
  channels, NHWC); records (x, t)."""

  def __init__(self, outs):
    self.outs = [jnp.asarray(_nhwc(o[:, :C])) for o in outs]
    self.calls = []

  def __call__(self, x, t):
    self.calls.append((x, t))
    return self.outs[len(self.calls) - 1]

  def times(self):
    return oftsr.TIME_SCALE * jnp.stack([jnp.broadcast_to(t, x.shape[:1])
                                         for x, t in self.calls])


class _GridStub(_Stub):
  """The same under `lax.scan` (traced t): call k of an N-step sampler on
  the grid t_k = eps + k (T - eps)/N gets output k; the times are recorded
  by a callback (`times` after the program has run)."""

  def __init__(self, outs):
    super().__init__(outs)
    self.times_ = []

  def times(self):
    jax.effects_barrier()
    return oftsr.TIME_SCALE * np.stack(self.times_)

  def __call__(self, x, t):
    jax.debug.callback(lambda t: self.times_.append(np.asarray(t)), t,
                       ordered=True)
    n = len(self.outs)
    k = jnp.round((t[0] - oftsr.EPS_T) * n / (oftsr.T_END - oftsr.EPS_T))
    return jnp.stack(self.outs)[jnp.clip(k.astype(jnp.int32), 0, n - 1)]


class _Linear:
  """The generator's stand-in network as a `bind`-able net: v = A z + tau
  B z + tau^2 c, z = concat(x, y) flattened in NCHW order, tau = t * 999 /
  999. `calls` records (x, t * 999) of every call (at trace time)."""

  def __init__(self):
    self.calls = []

  def apply(self, p, x, y, t):
    self.calls.append((x, oftsr.TIME_SCALE * t))
    b, h, w, _ = x.shape
    z = jnp.moveaxis(jnp.concatenate([x, y], axis=-1), -1, 1).reshape(b, -1)
    tau = (oftsr.TIME_SCALE * t / 999.0)[:, None]
    v = z @ p['A'].T + tau * (z @ p['B'].T) + tau ** 2 * p['c']
    return jnp.moveaxis(v.reshape(b, C, h, w), 1, -1)


def _params(flat, d_out):
  d_in = 2 * d_out
  n = d_out * d_in
  return {'A': flat[:n].reshape(d_out, d_in),
          'B': flat[n:2 * n].reshape(d_out, d_in), 'c': flat[2 * n:]}


def _distill(a, k):
  """`distill_losses` + `student_loss` on case k of the fixture, with the
  gradient of the total in the student's weights."""
  x0, y = _nhwc(a[f'distill{k}_x0']), _nhwc(a[f'distill{k}_cond'])
  d_out = int(np.prod(x0.shape[1:]))
  t_min, _, _, r, *lams = (float(v) for v in a[f'distill{k}_cfg'])
  ps = _params(a[f'distill{k}_student_p'], d_out)
  pt = _params(a[f'distill{k}_teacher_p'], d_out)
  student, teacher = _Linear(), _Linear()

  def loss(p):
    parts = oftsr.distill_losses(
        oftsr.bind(student, p, y), oftsr.bind(teacher, pt, y), x0,
        jnp.asarray(a[f'distill{k}_t']), jnp.asarray(a[f'distill{k}_s']),
        t_min, r)
    # The recorded calls leave the transformation as outputs.
    return (oftsr.student_loss(parts, *lams),
            (parts, list(student.calls), list(teacher.calls)))

  (total, (parts, s_calls, t_calls)), g = jax.value_and_grad(
      loss, has_aux=True)(ps)
  losses = jnp.stack([parts['distill'], parts['boundary'], parts['align'],
                      total])
  grad = jnp.concatenate([g[n].ravel() for n in ('A', 'B', 'c')])
  b = x0.shape[0]
  (_, ts), = s_calls                   # one call: rows (t, s, t_min)
  (x_a, t_a), (x_mid, t_mid) = t_calls   # (x_t, x_0), then x_2
  # In the reference's call order: (x_t, t), (x_2, t_2), (x_0, t_min).
  t_x = jnp.stack([x_a[:b], x_mid, x_a[b:]])
  t_t = jnp.stack([t_a[:b], t_mid, t_a[b:]])
  return losses, grad, ts.reshape(3, b), t_t, t_x


def _ours(a):
  """Everything ours computes, traced once into one program (the stubs
  count calls at trace time; `_GridStub` serves the scanned samplers)."""
  x0, x1 = _nhwc(a['x0']), _nhwc(a['x1'])
  r, rec = {}, {}
  # One-step sample at the knob t.
  samples, times = [], []
  for i, t in enumerate(a['one_step_t']):
    v = _Stub(a['one_step_out'][i:i + 1])
    samples.append(oftsr.one_step(v, x0, float(t)))
    times.append(v.times())
  r['one_step'] = (jnp.stack(samples), jnp.stack(times))
  rec['euler1'] = _GridStub(a['one_step_out'][-1:])
  r['euler1'] = oftsr.euler_sample(rec['euler1'], x0, 1)
  # Teacher loss on the reference's t and perturbed source.
  v = _Stub(a['teacher_out'])
  loss = oftsr.teacher_loss(v, _nhwc(a['teacher_x0']), x1,
                            jnp.asarray(a['teacher_t']))
  r['teacher'] = (loss, v.calls[0][0], v.times())
  # Euler, N = 4.
  rec['euler'] = _GridStub(a['euler_out'])
  r['euler'] = oftsr.euler_sample(rec['euler'], x0, a['euler_out'].shape[0])
  # One RK2 step of the teacher (r = 1/2, 2/3, 1) from the reference's
  # states x_h[i], on its grid t_i = eps + i (T - eps) / N.
  for name, rk_r in (('midpoint', 0.5), ('ralston', 2 / 3), ('heun', 1.0)):
    outs, xs = a[f'rk2_{name}_out'], a[f'rk2_{name}_x']
    n = xs.shape[0] - 2
    grid = oftsr.EPS_T + np.arange(n + 1) * (oftsr.T_END - oftsr.EPS_T) / n
    steps, mids, ts = [], [], []
    for i in range(n - 1):               # the last step is Euler there
      v = _Stub(outs[2 * i:2 * i + 2])
      x_t = jnp.asarray(_nhwc(xs[i]))
      t = jnp.full((x0.shape[0],), grid[i], jnp.float32)
      s = jnp.full((x0.shape[0],), grid[i + 1], jnp.float32)
      vt = oftsr.rk2_velocity(v, x_t, t, s, rk_r)
      steps.append(x_t + (grid[i + 1] - grid[i]) * vt)
      mids.append(v.calls[1][0])
      ts.append(v.times())
    r[name] = (jnp.stack(steps), jnp.stack(mids), jnp.stack(ts))
  # Operators (x4).
  hr = _nhwc(a['op_hr'])
  r['avp'] = (oftsr.avg_pool(hr, 4),
              oftsr.upsample(_nhwc(a['op_sr_avp_down']), 4))
  r['bicubic'] = (oftsr.bicubic_down(hr, 4),
                  oftsr.bicubic_up(_nhwc(a['op_sr_interp_down']), 4))
  r['distill'] = [_distill(a, k) for k in range(_N_DISTILL)]
  return r, rec


_N_DISTILL = 2   # fixture cases: the released config (r = 1/2), and Heun
                 # (r = 1) with s clamped at t_max and other weights


@functools.lru_cache(maxsize=None)
def _results():
  a, _ = common.load(FIXTURE)
  rec = {}

  def run():
    r, rec_ = _ours(a)
    rec.update(rec_)
    return r

  r = jax.tree.map(np.asarray, jax.jit(run)())
  r['euler1'] = (r['euler1'], rec['euler1'].times())
  r['euler'] = (r['euler'], rec['euler'].times())
  return a, r


def checks() -> list[common.Check]:
  a, r = _results()
  out = []
  samples, times = r['one_step']
  out.append(common.check(
      'one-step sample x_0 + (T - eps) v(x_0, t), t in {1e-3, 0.5, 0.99} '
      '(FM.image_restoration_t_)', samples, _nhwc(a['one_step_sample']), TOL))
  out.append(common.check(
      'one-step: time the network sees (t * 999)', times,
      np.stack([a[f'one_step_net_t_{i}'] for i in range(len(times))]),
      TOL_TIME))
  x, t = r['euler1']
  out.append(common.check(
      "teacher one-step jump = euler_sample(N=1) (sampling.py "
      'one_step_sampler, t = eps)', x, _nhwc(a['one_step_sampler']), TOL))
  out.append(common.check('one_step_sampler: time seen', t,
                          a['one_step_sampler_net_t'], TOL_TIME))
  loss, x_t, t = r['teacher']
  out.append(common.Check(
      'teacher l1 flow-matching loss (FM.train_step), relative',
      abs(loss - float(a['teacher_loss'])) / abs(float(a['teacher_loss'])),
      TOL))
  out.append(common.check('teacher: x_t = t x_1 + (1 - t) x_0 fed to the net',
                          x_t, _nhwc(a['teacher_net_x'][0][:, :C]), TOL))
  out.append(common.check('teacher: time seen', t, a['teacher_net_t'],
                          TOL_TIME))
  out.append(common.check('Euler sampler: times seen (eps + k (T - eps)/N)',
                          r['euler'][1], a['euler_net_t'], TOL_TIME))
  for name in ('midpoint', 'ralston', 'heun'):
    steps, mids, ts = r[name]
    n = steps.shape[0]
    out.append(common.check(
        f'RK2 ({name}) teacher step x_t + (s - t) v_T (rk2_sampler)',
        steps, _nhwc(a[f'rk2_{name}_x'][1:n + 1]), TOL))
    out.append(common.check(
        f'RK2 ({name}): intermediate state x_t + r (s - t) v1',
        mids, _nhwc(a[f'rk2_{name}_net_x'][1:2 * n:2][:, :, :C]), TOL))
    out.append(common.check(
        f'RK2 ({name}): times seen (t, t + r (s - t))',
        ts, a[f'rk2_{name}_net_t'][:2 * n].reshape(n, 2, -1), TOL_TIME))
  down, up = r['avp']
  out.append(common.check("'sr_avp' forward (AdaptiveAvgPool2d) x4", down,
                          _nhwc(a['op_sr_avp_down']), TOL))
  out.append(common.check("'sr_avp' transpose (MeanUpsample) x4", up,
                          _nhwc(a['op_sr_avp_up']), TOL))
  down, up = r['bicubic']
  out.append(common.check(
      "'sr_interp' forward: bicubic antialias down x4 (F.interpolate)", down,
      _nhwc(a['op_sr_interp_down']), TOL))
  out.append(common.check(
      "'sr_interp' transpose: bicubic antialias up x4", up,
      _nhwc(a['op_sr_interp_up']), TOL))
  for k, (losses, grad, s_t, t_t, t_x) in enumerate(r['distill']):
    case = ('student step (' + ('config, r = 1/2' if k == 0 else
                                'Heun r = 1, s clamped') + '; distill_fm.py)')
    theirs = a[f'distill{k}_losses']
    for i, name in enumerate((
        "L_distill 'v_boot': target v(x_0, t) + ((s - t)/s)(v_T - v(x_0, t))",
        'L_BC boundary at t_min', 'L_align (1 - t)^2-weighted',
        'total lambda-weighted loss')):
      out.append(common.Check(f'{case}: {name}, relative',
                              abs(float(losses[i]) - float(theirs[i]))
                              / abs(float(theirs[i])), TOL_LOSS))
    g = a[f'distill{k}_grad']
    out.append(common.Check(
        f'{case}: gradient of the total in the student weights (stop-'
        'gradients), relative to max |g|',
        common.max_diff(grad, g) / float(np.abs(g).max()), TOL_GRAD))
    out.append(common.check(f'{case}: student times seen (t, s, t_min) * 999',
                            s_t, a[f'distill{k}_student_net_t'], TOL_TIME))
    out.append(common.check(
        f'{case}: teacher times seen (t, t_2 = r s + (1 - r) t, t_min) * 999',
        t_t, a[f'distill{k}_teacher_net_t'], TOL_TIME))
    out.append(common.check(
        f'{case}: teacher inputs x_t = x_0 + t SG[v(x_0, t)], '
        'x_2 = x_t + r (s - t) v_1, x_0', t_x,
        _nhwc(a[f'distill{k}_teacher_net_x']), TOL))
  out.extend(deliberate_checks())
  return out


def deliberate_checks() -> list[common.Check]:
  """The Euler step: theirs moves x by v / N per step (dt = 1/N,
  fm/sampling.py:80) on the grid t_k = eps + k (T - eps)/N; ours by
  v (T - eps)/N, so x_N - x_0 is (T - eps) times theirs."""
  a, r = _results()
  x0 = _nhwc(a['x0'])
  theirs = _nhwc(a['euler_x'][-1])
  return [common.check(
      'deliberate: Euler step (T - eps)/N, reference 1/N: ours - x_0 = '
      '(T - eps) (reference - x_0)', r['euler'][0] - x0,
      (oftsr.T_END - oftsr.EPS_T) * (theirs - x0), TOL)]


def test_matches_reference():
  common.assert_checks(checks())


def test_deliberate_euler_step():
  common.assert_checks(deliberate_checks())
  a, r = _results()
  # ... and the difference is there (eps / N of the summed velocities).
  assert common.max_diff(r['euler'][0], _nhwc(a['euler_x'][-1])) > 1e-4
