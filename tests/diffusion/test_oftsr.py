"""OFTSR: degradation, losses vs numpy, RK2, samplers, training, claims."""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from configs import oftsr as oftsr_config
from experiments import oftsr as oftsr_exp
from iclrjax.diffusion import flow
from iclrjax.diffusion import oftsr
from tests.conftest import find_claim as _claim

RNG = np.random.default_rng(0)


# -- degradation ---------------------------------------------------------------------
def test_avg_pool_and_upsample_match_numpy():
  x = RNG.normal(size=(3, 8, 8, 1)).astype(np.float32)
  ref = x.reshape(3, 4, 2, 4, 2, 1).mean(axis=(2, 4))
  np.testing.assert_allclose(oftsr.avg_pool(x, 2), ref, rtol=1e-6, atol=1e-6)
  up = np.kron(ref[..., 0], np.ones((2, 2)))[..., None]
  np.testing.assert_allclose(oftsr.upsample(ref, 2), up, rtol=0, atol=0)
  # Pool o Up is the identity on LR images (Up = A^T up to f^2).
  np.testing.assert_allclose(oftsr.avg_pool(oftsr.upsample(ref, 2), 2), ref,
                             atol=1e-6)
  assert oftsr.avg_pool(x, 4).shape == (3, 2, 2, 1)
  with pytest.raises(ValueError, match='divide'):
    oftsr.avg_pool(x, 3)


def test_degrade_adds_lr_noise_then_upsamples():
  x = jnp.asarray(RNG.uniform(-1, 1, size=(2000, 8, 8, 1)), jnp.float32)
  key = jax.random.key(3)
  y_lr, y = oftsr.degrade(x, key, 0.0)
  np.testing.assert_allclose(y_lr, oftsr.avg_pool(x, 2), atol=1e-6)
  np.testing.assert_allclose(y, oftsr.upsample(oftsr.avg_pool(x, 2), 2),
                             atol=1e-6)
  y_lr, y = oftsr.degrade(x, key, 0.3)
  noise = np.asarray(y_lr - oftsr.avg_pool(x, 2))
  assert abs(noise.std() - 0.3) < 0.01 and abs(noise.mean()) < 0.01
  # The noise lives in LR space: y is constant on every 2x2 block.
  blocks = np.asarray(y).reshape(2000, 4, 2, 4, 2)
  np.testing.assert_allclose(blocks, blocks[:, :, :1, :, :1] + 0 * blocks,
                             atol=0)


def test_perturb_is_the_vp_noiser():
  y = jnp.full((4000, 8, 8, 1), 0.5)
  np.testing.assert_array_equal(oftsr.perturb(y, jax.random.key(0), 0.0), y)
  x0 = np.asarray(oftsr.perturb(y, jax.random.key(0), 0.6))
  assert abs(x0.mean() - 0.8 * 0.5) < 3e-3   # sqrt(1 - 0.36) = 0.8
  assert abs(x0.std() - 0.6) < 3e-3


# -- losses against numpy ------------------------------------------------------------
D = 6  # a flat toy "image" [B, D, 1, 1]


def _fields(theta, teach, xp):
  """Linear student v_phi(x, t) = (x W)(1 + a t) + b t and teacher
  v_theta(x, t) = x P + q t, in numpy (xp=np) or jax (xp=jnp)."""
  w, a, b = theta
  p, q = teach

  def student(x, t):
    xf = x.reshape(x.shape[0], -1)
    return ((xf @ w) * (1 + a * t[:, None]) + b * t[:, None]).reshape(x.shape)

  def teacher(x, t):
    xf = x.reshape(x.shape[0], -1)
    return (xf @ p + q * t[:, None]).reshape(x.shape)

  del xp
  return student, teacher


def _np_losses(theta, theta_sg, teach, x0, t, s, t_min, r):
  """An independent numpy implementation of the paper's distillation losses
  (v_boot; the released repository has no distillation code). Stopped
  gradients are evaluated at theta_sg, so finite differences in theta give
  the gradient the method prescribes."""
  st, te = _fields(theta, teach, np)
  st_sg, _ = _fields(theta_sg, teach, np)
  tb = lambda v: v[:, None, None, None]
  v_pred_t, v_pred_s = st(x0, t), st(x0, s)
  v_pred_t_sg = st_sg(x0, t)
  xt = x0 + tb(t) * v_pred_t_sg
  t_step = s - t
  pred = te(xt, t)
  x_2 = xt + r * tb(t_step) * pred
  t_2 = r * s + (1 - r) * t
  v_teacher = pred + 1 / (2 * r) * (te(x_2, t_2) - pred)
  delta = tb(t_step / s)
  distil = np.mean((v_pred_s - (v_pred_t_sg + delta * (v_teacher
                                                       - v_pred_t_sg))) ** 2)
  tm = np.full_like(t, t_min)
  boundary = np.mean((st(x0, tm) - te(x0, tm)) ** 2)
  per = ((v_pred_t - v_teacher) ** 2).reshape(len(t), -1).mean(1)
  align = np.mean((1 - t) ** 2 * per)
  return distil, boundary, align


@pytest.fixture(scope='module')
def toy():
  rng = np.random.default_rng(1)
  theta = (rng.normal(size=(D, D)) / 3, 0.7, rng.normal(size=D))
  teach = (rng.normal(size=(D, D)) / 3, rng.normal(size=D))
  x0 = rng.normal(size=(5, D, 1, 1))
  t = rng.uniform(0.01, 0.99, size=5)
  s = np.minimum(t + 0.05, 0.99)
  t[0], s[0] = 0.97, 0.99  # one clamped pair
  return theta, teach, x0, t, s


def _jax_losses(theta, teach, x0, t, s, r=0.5):
  st, te = _fields(theta, teach, jnp)
  return oftsr.distill_losses(st, te, jnp.asarray(x0, jnp.float32),
                              jnp.asarray(t, jnp.float32),
                              jnp.asarray(s, jnp.float32), 0.01, r)


@pytest.mark.parametrize('r', [0.5, 1.0])
def test_distill_losses_match_numpy(toy, r):
  theta, teach, x0, t, s = toy
  got = _jax_losses(jax.tree.map(jnp.asarray, theta),
                    jax.tree.map(jnp.asarray, teach), x0, t, s, r)
  want = _np_losses(theta, theta, teach, x0, t, s, 0.01, r)
  for name, w in zip(('distill', 'boundary', 'align'), want):
    np.testing.assert_allclose(got[name], w, rtol=2e-5, err_msg=name)
  total = oftsr.student_loss(got)
  np.testing.assert_allclose(total, want[0] + 0.1 * want[1] + 0.01 * want[2],
                             rtol=2e-5)


def test_distill_gradient_follows_the_stop_gradients(toy):
  """jax.grad of L = L_distill + 0.1 L_BC + 0.01 L_align equals central
  differences of the numpy loss in the non-stopped theta only."""
  theta, teach, x0, t, s = toy
  flat, unravel = jax.flatten_util.ravel_pytree(
      jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), theta))
  teach_j = jax.tree.map(jnp.asarray, teach)
  g = jax.grad(lambda f: oftsr.student_loss(
      _jax_losses(unravel(f), teach_j, x0, t, s)))(flat)
  theta_np = [np.asarray(a, np.float64) for a in jax.tree.leaves(theta)]
  flat_np = np.concatenate([np.ravel(a) for a in theta_np])

  def np_total(f):
    w = f[:D * D].reshape(D, D)
    a, b = f[D * D], f[D * D + 1:]
    d, bc, al = _np_losses((w, a, b), theta, teach, x0, t, s, 0.01, 0.5)
    return d + 0.1 * bc + 0.01 * al

  # ravel_pytree orders leaves as (W, a, b), like flat_np above.
  eps = 1e-6
  fd = np.array([(np_total(flat_np + eps * e) - np_total(flat_np - eps * e))
                 / (2 * eps) for e in np.eye(flat_np.size)])
  np.testing.assert_allclose(g, fd, rtol=2e-3, atol=2e-6)


def test_teacher_loss_is_l1_to_x1_minus_x0():
  rng = np.random.default_rng(2)
  x0, x1 = rng.normal(size=(2, 4, D, 1, 1)).astype(np.float32)
  t = rng.uniform(size=4).astype(np.float32)
  p = rng.normal(size=(D, D)).astype(np.float32)
  v = lambda x, tt: (x.reshape(4, -1) @ p).reshape(x.shape) * tt[:, None,
                                                                 None, None]
  xt = t[:, None, None, None] * x1 + (1 - t[:, None, None, None]) * x0
  want = np.mean(np.abs(v(xt, t) - (x1 - x0)))
  got = oftsr.teacher_loss(v, jnp.asarray(x0), jnp.asarray(x1),
                           jnp.asarray(t))
  np.testing.assert_allclose(got, want, rtol=1e-5)
  np.testing.assert_allclose(oftsr.interpolate(x0, x1, np.zeros(4)), x0)
  np.testing.assert_allclose(oftsr.interpolate(x0, x1, np.ones(4)), x1)


# -- RK2 and samplers ----------------------------------------------------------------
@pytest.mark.parametrize('r', [0.5, 2 / 3, 1.0])
def test_rk2_exact_for_velocity_linear_in_t(r):
  # v(x, t) = a + b t: the exact mean velocity over [t, s] is a + b (t + s)/2.
  a, b = 0.3, -1.7
  v = lambda x, t: a + b * t[:, None] + 0 * x
  t = jnp.array([0.01, 0.4, 0.9])
  s = jnp.minimum(t + 0.05, 0.99)
  got = oftsr.rk2_velocity(v, jnp.zeros((3, 2)), t, s, r)
  np.testing.assert_allclose(got[:, 0], a + b * (t + s) / 2, rtol=1e-6)


@pytest.mark.parametrize('r', [0.5, 2 / 3, 1.0])
def test_rk2_step_is_second_order_taylor_for_linear_field(r):
  # v = x A^T: every RK2 variant steps by exactly (I + hA + h^2 A^2 / 2).
  rng = np.random.default_rng(4)
  a = rng.normal(size=(3, 3)).astype(np.float32)
  x = rng.normal(size=(2, 3)).astype(np.float32)
  h = 0.05
  v = lambda x, t: x @ a.T
  t = np.array([0.2, 0.7], np.float32)
  got = x + h * np.asarray(oftsr.rk2_velocity(v, x, t, t + h, r))
  taylor = np.eye(3) + h * a + h * h * a @ a / 2
  np.testing.assert_allclose(got, x @ taylor.T, rtol=1e-5, atol=1e-6)


def test_euler_is_exact_on_straight_paths_and_one_step_formula():
  rng = np.random.default_rng(5)
  x1 = jnp.asarray(rng.normal(size=(4, 8, 8, 1)), jnp.float32)
  x0 = jnp.asarray(rng.normal(size=(4, 8, 8, 1)), jnp.float32)
  # The straight-path field towards x1 is constant along its own path.
  v = lambda x, t: (x1 - x) / (1.0 - t[:, None, None, None])
  for n in (1, 7, 32):
    out = oftsr.euler_sample(v, x0, n)
    np.testing.assert_allclose(out, x1, atol=2e-5)
  const = lambda x, t: jnp.ones_like(x) * 2.0
  np.testing.assert_allclose(oftsr.one_step(const, x0, 0.3),
                             x0 + (1 - 1e-3) * 2.0, atol=1e-6)
  seen = []
  oftsr.one_step(lambda x, t: seen.append(t) or x, x0, 0.25)
  np.testing.assert_allclose(seen[0], np.full(4, 0.25))


def test_sample_times_ranges():
  t, s = oftsr.sample_times(jax.random.key(0), 4000)
  assert float(t.min()) >= 0.01 and float(t.max()) <= 0.99
  np.testing.assert_allclose(s, np.minimum(t + 0.05, 0.99), atol=1e-7)
  tt = oftsr.sample_teacher_times(jax.random.key(1), 4000)
  assert float(tt.min()) >= 1e-3 and float(tt.max()) <= 1.0


def test_net_zero_init_and_bind_tiles_the_condition():
  net = oftsr.SRVelocity(width=16, blocks=1, emb_dim=8)
  x = jnp.asarray(RNG.normal(size=(3, 8, 8, 1)), jnp.float32)
  y = jnp.asarray(RNG.normal(size=(3, 8, 8, 1)), jnp.float32)
  apply = jax.jit(net.apply)
  params = jax.jit(net.init)(jax.random.key(0), x, y, jnp.zeros(3))
  assert float(jnp.abs(apply(params, x, y, jnp.ones(3))).max()) == 0.0
  params = jax.tree.map(
      lambda a: a + 0.1 * jax.random.normal(jax.random.key(1), a.shape),
      params)
  t, s = jnp.array([0.1, 0.5, 0.9]), jnp.array([0.2, 0.3, 0.4])
  both = jax.jit(lambda p: oftsr.bind(net, p, y)(
      jnp.concatenate([x, x]), jnp.concatenate([t, s])))(params)
  np.testing.assert_allclose(both[:3], apply(params, x, y, t), atol=1e-5)
  np.testing.assert_allclose(both[3:], apply(params, x, y, s), atol=1e-5)
  assert not np.allclose(both[:3], both[3:])


# -- training (short) ----------------------------------------------------------------
def _small_config():
  c = oftsr_config.get_config()
  c.width, c.blocks, c.emb_dim, c.batch_size = 64, 2, 16, 64
  return c


def _scan_train(init, step, num_steps, data):
  """One seed, one compiled scan (no seed padding, no logging)."""

  @jax.jit
  def run(key, data):
    state = init(key)
    return jax.lax.scan(lambda s, t: step(s, t, data), state,
                        jnp.arange(num_steps, dtype=jnp.int32))

  return run(jax.random.key(0), data)


@pytest.fixture(scope='module')
def trained():
  c = _small_config()
  net = oftsr.make_net(c)
  x = jnp.asarray(flow.digits('train'))
  init, step = oftsr.make_teacher_trainer(net, x, c, 0.1)
  teacher = _scan_train(init, step, 150, x)[0].ema
  init_s, step_s = oftsr.make_student_trainer(net, c, 0.1)
  state, metrics = _scan_train(lambda k: init_s(k, teacher), step_s, 100, x)
  return c, net, teacher, state, metrics


def test_student_starts_as_teacher_and_distillation_moves_it_to_the_endpoint(
    trained):
  # 150 teacher steps (64 wide, 2 blocks), 100 distillation steps; PSNR of
  # the one-step output at t = 0.99 against the teacher's 16-step endpoint
  # on 128 test digits (measured: 21.3 dB before, 27.1 dB after).
  c, net, teacher, state, metrics = trained
  assert np.isfinite(np.asarray(metrics['loss'])).all()
  jax.tree.map(np.testing.assert_array_equal, state.frozen, teacher)
  x1 = jnp.asarray(flow.digits('test')[:128])
  _, y, x0 = oftsr.eval_inputs(x1, jax.random.key(9), 1, c.sigma_y, 0.1, 2)

  @jax.jit
  def scores(teacher, student):
    endpoint = oftsr.euler_sample(oftsr.bind(net, teacher, y), x0, 16)
    return (endpoint, oftsr.one_step(oftsr.bind(net, teacher, y), x0, 0.99),
            oftsr.one_step(oftsr.bind(net, student, y), x0, 0.99))

  endpoint, undistilled, distilled = scores(teacher, state.ema)
  before = oftsr.psnr(undistilled, endpoint)
  after = oftsr.psnr(distilled, endpoint)
  assert after > before + 3.0, (before, after)


# -- claims --------------------------------------------------------------------------
def _metrics(c, psnr_t, fd_t, agree, fd_teachers, jump, undist=20.0):
  m = {f'psnr/student_t{t:g}': np.array([p]) for t, p in zip(c.knob_ts,
                                                              psnr_t)}
  m.update({f'fd/student_t{t:g}': np.array([f]) for t, f in zip(c.knob_ts,
                                                                 fd_t)})
  m[f'psnr_vs_teacher/student_t{c.knob_ts[-1]:g}'] = np.array([agree])
  m['psnr_vs_teacher/jump'] = np.array([20.0])
  for sp, f in zip(c.sigma_ps, fd_teachers):
    m[f'fd/teacher_sp{sp:g}_euler32'] = np.array([f, 1.05 * f])
    m[f'psnr/teacher_sp{sp:g}_euler32'] = np.array([14.0])
  m['fd/undistilled_t0.99'] = np.array([undist])
  m['psnr/undistilled_t0.99'] = np.array([12.0])
  m['fd/undistilled_t0.01'] = np.array([3.0])
  m['psnr/undistilled_t0.01'] = np.array([12.5])
  m['fd/teacher_sp0.1_1step'] = np.array([jump])
  m['psnr/teacher_sp0.1_1step'] = np.array([14.0])
  return m


def test_claims_can_hold_and_fail():
  c = oftsr_config.get_config()
  good = _metrics(c, [14.3, 14.2, 14.1, 14.1, 14.0], [2.4, 1.7, 1.4, 1.4, 1.5],
                  28.0, [3.0, 1.0], 15.0)
  claims = oftsr_exp.evaluate_claims(c, good)
  assert [cl.holds for cl in claims] == [True] * 4
  for cl in claims:          # every control fails its claim
    assert cl.control.endswith('(fails)'), cl
  bad = _metrics(c, [14.0, 14.1, 14.1, 14.2, 14.3], [2.0, 1.9, 1.9, 1.9, 1.9],
                 25.0, [1.2, 1.0], 5.0)
  assert [cl.holds for cl in oftsr_exp.evaluate_claims(c, bad)] == [False] * 4


def test_psnr_closed_form():
  x = np.zeros((2, 8, 8, 1))
  np.testing.assert_allclose(oftsr.psnr(x + 0.2, x), 10 * np.log10(4 / 0.04))


def test_config_checks():
  from experiments.oftsr import EXPERIMENT  # pylint: disable=g-import-not-at-top
  c = oftsr_config.get_config()
  c.student_sigma_p = 0.2
  with pytest.raises(ValueError, match='student_sigma_p'):
    EXPERIMENT.validate(c)
  c = oftsr_config.get_config()
  c.knob_ts = (0.5, 0.1)
  with pytest.raises(ValueError, match='knob_ts'):
    EXPERIMENT.validate(c)
  c = oftsr_config.get_config()
  c.hr_size = 16
  with pytest.raises(ValueError, match="hr_size=16 is invalid: must be 8"):
    EXPERIMENT.validate(c)
  c = oftsr_config.get_config('paper')
  c.attention_res = (12,)
  with pytest.raises(ValueError, match='attention_res.*256, 128'):
    EXPERIMENT.validate(c)
  c = oftsr_config.get_config('paper')
  c.hr_size = 48           # not divisible by 2^5 for six levels
  with pytest.raises(ValueError, match='hr_size.*2\\^5'):
    EXPERIMENT.validate(c)
  assert isinstance(c, ml_collections.ConfigDict)


# -- the full default run (slow) -----------------------------------------------------
@pytest.fixture(scope='module')
def default_run(tmp_path_factory):
  from experiments.oftsr import EXPERIMENT  # pylint: disable=g-import-not-at-top
  return EXPERIMENT.execute(oftsr_config.get_config(),
                            tmp_path_factory.mktemp('oftsr') / 'run')


@pytest.mark.slow
@pytest.mark.parametrize('prefix', ['(i) ', '(ii) ', '(iii) ', '(vi) '])
def test_default_claims(default_run, prefix):
  # Measured (default config at 0ce0747, 3 seeds, 324 s): student t=0.99 vs
  # teacher 32-step endpoint 31.41 dB (the jump: 21.71); student PSNR 14.32
  # -> 13.00 dB and FD 12.28 -> 4.91 from t=0.01 to 0.99 (ratio 0.40;
  # undistilled FD 12.32 -> 89.8); teacher FD sigma_p=0: 35.48 vs
  # sigma_p=0.1: 4.56 (7.8x; seed spread 1.02x); gap closed (12.90 - 4.91) /
  # (12.90 - 4.56) = 0.957 (undistilled -9.2).
  c = _claim(default_run, prefix)
  assert c['holds'], c
  assert c['control'].endswith('(fails)'), c


@pytest.mark.slow
def test_default_criterion_v_is_retired(default_run):
  # (v) asked for FD <= 0.2x the one-step jump's, which the 32-step teacher
  # itself misses (0.36x at 023b0e4, 0.35x at 0ce0747); (vi) carries the question.
  assert not [c for c in default_run['claims']
              if c['claim'].startswith('(v) ')]


# -- the paper variant: photographs from a folder, SRUNet, bicubic ---------------------
def _write_pngs(folder, n, size, seed=0):
  from PIL import Image  # pylint: disable=g-import-not-at-top
  folder.mkdir(parents=True, exist_ok=True)
  rng = np.random.default_rng(seed)
  for i in range(n):
    w, h = size
    img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    Image.fromarray(img).save(folder / f'{i:05d}.png')


def _fake_folder(root, dataset):
  """8 random PNGs in FFHQ layout (two subfolders, 32x32) or 6 train + 2
  valid non-square ones in DIV2K layout."""
  if dataset == 'ffhq':
    _write_pngs(root / '00000', 5, (32, 32))
    _write_pngs(root / '01000', 3, (32, 32), seed=1)
  else:
    _write_pngs(root / 'DIV2K_train_HR', 6, (48, 40))
    _write_pngs(root / 'DIV2K_valid_HR', 2, (40, 36), seed=1)
  return root


def test_load_image_folder_reads_subfolders_crops_and_scales(tmp_path):
  from iclrjax.diffusion import images  # pylint: disable=g-import-not-at-top
  root = _fake_folder(tmp_path / 'ffhq', 'ffhq')
  (root / 'notes.txt').write_text('not an image')
  files = images.image_files(root)
  assert [f.parent.name for f in files] == ['00000'] * 5 + ['01000'] * 3
  x = images.load_image_folder(root, 32)
  assert x.shape == (8, 32, 32, 3) and x.dtype == np.uint8
  from PIL import Image  # pylint: disable=g-import-not-at-top
  np.testing.assert_array_equal(x[0], np.asarray(Image.open(files[0])))
  xf = images.load_image_folder(root, 16, dtype=np.float32, limit=2)
  assert xf.shape == (2, 16, 16, 3) and -1.0 <= xf.min() < xf.max() <= 1.0
  np.testing.assert_allclose(images.to_signed(np.array([0, 255], np.uint8)),
                             [-1.0, 1.0])
  div = _fake_folder(tmp_path / 'div2k', 'div2k') / 'DIV2K_train_HR'
  a = images.load_image_folder(div, 24, crop='random', num_crops=3, seed=5)
  b = images.load_image_folder(div, 24, crop='random', num_crops=3, seed=5)
  assert a.shape == (18, 24, 24, 3)
  np.testing.assert_array_equal(a, b)          # seeded crops
  assert not np.array_equal(a[0], a[1])        # distinct crops of one file
  big = images.load_image_folder(div, 64, crop='center')  # upscaled first
  assert big.shape == (6, 64, 64, 3)
  with pytest.raises(FileNotFoundError, match='no PNG/JPEG'):
    images.load_image_folder(tmp_path / 'absent', 32)


def test_bicubic_degradation_keeps_constants_and_shapes():
  x = jnp.full((2, 16, 16, 3), 0.3)
  ramp = jnp.tile(jnp.linspace(-1, 1, 16)[None, :, None, None], (1, 1, 16, 3))
  z = jnp.asarray(RNG.normal(size=(2, 16, 12, 3)), jnp.float32)

  @jax.jit
  def outputs(key):
    return (oftsr.degrade(x, key, 0.0, 4, 'bicubic'),
            oftsr.degrade(ramp, key, 0.0, 4, 'bicubic')[1],
            oftsr.bicubic_down(z, 4),
            jax.image.resize(z, (2, 4, 3, 3), 'bicubic', antialias=True),
            oftsr.bicubic_up(z, 2),
            jax.image.resize(z, (2, 32, 24, 3), 'bicubic'))

  (y_lr, y), y_ramp, down, down_ref, up, up_ref = outputs(jax.random.key(0))
  assert y_lr.shape == (2, 4, 4, 3) and y.shape == x.shape
  np.testing.assert_allclose(y, x, atol=1e-6)
  assert 0.0 < float(jnp.abs(y_ramp - ramp).mean()) < 0.1
  # The matmul form is jax.image's resize.
  np.testing.assert_allclose(down, down_ref, atol=1e-5)
  np.testing.assert_allclose(up, up_ref, atol=1e-5)
  with pytest.raises(ValueError, match='mode'):
    oftsr.degrade(x, jax.random.key(0), 0.0, 4, 'lanczos')


def test_srunet_conditions_on_y_and_applies_dropout_in_training():
  c = oftsr_config.get_config('paper')
  assert oftsr.attention_levels(256, c.attention_res,
                                len(c.channel_mults)) == (4,)  # the paper's
  c.hr_size, c.channels, c.channel_mults, c.emb_dim = 16, 8, (1,), 8
  net = oftsr.make_net(c)
  assert isinstance(net, oftsr.SRUNet) and net.attention_levels == (0,)
  x = jnp.asarray(RNG.normal(size=(2, 16, 16, 3)), jnp.float32)
  y = jnp.asarray(RNG.normal(size=(2, 16, 16, 3)), jnp.float32)
  t = jnp.array([0.2, 0.7])
  # rbg keys: threefry's per-initialiser kernels take 3x longer to compile.
  params = jax.jit(net.init)(jax.random.key(0, impl='rbg'), x, y, t)
  conv_in = params['params']['unet']['conv_in']['kernel']
  assert conv_in.shape[-2] == 6           # concat(x, y) on channels
  params = jax.tree.map(
      lambda a: a + np.float32(0.1) * RNG.normal(size=a.shape).astype(
          np.float32), params)

  @jax.jit
  def outputs(params, key):
    return (oftsr.bind(net, params, y)(x, t),
            oftsr.bind(net, params, -y)(x, t),
            oftsr.bind(net, params, y, key)(x, t))

  v, v_neg, v_drop = outputs(params, jax.random.key(2, impl='rbg'))
  assert not np.allclose(v, v_neg)        # y is an input
  assert not np.allclose(v_drop, v)       # dropout on in training


def _tiny_paper_config(data_dir, dataset, net='resmlp'):
  """The paper variant at 16x16 (4x SR from 4x4) with a few steps; net
  'resmlp' keeps it seconds on CPU, 'unet' is the paper's family (a tiny
  SRUNet whose XLA compiles alone take ~45 s on 2 CPU cores)."""
  c = oftsr_config.get_config('paper')
  c.dataset, c.data_dir, c.net = dataset, str(data_dir), net
  c.hr_size, c.width, c.blocks, c.emb_dim = 16, 32, 1, 8
  c.channels, c.channel_mults, c.attention_res = 8, (1,), (16,)
  c.batch_size, c.teacher_steps, c.student_steps = 4, 3, 2
  c.sigma_ps, c.knob_ts, c.teacher_eval_steps = (0.1,), (0.01, 0.99), 2
  c.num_eval, c.eval_batch, c.crops_per_image = 2, 1, 2
  c.steps_per_chunk, c.log_every, c.checkpoint_every = 3, 1, 0
  return c


def _check_folder_data(c, dataset):
  train, test = oftsr_exp.hr_files(c)
  assert (len(train), len(test)) == (6, 2)
  if dataset == 'ffhq':
    assert [f.parent.name for f in test] == ['01000'] * 2  # the last files
  train_x, x_test = oftsr_exp.load_data(c)
  assert train_x.shape == ((6 if dataset == 'ffhq' else 12), 16, 16, 3)
  assert x_test.shape == (2, 16, 16, 3) and train_x.dtype == jnp.uint8


def _check_run(summary, wd):
  m = summary['metrics']
  for key in ('psnr/lr_input', 'psnr/student_t0.99', 'fd/student_t0.99',
              'psnr/teacher_sp0.1_euler2', 'psnr_vs_teacher/student_t0.99',
              'fd/real_test'):
    assert np.isfinite(m[key]['mean']), key
  assert 'classifier_test_accuracy' not in m
  assert m['psnr/lr_input']['mean'] < 30.0    # random pixels: 4x SR is hard
  assert (wd / 'plots' / 'samples.png').exists()


@pytest.mark.parametrize('dataset', ['ffhq', 'div2k'])
def test_paper_variant_reads_fake_folders(tmp_path, dataset):
  root = _fake_folder(tmp_path / dataset, dataset)
  _check_folder_data(_tiny_paper_config(root, dataset), dataset)


@pytest.mark.slow   # a second smoke run at FFHQ's shapes (~25 s); the
                    # folder reading above stays in the default suite
def test_paper_variant_runs_end_to_end_on_a_fake_ffhq_folder(tmp_path):
  # The paper variant's data path (4x bicubic SR of uint8 RGB folder images,
  # random-conv FD, batched evaluation) through the launcher's entry point.
  c = _tiny_paper_config(_fake_folder(tmp_path / 'ffhq', 'ffhq'), 'ffhq')
  _check_run(oftsr_exp.EXPERIMENT.execute(c, tmp_path / 'run'),
             tmp_path / 'run')


@pytest.mark.slow
@pytest.mark.parametrize('dataset', ['ffhq', 'div2k'])
def test_paper_variant_with_its_unet_on_a_fake_folder(tmp_path, dataset):
  # The paper's model family (SRUNet, dropout 0.1) end to end.
  c = _tiny_paper_config(_fake_folder(tmp_path / dataset, dataset), dataset,
                         net='unet')
  _check_folder_data(c, dataset)
  _check_run(oftsr_exp.EXPERIMENT.execute(c, tmp_path / 'run'),
             tmp_path / 'run')


@pytest.mark.parametrize('dataset,make', [
    ('ffhq', None), ('ffhq', 'empty'), ('div2k', None), ('div2k', 'train')])
def test_missing_image_folder_is_one_line_before_any_compute(
    tmp_path, dataset, make):
  root = tmp_path / 'data'
  if make == 'empty':
    root.mkdir()
  elif make == 'train':
    _write_pngs(root / 'DIV2K_train_HR', 1, (8, 8))
  c = oftsr_config.get_config('paper')
  c.dataset, c.data_dir = dataset, str(root)
  wd = tmp_path / 'run'
  with pytest.raises(FileNotFoundError) as e:
    oftsr_exp.EXPERIMENT.execute(c, wd)
  msg = str(e.value)
  assert '\n' not in msg and not wd.exists()
  what = 'lacks DIV2K_valid_HR images' if make == 'train' else 'has no images'
  assert msg.startswith(f'data_dir={str(root)!r} {what}: '), msg
  assert '--config.data_dir=' in msg
  assert ('DIV2K_train_HR/*.png' in msg) == (dataset == 'div2k')
  c.data_dir = ''
  with pytest.raises(FileNotFoundError, match="^data_dir='' has no images"):
    oftsr_exp.preflight(c)
