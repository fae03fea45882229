"""The papers iclrjax implements: one entry per experiment launcher.

`python -m experiments.report` builds the results table of README.md and
RESULTS.md, and the documentation site's pages (docs/papers/<name>.md), from
this list and results/<name>/<variant>/summary.json. A new paper adds its
entry here (see "Add a paper" in README.md).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Paper:
  name: str            # experiments/<name>.py, configs/<name>.py, results/<name>/
  title: str           # the paper's title
  short: str           # a few words for the results table
  source: str          # 'arXiv 2509.22531', 'OpenReview <id>', or '-'
  family: str          # iclrjax/<family>/
  modules: tuple[str, ...]  # the method's modules (dotted), first = the paper's
  kind: str = 'paper'  # 'paper', 'template' or 'infrastructure'
  code: str = ''       # the official code, 'owner/repo' on GitHub; '' if none
  parity: tuple[str, ...] = ()  # tests/parity/ files that run released code
  #   (the official code or a named third-party one) on our inputs
  references: tuple[str, ...] = ()  # third-party code in `parity`, owner/repo
  code_note: str = ''  # a sentence on what is released where it is partial,
  #   or named but could not be obtained

  @property
  def url(self) -> str:
    kind, _, ident = self.source.partition(' ')
    if kind == 'arXiv':
      return f'https://arxiv.org/abs/{ident}'
    if kind == 'OpenReview':
      return f'https://openreview.net/forum?id={ident}'
    return ''


PAPERS: tuple[Paper, ...] = (
    Paper('linreg', 'Template: minibatch least squares vs the normal '
          'equations', 'template: least squares', '-', 'examples',
          ('iclrjax.examples.linreg',), kind='template'),
    Paper('lm_grpo', 'Small decoder LM: KV-cached sampling, SFT and GRPO '
          '(DeepSeekMath, arXiv 2402.03300)', 'LM substrate: GRPO',
          'arXiv 2402.03300', 'lm',
          ('iclrjax.lm.model', 'iclrjax.lm.grpo', 'iclrjax.lm.sample',
           'iclrjax.lm.tasks'), kind='infrastructure',
          parity=('test_grpo_tunix.py',), references=('google/tunix',),
          code_note='DeepSeekMath released no training code.'),
    Paper('lkgp_bandit', 'Laplacian-kernelized Gaussian process bandits',
          'LK-GP bandits', 'arXiv 2601.00461', 'bandits',
          ('iclrjax.bandits.lkgp', 'iclrjax.bandits.envs', 'iclrjax.kernels')),
    Paper('kernel_ppo', 'Sampling Complexity of TD and PPO in RKHS',
          'Kernel PPO', 'arXiv 2509.24991', 'rl',
          ('iclrjax.rl.kernel_ppo', 'iclrjax.rl.ppo',
           'iclrjax.kernels.features'),
          code='conniemessi/TD-and-PPO-in-RKHS', parity=('test_kernel_ppo.py',)),
    Paper('fge', 'FGE: feasibility-guided exploration', 'FGE',
          'arXiv 2602.15817', 'rl', ('iclrjax.rl.fge', 'iclrjax.rl.curricula'),
          code='oswinso/fge', parity=('test_fge.py', 'test_ued.py'),
          references=('DramaCow/jaxued',)),
    Paper('dcd_ssm', 'DCD state-space models and group state tracking',
          'DCD SSMs', 'arXiv 2603.01959', 'ssm',
          ('iclrjax.ssm.dcd', 'iclrjax.ssm.groups', 'iclrjax.ssm.construct')),
    Paper('dgn_snn', 'Dynamic Gated Neurons for spiking neural networks',
          'DGN spiking nets', 'arXiv 2509.03281', 'snn',
          ('iclrjax.snn.dgn', 'iclrjax.snn.cells', 'iclrjax.snn.network')),
    Paper('qdpm', 'QDPM: quantization-aware diffusion for maximum '
          'likelihood', 'QDPM', 'OpenReview 5ekhMkawuT', 'diffusion',
          ('iclrjax.diffusion.qdpm', 'iclrjax.diffusion.likelihood')),
    Paper('bwcache', 'BWCache: block-wise caching for diffusion transformers',
          'BWCache', 'arXiv 2509.13789', 'diffusion',
          ('iclrjax.diffusion.bwcache', 'iclrjax.diffusion.dit'),
          code_note='The paper names github.com/hsc113/BWCache; no copy of it '
          'could be obtained here, so nothing of it was run.'),
    Paper('guidance_wm', 'Guidance watermarking for diffusion models',
          'Guidance watermarking', 'arXiv 2509.22126', 'diffusion',
          ('iclrjax.diffusion.guidance_wm',)),
    Paper('oftsr', 'OFTSR: One-Step Flow for Image Super-Resolution with '
          'Tunable Fidelity-Realism Trade-offs', 'OFTSR', 'arXiv 2412.09465',
          'diffusion', ('iclrjax.diffusion.oftsr',), code='yuanzhi-zhu/OFTSR',
          parity=('test_oftsr.py',)),
    Paper('flow2gan', 'Flow2GAN: Hybrid Flow Matching and GAN with '
          'Multi-Resolution Network for Few-step High-Fidelity Audio '
          'Generation', 'Flow2GAN', 'arXiv 2512.23278', 'diffusion',
          ('iclrjax.diffusion.flow2gan', 'iclrjax.diffusion.audio'),
          code='k2-fsa/Flow2GAN', parity=('test_flow2gan.py',)),
    Paper('dlm', 'Diffusion Language Models are Provably Optimal Parallel '
          'Samplers', 'Diffusion LMs', 'arXiv 2512.25014', 'diffusion',
          ('iclrjax.diffusion.dlm', 'iclrjax.diffusion.dlm_learned'),
          parity=('test_dlm.py',), references=('kuleshov-group/remdm',),
          code_note='The paper is theory and released no code.'),
    Paper('lightctrl', 'LightCtrl: Training-free Controllable Video '
          'Relighting', 'LightCtrl', 'OpenReview 5ft8vd9rwc', 'diffusion',
          ('iclrjax.diffusion.lightctrl',), code='GVCLab/LightCtrl',
          parity=('test_lightctrl.py',)),
    Paper('frontdoor', 'Debiased front-door learners for heterogeneous '
          'effects', 'Front-door FD-DR / FD-R', 'arXiv 2509.22531', 'causal',
          ('iclrjax.causal.frontdoor',), code='yonghanjung/FD-CATE',
          parity=('test_frontdoor.py', 'test_frontdoor_econml.py'),
          references=('py-why/EconML',)),
    Paper('w2s', 'Weak-to-strong generalization under spurious '
          'correlations', 'W2S, Enhanced-W2S', 'arXiv 2509.24005', 'stats',
          ('iclrjax.stats.w2s', 'iclrjax.stats.datasets')),
    Paper('fastmix', 'FastMix: Fast Data Mixture Optimization via Gradient '
          'Descent', 'FastMix', 'arXiv 2606.14971', 'stats',
          ('iclrjax.stats.fastmix',), code='hrtan/fastmix',
          parity=('test_fastmix.py',)),
    Paper('sgd_llc', 'Almost Bayesian: the fractal dynamics of stochastic '
          'gradient descent', 'SGD local learning coefficient',
          'arXiv 2503.22478', 'stats', ('iclrjax.stats.sgd_llc',),
          parity=('test_sgd_llc.py',),
          references=('timaeus-research/devinterp',)),
    Paper('arbuffer', 'Efficient Autoregressive Inference for Transformer '
          'Probabilistic Models', 'Causal AR buffer (TNP)', 'arXiv 2510.09477',
          'neural_process', ('iclrjax.neural_process.arbuffer',),
          code='conorhassan/AR-nanoTabPFN', parity=('test_arbuffer.py',)),
    Paper('tsfm_knobs', 'Implicit biases of design choices for time-series '
          'foundation models', 'Time-series FM knobs', 'arXiv 2510.19236',
          'timeseries', ('iclrjax.timeseries.tsfm_knobs',)),
    Paper('fgl', 'Forest-Based Graph Learning for Semi-Supervised Node '
          'Classification', 'Forest-based graph learning',
          'OpenReview 5asbtzIVpS', 'graph',
          ('iclrjax.graph.fgl', 'iclrjax.graph.data'),
          code_note='The submission links code at an anonymous review '
          'site (anonymous.4open.science/r/FGL), not a repository; it was '
          'not run here.'),
    Paper('causal_delta', 'Learning Robust Intervention Representations '
          'with Delta Embeddings', 'Causal delta embeddings',
          'arXiv 2508.04492', 'representation',
          ('iclrjax.representation.causal_delta',
           'iclrjax.representation.triplets')),
    Paper('fusion', 'Supporting Multimodal Intermediate Fusion with '
          'Informatic Constraint and Distribution Coherence',
          'Intermediate fusion (IID)', 'OpenReview 5bxmmuRhO6', 'multimodal',
          ('iclrjax.multimodal.fusion',),
          code_note='Code is only in the OpenReview supplementary material; '
          'it was not run here.'),
    Paper('token_guard', 'TOKEN-GUARD: Towards Token-Level Hallucination '
          'Control via Self-Checking Decoding', 'Token-Guard',
          'arXiv 2601.21969', 'lm', ('iclrjax.lm.token_guard',),
          code='rhq945/Token-Guard', parity=('test_token_guard.py',)),
    Paper('marc', 'MARC: Memory-Augmented RL Token Compression for '
          'Efficient Video Understanding', 'MARC', 'arXiv 2510.07915', 'lm',
          ('iclrjax.lm.marc',),
          code_note='A survey names github.com/Gimlettt/MARC; no copy of it '
          'could be obtained here, so nothing of it was run.'),
    Paper('unicot', 'Uni-CoT: Towards Unified Chain-of-Thought Reasoning '
          'Across Text and Vision', 'Uni-CoT', 'arXiv 2508.05606', 'lm',
          ('iclrjax.lm.unicot',), code='Fr0zenCrane/UniCoT',
          parity=('test_unicot.py',), code_note='The release is partial: it '
          'has the micro-level self-check, not the macro-level planning '
          'mechanisms or the training code.'),
    Paper('rwom', 'R-WoM: Retrieval-augmented World Model For Computer-use '
          'Agents', 'R-WoM', 'arXiv 2510.11892', 'lm', ('iclrjax.lm.rwom',)),
)

BY_NAME = {p.name: p for p in PAPERS}
