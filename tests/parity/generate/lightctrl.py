"""LightCtrl (GVCLab/LightCtrl): the Butterworth filter, the relighter's
frequency mix of (normal, image) latents, and the light-map injection, run
with the release's own functions.

  python tests/parity/generate/lightctrl.py --ref CHECKOUT

Needs torch and numpy only: diffusers, transformers, cv2, moviepy, ... are
stubbed (the functions run here never call them). The VAE is stubbed by the
identity (encode -> latent_dist.mode() = input, scaling factor 1) and the
IC-Light pipeline by a recorder of the conditioning it is handed, so
`Relighter.__call__` runs its own filter + mix on our latents. The injection
is the closure `inject_light_map_noise` inside
`AnimateDiffVideoToVideoPipeline.__call__`: its code object is bound to a
minimal `self` (only `self.unet.dtype` is read) and called as is; torch's
global seed is set before each call and the same draws are replayed to
record the noise it used.
"""

from __future__ import annotations

import inspect
import sys
import types

sys.dont_write_bytecode = True  # leave the reference checkout untouched

import _common  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

SEED = 20260  # np.random.default_rng
SOURCES = ('LEFT_TO_RIGHT', 'TOP_LEFT_TO_BOTTOM_RIGHT',
           'BOTTOM_LEFT_TO_TOP_RIGHT', 'TOP_TO_BOTTOM', 'CIRCULAR',
           'SMI_CIRCULAR', 'RADIUS_CHANGE')
# Butterworth (n, d_s, d_t); d = 0 is the all-zero filter.
BW_PARAMS = ((4, 0.0, 0.0), (4, 0.3, 0.3), (4, 1.0, 1.0), (4, 0.6, 0.6),
             (2, 0.5, 0.25))
BW_SHAPES = ((4, 6, 8), (3, 5, 5))
LBDS = (1.0, 0.75, 0.5, 0.25)    # the relight weights of the fused steps
MIX_SHAPE = (3, 4, 6, 5)         # [f, c, h, w]: T of the filter is c
INJ_SHAPE = (1, 4, 5, 6, 8)      # [1, c, f, h, w] latents
LIGHT_RADIUS = 20.0              # R (pixels); sigma = R / 8 latent pixels


class _Anything:
  """Stands for any stubbed name: subclassable, callable, any attribute."""

  def __init__(self, *a, **k):
    pass

  def __call__(self, *a, **k):
    return _Anything()

  def __getattr__(self, name):
    return _Anything()


class _StubModule(types.ModuleType):
  """A module whose every attribute is a fresh class (distinct bases for the
  pipeline's mixins)."""

  def __getattr__(self, name):
    if name.startswith('__'):
      raise AttributeError(name)
    cls = type(name, (_Anything,), {})
    setattr(self, name, cls)
    return cls


def _stub_heavy_imports():
  for name in ('transformers', 'diffusers', 'diffusers.image_processor',
               'diffusers.loaders', 'diffusers.models',
               'diffusers.models.lora', 'diffusers.models.unets',
               'diffusers.models.unets.unet_motion_model',
               'diffusers.schedulers', 'diffusers.schedulers.scheduling_utils',
               'diffusers.configuration_utils', 'diffusers.utils',
               'diffusers.utils.torch_utils', 'diffusers.video_processor',
               'diffusers.pipelines', 'diffusers.pipelines.free_init_utils',
               'diffusers.pipelines.free_noise_utils',
               'diffusers.pipelines.pipeline_utils',
               'diffusers.pipelines.animatediff',
               'diffusers.pipelines.animatediff.pipeline_output',
               'moviepy', 'moviepy.editor', 'imageio', 'cv2', 'torchvision',
               'PIL', 'blendmodes', 'blendmodes.blend', 'skimage', 'einops'):
    sys.modules[name] = _StubModule(name)
  sys.modules['diffusers.utils'].logging = types.SimpleNamespace(
      get_logger=lambda name: None)


class _IdentityVAE:
  config = types.SimpleNamespace(scaling_factor=1.0)
  dtype = torch.float32

  def encode(self, x):
    return types.SimpleNamespace(
        latent_dist=types.SimpleNamespace(mode=lambda: x))

  def decode(self, z):
    return types.SimpleNamespace(sample=z)


class _RecordingPipeline:
  """IC-Light's pipeline: records the conditioning latent it is given."""

  def __init__(self):
    self.vae = _IdentityVAE()
    self.concat_conds = None

  def __call__(self, image, cross_attention_kwargs, **kw):
    self.concat_conds = cross_attention_kwargs['concat_conds'].clone()
    return types.SimpleNamespace(images=torch.zeros_like(image))


def main():
  args = _common.cli(__doc__)
  _stub_heavy_imports()
  _common.add_path(args.ref)
  from src import ic_light  # pylint: disable=import-outside-toplevel
  from src import vdm_pipe  # pylint: disable=import-outside-toplevel
  from utils import tools  # pylint: disable=import-outside-toplevel

  rng = np.random.default_rng(SEED)
  out = {}

  # 1. utils/tools.py butterworth_low_pass_filter.
  out['bw_params'] = np.array(BW_PARAMS, np.float64)
  for j, shape in enumerate(BW_SHAPES):
    out[f'bw_{j}'] = np.stack([
        tools.butterworth_low_pass_filter(list(shape), n=n, d_s=ds,
                                          d_t=dt).numpy()
        for n, ds, dt in BW_PARAMS])

  # 2. src/ic_light.py Relighter.__call__: get_freq_filter on [f, c, h, w]
  #    + freq_mix_3d(normal latent, image latent).
  normal = rng.standard_normal(MIX_SHAPE).astype(np.float32)
  image = rng.standard_normal(MIX_SHAPE).astype(np.float32)
  relighter = object.__new__(ic_light.Relighter)
  relighter.pipeline = _RecordingPipeline()
  relighter.vae = relighter.pipeline.vae
  relighter.device = 'cpu'
  relighter.lowres_denoise = 0.9
  relighter.bg_latent = torch.zeros(MIX_SHAPE)
  relighter.conds = relighter.unconds = None
  relighter.image_width = relighter.image_height = 8
  relighter.steps, relighter.num_samples, relighter.cfg = 15, 1, 2
  relighter.generator = None
  mixed = []
  for lbd in LBDS:
    relighter(torch.from_numpy(image), torch.from_numpy(normal), lbd)
    mixed.append(relighter.pipeline.concat_conds.numpy())
  out.update(mix_normal=normal, mix_image=image,
             mix_lbd=np.array(LBDS, np.float64), mix_out=np.stack(mixed))

  # 3. src/vdm_pipe.py inject_light_map_noise (a closure over `self`).
  call = inspect.unwrap(vdm_pipe.AnimateDiffVideoToVideoPipeline.__call__)
  code = next(c for c in call.__code__.co_consts
              if isinstance(c, types.CodeType)
              and c.co_name == 'inject_light_map_noise')
  assert code.co_freevars == ('self',), code.co_freevars
  self_ = types.SimpleNamespace(unet=types.SimpleNamespace(dtype=torch.float32))
  inject = types.FunctionType(code, vdm_pipe.__dict__, code.co_name, None,
                              (types.CellType(self_),))
  z = rng.standard_normal(INJ_SHAPE).astype(np.float32)
  _, c, f, h, w = INJ_SHAPE
  outs, eps = [], []
  for k, name in enumerate(SOURCES):
    torch.manual_seed(SEED + k)
    res = inject(x_T_total=torch.from_numpy(z.copy())[None],
                 bg_source=ic_light.BGSource[name], R=LIGHT_RADIUS,
                 device='cpu', total_frames=16)
    outs.append(res[0].numpy())
    torch.manual_seed(SEED + k)   # the same draws, one per frame
    eps.append(np.stack([torch.randn([1, 1, c, h, w])[0, 0].numpy()
                         for _ in range(f)]))
  out.update(inj_z=z, inj_radius=np.float64(LIGHT_RADIUS),
             inj_sources=np.array(SOURCES), inj_eps=np.stack(eps),
             inj_out=np.stack(outs))

  _common.write(
      'lightctrl', out, args=args, repo='GVCLab/LightCtrl',
      files=['utils/tools.py', 'src/ic_light.py', 'src/vdm_pipe.py'],
      what=('butterworth_low_pass_filter on (T, H, W) grids; the '
            'conditioning latent Relighter.__call__ hands IC-Light '
            '(get_freq_filter over [f, c, h, w] + freq_mix_3d of the normal '
            'and image latents) for each lbd; inject_light_map_noise on '
            '[1, c, f, h, w] latents for every BGSource trajectory, with the '
            'per-frame noise it drew'),
      packages=('numpy', 'torch'),
      notes=('VAE stubbed by the identity (scaling factor 1); IC-Light '
             'pipeline by a recorder of concat_conds; inj_eps[k, i] is the '
             'torch.randn draw of frame i ([c, h, w]); the injection '
             'closure is called through its code object with self.unet.dtype '
             '= float32 only'))


if __name__ == '__main__':
  main()
