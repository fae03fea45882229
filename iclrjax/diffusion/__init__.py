"""Diffusion and flow models, and the papers built on them.

- QDPM: quantization-aware diffusion for maximum likelihood, OpenReview
  5ekhMkawuT (no arXiv id): `qdpm` with the estimators of `likelihood`.
- BWCache: block-wise caching for video diffusion transformers, arXiv
  2509.13789: `bwcache` on the DiT of `dit`.
- Guidance watermarking for diffusion models, arXiv 2509.22126:
  `guidance_wm`.
- OFTSR: one-step flow for image super-resolution with tunable
  fidelity-realism trade-offs, arXiv 2412.09465: `oftsr`.
- Flow2GAN: hybrid flow matching and GAN for few-step audio generation,
  arXiv 2512.23278: `flow2gan` with the STFT / mel tools of `audio`.
- Diffusion language models are provably optimal parallel samplers, arXiv
  2512.25014: `dlm` (the exact round model) and `dlm_learned` (MDLM,
  ReMDM remasking and revision).
- LightCtrl: training-free controllable video relighting, OpenReview
  5ft8vd9rwc (no arXiv id): `lightctrl`.

Shared pieces: `flow` (rectified flow: loss, Euler / Heun / DDIM samplers,
trainer), `schedules` (VP and rectified-flow schedules), `nets` (ResMLP and
U-Net denoisers), `train` (the one training step with EMA), `images` and
`features` (digits, PSNR, Frechet distance).

Example:
    ```python
    import jax
    import jax.numpy as jnp
    from iclrjax.diffusion import bwcache, dit, flow

    model = dit.DiT(patch=2, width=32, depth=2, heads=2)
    key = jax.random.PRNGKey(0)
    x0 = jax.random.uniform(key, (16, 8, 8, 1), minval=-1.0, maxval=1.0)
    params = model.init(key, x0, jnp.zeros(16))
    velocity = lambda x, t: model.apply(params, x, t)
    loss = flow.flow_loss(velocity, x0, key)   # rectified flow: train on it
    noise = jax.random.normal(key, (4, 8, 8, 1))
    out = bwcache.sample(model, params, noise, num_steps=20, delta=0.15)
    print(float(loss), out.samples.shape, int(out.block_evals))  # <= 40
    ```
"""

from iclrjax.diffusion import audio
from iclrjax.diffusion import bwcache
from iclrjax.diffusion import dit
from iclrjax.diffusion import dlm
from iclrjax.diffusion import dlm_learned
from iclrjax.diffusion import features
from iclrjax.diffusion import flow
from iclrjax.diffusion import flow2gan
from iclrjax.diffusion import guidance_wm
from iclrjax.diffusion import images
from iclrjax.diffusion import lightctrl
from iclrjax.diffusion import likelihood
from iclrjax.diffusion import nets
from iclrjax.diffusion import oftsr
from iclrjax.diffusion import qdpm
from iclrjax.diffusion import schedules
from iclrjax.diffusion import train
from iclrjax.diffusion.audio import istft, log_mel, stft
from iclrjax.diffusion.bwcache import CacheResult, indicator, make_sampler
from iclrjax.diffusion.dit import DiT
from iclrjax.diffusion.dlm import Dist, oracle_policy, run_exact
from iclrjax.diffusion.dlm_learned import Denoiser, Sampler, mdlm_loss
from iclrjax.diffusion.features import frechet_distance
from iclrjax.diffusion.flow import flow_loss
from iclrjax.diffusion.flow2gan import (Generator, fm_loss, generate,
                                        make_fm_trainer, make_gan_trainer,
                                        make_generator)
from iclrjax.diffusion.guidance_wm import (WMDecoder, WMEncoder,
                                           guidance_direction, guided_sample,
                                           p_value, wm_loss)
from iclrjax.diffusion.lightctrl import (Relighter, VideoPrior, freq_mix,
                                         inject, light_positions,
                                         relight_sampler)
from iclrjax.diffusion.likelihood import Estimate, bits_per_dim
from iclrjax.diffusion.nets import ResMLP, UNet
from iclrjax.diffusion.oftsr import (SRVelocity, degrade, distill_losses,
                                     make_student_trainer,
                                     make_teacher_trainer, one_step,
                                     teacher_loss)
from iclrjax.diffusion.qdpm import bound_quadrature, softround, xhat

__all__ = [
    'audio', 'bwcache', 'dit', 'dlm', 'dlm_learned', 'features', 'flow',
    'flow2gan', 'guidance_wm', 'images', 'lightctrl', 'likelihood', 'nets',
    'oftsr', 'qdpm', 'schedules', 'train',
    # shared
    'flow_loss', 'DiT', 'ResMLP', 'UNet', 'Estimate', 'bits_per_dim',
    'frechet_distance', 'stft', 'istft', 'log_mel',
    # QDPM
    'softround', 'xhat', 'bound_quadrature',
    # BWCache
    'make_sampler', 'indicator', 'CacheResult',
    # guidance watermarking
    'guided_sample', 'guidance_direction', 'wm_loss', 'p_value',
    'WMEncoder', 'WMDecoder',
    # OFTSR
    'one_step', 'teacher_loss', 'distill_losses', 'degrade', 'SRVelocity',
    'make_teacher_trainer', 'make_student_trainer',
    # Flow2GAN
    'Generator', 'make_generator', 'fm_loss', 'generate', 'make_fm_trainer',
    'make_gan_trainer',
    # diffusion LMs
    'Dist', 'run_exact', 'oracle_policy', 'Denoiser', 'Sampler',
    'mdlm_loss',
    # LightCtrl
    'light_positions', 'inject', 'freq_mix', 'relight_sampler', 'Relighter',
    'VideoPrior',
]
