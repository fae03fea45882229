"""FastMix data-mixture search against uniform, DoReMi, RegMix and an oracle
(arXiv 2606.14971; configs/fastmix.py).

  python -m experiments.fastmix --config=configs/fastmix.py:smoke

The method and the baselines are `iclrjax/stats/fastmix.py`.

Part A, our synthetic classifier: K = 4 sources for one MLP on
R^d (S1 the target task, S2 the same labelling under shifted inputs, S3
random labels, S4 an unrelated labelling), each a finite pool; a target
validation set (what the searches see) and a target test set (what the
final models are scored on). Every search is one phase with the seeds as a
vmap axis: FastMix (one proxy run of `search_steps`), its control (the same
search validated on the unrelated task), DoReMi (a uniform reference run,
then the proxy), RegMix (`num_proxies` proxy runs of `search_steps`
each on Dirichlet(1) mixtures, all rows of one vmapped phase, then LightGBM
and the simplex search), random search at FastMix's cost, and an oracle
(Dirichlet mixtures trained the full budget, picked on validation). Phase
`final` trains a fresh model for `final_steps` on every method's mixture and
scores the target test loss. Cost is counted in gradient evaluations (one
per example batch per step) and timed (each phase's compiled wall clock).

Part B, the same contest on the LM substrate (`iclrjax/lm`): K synthetic
token sources of different use for a held-out target task, a small proxy
decoder for the searches, and the found mixtures used to train a larger one.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from experiments import plots
from iclrjax.core import config as cfg_lib
from iclrjax.core import distributed
from iclrjax.core import launch
from iclrjax.core import loop
from iclrjax.lm import model as lm_model
from iclrjax.lm import tasks
from iclrjax.stats import fastmix

SOURCES = ('target', 'shifted', 'random_labels', 'unrelated')
METHODS = ('uniform', 'fastmix', 'fastmix_control', 'doremi', 'regmix',
           'random_budget', 'oracle')


# -- Part A: the synthetic classifier -----------------------------------------


class Pools(NamedTuple):
  """One seed's data (a leading seed axis S when stacked). Every field is a
  pytree of example batches: a synthetic (x, y) or an LM (tokens, mask)."""
  train: Any    # leaves [K, N, ...]: source k's pool
  val: Any      # [V, ...]: the target task, what the searches see
  alt: Any      # [V, ...]: the unrelated task on the same inputs (control)
  test: Any     # [T, ...]: the target task, what the final models score


class Task(NamedTuple):
  """A model: init(key) -> params and its per-example loss."""
  init: Any
  loss: fastmix.LossFn


def _teacher(key, d: int, width: int, classes: int, scale: float):
  k1, k2 = jax.random.split(key)
  w1 = jax.random.normal(k1, (d, width)) / np.sqrt(d)
  w2 = jax.random.normal(k2, (width, classes)) / np.sqrt(width)
  return lambda x: scale * jnp.tanh(x @ w1 * 2.0) @ w2


def make_pools(key: jax.Array, a: ml_collections.ConfigDict) -> Pools:
  """One seed's sources (SOURCES order), validation and test sets."""
  ks = jax.random.split(key, 10)
  f = _teacher(ks[0], a.dim, a.teacher_width, a.classes, a.teacher_scale)
  g = _teacher(ks[1], a.dim, a.teacher_width, a.classes, a.teacher_scale)
  label = lambda k, logits: jax.random.categorical(k, logits)
  n = a.pool_size
  x = jax.random.normal(ks[2], (4, n, a.dim))
  shift = jax.random.normal(ks[3], (a.dim,))
  shift = a.shift * shift / jnp.linalg.norm(shift)
  x = x.at[1].set(x[1] * a.shift_scale + shift[None])
  y = jnp.stack([label(ks[4], f(x[0])), label(ks[5], f(x[1])),
                 jax.random.randint(ks[6], (n,), 0, a.classes),
                 label(ks[7], g(x[3]))])
  vx = jax.random.normal(ks[8], (a.val_size + a.test_size, a.dim))
  kv = jax.random.split(ks[9], 2)
  vy, alt = label(kv[0], f(vx)), label(kv[1], g(vx))
  V = a.val_size
  return Pools((x, y), (vx[:V], vy[:V]), (vx[:V], alt[:V]),
               (vx[V:], vy[V:]))


def mlp_task(a) -> Task:
  """The ReLU MLP ('body', then the output 'head') and its cross-entropy."""

  def init(key):
    k1, k2 = jax.random.split(key)
    return {'body': {'w': jax.random.normal(k1, (a.dim, a.width))
                          * np.sqrt(2.0 / a.dim),
                     'b': jnp.zeros(a.width)},
            'head': {'w': jax.random.normal(k2, (a.width, a.classes))
                          * np.sqrt(1.0 / a.width),
                     'b': jnp.zeros(a.classes)}}

  def loss(params, batch):
    x, y = batch
    h = jax.nn.relu(x @ params['body']['w'] + params['body']['b'][None])
    logits = h @ params['head']['w'] + params['head']['b'][None]
    lp = jax.nn.log_softmax(logits)
    return -jnp.take_along_axis(lp, y[:, None], 1)[:, 0]

  return Task(init, loss)


def source_batches(key, pools: Pools, batch: int):
  """One batch per source (leaves [K, B, ...]); B is split over the mesh's
  'data' axis."""
  K, N = jax.tree.leaves(pools.train)[0].shape[:2]
  idx = distributed.shard_batch(jax.random.randint(key, (K, batch), 0, N),
                                axis=1)
  take = jax.vmap(lambda v, i: v[i])
  return jax.tree.map(lambda v: take(v, idx), pools.train)


def val_batch(key, pools: Pools, batch: int, control: bool = False):
  src = pools.alt if control else pools.val
  n = jax.tree.leaves(src)[0].shape[0]
  idx = distributed.shard_batch(jax.random.randint(key, (batch,), 0, n))
  return jax.tree.map(lambda v: v[idx], src)


def _select(pools_S: Pools, seed: jax.Array) -> Pools:
  return jax.tree.map(lambda v: v[seed], pools_S)


class FixedState(NamedTuple):
  key: jax.Array
  seed: jax.Array
  alpha: jax.Array
  params: Any
  opt_state: Any
  val_loss: jax.Array
  test_loss: jax.Array


def make_fixed(a, task: Task, num_steps: int):
  """Training on a fixed mixture (init_args: (seed index, alpha)); the
  target's validation and test losses every `a.eval_every` steps and at
  the end."""
  tx = optax.adam(a.lr)

  def init(key, args):
    seed, alpha = args
    k_init, k = jax.random.split(key)
    params = task.init(k_init)
    return FixedState(k, seed, alpha, params, tx.init(params),
                      jnp.full((), jnp.nan), jnp.full((), jnp.nan))

  def evaluate(params, pools):
    val, test = distributed.shard_batch((pools.val, pools.test))
    return task.loss(params, val).mean(), task.loss(params, test).mean()

  def step(state, t, pools_S):
    pools = _select(pools_S, state.seed)
    k, kb = jax.random.split(state.key)
    params, opt_state, loss = fastmix.inner_step(
        task.loss, tx, state.params, state.opt_state,
        source_batches(kb, pools, a.batch_size), state.alpha)
    due = (t % a.eval_every == a.eval_every - 1) | (t == num_steps - 1)
    val, test = jax.lax.cond(due, evaluate,
                             lambda *_: (state.val_loss, state.test_loss),
                             params, pools)
    return (state._replace(key=k, params=params, opt_state=opt_state,
                           val_loss=val, test_loss=test),
            {'train_loss': loss, 'val_loss': val, 'test_loss': test})

  return init, step


class SearchRow(NamedTuple):
  key: jax.Array
  seed: jax.Array
  control: jax.Array    # validate on the unrelated task instead
  search: fastmix.SearchState


def make_fastmix(a, f, task: Task):
  """One FastMix search per row (init_args: (seed index, control flag)); a
  control row validates on the unrelated task instead of the target."""
  tx, z_tx = optax.adam(a.lr), fastmix.z_optimizer(f.z_lr)
  K = len(SOURCES)

  def init(key, args):
    seed, control = args
    k_init, k = jax.random.split(key)
    return SearchRow(k, seed, control, fastmix.init_search(
        task.init(k_init), tx, z_tx, K))

  def step(row, t, pools_S):
    pools = _select(pools_S, row.seed)
    k, kb, ko, kv = jax.random.split(row.key, 4)
    mask = fastmix.param_mask(row.search.params, f.params)
    val = jax.tree.map(lambda v, w: jnp.where(row.control, w, v),
                       val_batch(kv, pools, a.outer_batch, False),
                       val_batch(kv, pools, a.outer_batch, True))
    s, m = fastmix.search_step(
        task.loss, tx, z_tx, row.search, t,
        source_batches(kb, pools, a.batch_size),
        source_batches(ko, pools, a.outer_batch), val,
        n_inner=f.n_inner, eta_w=a.lr, beta=f.beta, lam=f.lam, mask=mask)
    alpha = jax.nn.softmax(s.z)
    m.update({f'alpha_{n}': alpha[i] for i, n in enumerate(SOURCES)})
    return row._replace(key=k, search=s), m

  return init, step


class DoremiRow(NamedTuple):
  key: jax.Array
  seed: jax.Array
  ref: Any
  state: fastmix.DoremiState


def make_doremi(a, d, task: Task):
  """DoReMi's proxy per row (init_args: (seed index, reference params))."""
  tx = optax.adam(a.lr)
  K = len(SOURCES)

  def init(key, args):
    seed, ref = args
    k_init, k = jax.random.split(key)
    p = task.init(k_init)
    return DoremiRow(k, seed, ref, fastmix.DoremiState(
        p, tx.init(p), jnp.full((K,), 1.0 / K), jnp.zeros((K,))))

  def step(row, t, pools_S):
    del t
    pools = _select(pools_S, row.seed)
    k, kb = jax.random.split(row.key)
    st, m = fastmix.doremi_step(task.loss, tx, row.state, row.ref,
                                source_batches(kb, pools, a.batch_size),
                                eta=d.eta, eps=d.eps)
    m.update({f'alpha_{n}': st.alpha[i] for i, n in enumerate(SOURCES)})
    return row._replace(key=k, state=st), m

  return init, step


def _host(x):
  return np.asarray(distributed.to_host(x))


class Timed(NamedTuple):
  result: Any
  wall_s: float


def _timed(fn, *args, **kwargs) -> Timed:
  t0 = time.perf_counter()
  res = fn(*args, **kwargs)
  jax.block_until_ready(res.state)
  return Timed(res, time.perf_counter() - t0)


def _train_rows(r: launch.Run, init, step, *, phase: str, num_seeds: int,
                seed_ids: list[int], init_args, rows_per_call: int, **kwargs
                ) -> Timed:
  """`r.train` of `num_seeds` independent rows, at most `rows_per_call`
  at once (0: all; groups are phases <phase>_<g>), with one state of every
  row in order: the same rows, less memory."""
  n = rows_per_call or num_seeds
  if n >= num_seeds:
    return _timed(r.train, init, step, phase=phase, num_seeds=num_seeds,
                  seed_ids=seed_ids, init_args=init_args, **kwargs)
  parts = [_timed(r.train, init, step, phase=f'{phase}_{g}',
                  num_seeds=min(n, num_seeds - lo),
                  seed_ids=seed_ids[lo:lo + n],
                  init_args=jax.tree.map(lambda x: x[lo:lo + n], init_args),
                  **kwargs) for g, lo in enumerate(range(0, num_seeds, n))]
  state = jax.tree.map(lambda *x: jnp.concatenate(x),
                       *[t.result.state for t in parts])
  return Timed(dataclasses.replace(parts[0].result, state=state),
               sum(t.wall_s for t in parts))


def _groups(a, num_seeds: int) -> int:
  """How many `_train_rows` phases RegMix's (M + 1) S proxy rows take."""
  rows = (a.num_proxies + 1) * num_seeds
  return -(-rows // (a.rows_per_call or rows))


def dirichlet_mixtures(seed: int, num: int, k: int) -> np.ndarray:
  return np.random.default_rng(seed).dirichlet(np.ones(k), num)


def run_searches(r: launch.Run, part: str, a, pools_S, task: Task
                 ) -> dict[str, Any]:
  """Every method's mixture [S, K], search cost (gradient evaluations per
  seed) and wall clock, for one part."""
  cfg = r.config
  S, K = cfg.num_seeds, len(SOURCES)
  f, d, rm = cfg.fastmix, cfg.doremi, cfg.regmix
  steps = dict(num_steps=a.search_steps,
               chunk_size=min(a.chunk_size, a.search_steps))
  seeds = jnp.arange(S)
  uniform = jnp.full((S, K), 1.0 / K)
  mix, cost, wall = {}, {}, {}

  # FastMix and its control search: one phase, the flag a row argument.
  init, step = make_fastmix(a, f, task)
  t = _timed(r.train, init, step, phase=f'{part}_fastmix', data=pools_S,
             num_seeds=2 * S, seed_ids=list(range(S)) * 2,
             init_args=(jnp.tile(seeds, 2),
                        jnp.repeat(jnp.array([False, True]), S)), **steps)
  z = _host(t.result.state.search.z)
  mix['fastmix'], mix['fastmix_control'] = np.split(
      jax.nn.softmax(z, -1), 2)
  for name in ('fastmix', 'fastmix_control'):
    cost[name] = fastmix.search_cost(a.search_steps, f.n_inner, K,
                                     a.batch_size, a.outer_batch, f.beta)
    wall[name] = t.wall_s / 2

  # RegMix's proxies (every seed draws its own M mixtures: [S, M, K]) and
  # DoReMi's reference (the uniform mixture, rows 0..S-1): one phase.
  M = a.num_proxies
  proxies = np.stack([dirichlet_mixtures(cfg.seed + s, M, K)
                      for s in range(S)])
  alphas = np.concatenate([np.asarray(uniform), proxies.transpose(
      1, 0, 2).reshape(M * S, K)])
  t = _train_rows(r, *make_fixed(a, task, a.search_steps),
                  phase=f'{part}_proxies', data=pools_S,
                  num_seeds=(M + 1) * S, seed_ids=list(range(S)) * (M + 1),
                  init_args=(jnp.tile(seeds, M + 1),
                             jnp.asarray(alphas, jnp.float32)),
                  rows_per_call=a.rows_per_call, **steps)
  proxy_val = _host(t.result.state.val_loss)[S:].reshape(M, S)
  ref_params = jax.tree.map(lambda v: v[:S], t.result.state.params)
  t_proxy = t.wall_s / (M + 1)
  t_fit = time.perf_counter()
  mix['regmix'] = np.stack([
      fastmix.regmix_search(fastmix.regmix_fit(proxies[s], proxy_val[:, s],
                                               seed=cfg.seed + s), K,
                            seed=cfg.seed + s, num_samples=rm.num_samples,
                            top_k=rm.top_k) for s in range(S)])
  proxy_cost = a.search_steps * K * a.batch_size
  cost['regmix'] = M * proxy_cost
  wall['regmix'] = M * t_proxy + time.perf_counter() - t_fit

  init, step = make_doremi(a, d, task)
  t = _timed(r.train, init, step, phase=f'{part}_doremi', data=pools_S,
             init_args=(seeds, ref_params), **steps)
  mix['doremi'] = _host(t.result.state.state.alpha_sum) / a.search_steps
  # The reference run, then the proxy (its reference forward pass counted
  # as a gradient evaluation: an upper bound).
  cost['doremi'] = 3 * proxy_cost
  wall['doremi'] = t_proxy + t.wall_s

  # Random search at FastMix's cost: the best (on validation) of the first
  # ceil(cost / proxy cost) proxies.
  m_budget = int(np.ceil(cost['fastmix'] / proxy_cost))
  best = np.argmin(proxy_val[:m_budget], 0)
  mix['random_budget'] = proxies[np.arange(S), best]
  cost['random_budget'] = m_budget * proxy_cost
  wall['random_budget'] = m_budget * t_proxy
  mix['uniform'] = np.asarray(uniform)
  cost['uniform'] = 0
  wall['uniform'] = 0.0
  return {'mix': mix, 'cost': cost, 'wall': wall, 'proxies': proxies,
          'proxy_val': proxy_val, 'm_budget': m_budget}


def run_final(r: launch.Run, part: str, a, pools_S, mix: dict[str, Any],
              task: Task, oracle: np.ndarray | None) -> dict[str, Any]:
  """Fresh models for `final_steps` on every method's mixture: test loss
  [S] per method; the oracle's Dirichlet candidates ride in the same phase
  and the one with the lowest validation loss is its pick."""
  S, K = r.config.num_seeds, len(SOURCES)
  names = [n for n in METHODS if n in mix]
  alphas = [np.asarray(mix[n], np.float32) for n in names]
  if oracle is not None:
    alphas += [np.broadcast_to(o, (S, K)).astype(np.float32) for o in oracle]
  P = len(alphas)
  init, step = make_fixed(a, task, a.final_steps)
  res = _train_rows(r, init, step, phase=f'{part}_final', data=pools_S,
                    num_steps=a.final_steps,
                    chunk_size=min(a.chunk_size, a.final_steps),
                    num_seeds=P * S, seed_ids=list(range(S)) * P,
                    init_args=(jnp.tile(jnp.arange(S), P),
                               jnp.asarray(np.concatenate(alphas))),
                    rows_per_call=a.rows_per_call).result
  test = _host(res.state.test_loss).reshape(P, S)
  val = _host(res.state.val_loss).reshape(P, S)
  out = {n: test[i] for i, n in enumerate(names)}
  final_mix = dict(mix)
  if oracle is not None:
    pick = np.argmin(val[len(names):], 0)
    out['oracle'] = test[len(names):][pick, np.arange(S)]
    final_mix['oracle'] = oracle[pick]
  return {'test_loss': out, 'mix': final_mix}


def run_synthetic(r: launch.Run) -> dict[str, Any]:
  cfg = r.config
  a = cfg.synthetic
  keys = jax.random.split(jax.random.PRNGKey(cfg.seed + 1000), cfg.num_seeds)
  pools_S = jax.vmap(lambda k: make_pools(k, a))(keys)
  task = mlp_task(a)
  s = run_searches(r, 'synthetic', a, pools_S, task)
  oracle = dirichlet_mixtures(cfg.seed + 1, a.oracle_mixtures, len(SOURCES))
  f = run_final(r, 'synthetic', a, pools_S, s['mix'], task, oracle)
  s.update(f)
  s['cost']['oracle'] = (a.oracle_mixtures * a.final_steps * len(SOURCES)
                         * a.batch_size)
  return s


# -- Part B: the LM substrate -------------------------------------------------


def lm_sequences(batch: tasks.Batch, length: int) -> tuple[jax.Array,
                                                          jax.Array]:
  """Prompt + answer right-padded to `length`, and the answer's mask."""
  tokens, mask = tasks.sft_sequences(batch)
  pad = length - tokens.shape[1]
  return (jnp.pad(tokens, ((0, 0), (0, pad)), constant_values=tasks.PAD),
          jnp.pad(mask, ((0, 0), (0, pad))))


def lm_length(b) -> int:
  """The longest source: the shifted reverse task, prompt + answer."""
  return 2 * max(b.length, b.shift_length) + 3


def make_lm_pools(key: jax.Array, b: ml_collections.ConfigDict) -> Pools:
  """SOURCES on tokens: the target task (reverse strings of `length`), the
  same task on strings of `shift_length`, the target's prompts with random
  letters as answers, and the target's prompts with the copy task's answers
  (the unrelated task); validation/test sets of the target, and the copy
  answers of the validation prompts (the control's target)."""
  L = lm_length(b)
  ks = jax.random.split(key, 6)
  n = b.pool_size
  rev = tasks.reverse(ks[0], n, b.length)
  shifted = tasks.reverse(ks[1], n, b.shift_length)
  noisy = tasks.reverse(ks[2], n, b.length)
  letters = jax.random.randint(ks[3], (n, b.length), tasks.TOKENIZER.id('a'),
                               tasks.TOKENIZER.id('z') + 1)
  noisy = noisy._replace(target_BxT=noisy.target_BxT.at[:, :-1].set(letters))
  copy = tasks.copy(ks[4], n, b.length)
  train = [lm_sequences(x, L) for x in (rev, shifted, noisy, copy)]
  train = jax.tree.map(lambda *v: jnp.stack(v), *train)
  V = b.val_size
  held = tasks.reverse(ks[5], V + b.test_size, b.length)
  val = jax.tree.map(lambda v: v[:V], held)
  test = jax.tree.map(lambda v: v[V:], held)
  alt = tasks.Batch(val.prompt_BxP, jnp.concatenate(
      [val.prompt_BxP[:, 1:-1], val.target_BxT[:, -1:]], 1))
  return Pools(train, lm_sequences(val, L), lm_sequences(alt, L),
               lm_sequences(test, L))


def lm_task(m: ml_collections.ConfigDict, length: int) -> Task:
  """A decoder of `iclrjax/lm` and its per-sequence mean answer-token
  cross-entropy (the SFT loss)."""
  model = lm_model.Model(lm_model.Config(
      vocab_size=tasks.TOKENIZER.vocab_size, d_model=m.d_model,
      num_heads=m.num_heads, num_layers=m.num_layers, d_ff=m.d_ff,
      max_len=length))

  def init(key):
    return model.init(key, length)

  def loss(params, batch):
    tokens, mask = batch
    lp = jax.nn.log_softmax(model.apply(params, tokens)[:, :-1])
    nll = -jnp.take_along_axis(lp, tokens[:, 1:, None], -1)[..., 0]
    m_ = mask[:, 1:].astype(nll.dtype)
    return (nll * m_).sum(-1) / jnp.maximum(m_.sum(-1), 1.0)

  return Task(init, loss)


def run_lm(r: launch.Run) -> dict[str, Any]:
  cfg = r.config
  b = cfg.lm
  L = lm_length(b)
  keys = jax.random.split(jax.random.PRNGKey(cfg.seed + 2000), cfg.num_seeds)
  pools_S = jax.vmap(lambda k: make_lm_pools(k, b))(keys)
  s = run_searches(r, 'lm', b, pools_S, lm_task(b.proxy, L))
  oracle = dirichlet_mixtures(cfg.seed + 2, b.oracle_mixtures, len(SOURCES))
  f = run_final(r, 'lm', b, pools_S, s['mix'], lm_task(b.final, L), oracle)
  s.update(f)
  s['cost']['oracle'] = (b.oracle_mixtures * b.final_steps * len(SOURCES)
                         * b.batch_size)
  return s


def programs(cfg, sharded: bool = False) -> list[loop.Program]:
  """Every part's four training phases at the config's shapes: the FastMix
  searches (and their controls), RegMix's proxies with DoReMi's reference,
  DoReMi's proxy and the final models (`benchmarks/paper_variants.py`)."""
  S, K = cfg.num_seeds, len(SOURCES)
  keys = jax.ShapeDtypeStruct((S, 2), jnp.uint32)
  rows = lambda n, *shape, dtype=jnp.float32: jax.ShapeDtypeStruct(
      (n,) + shape, dtype)
  progs = []
  for part in ('synthetic', 'lm'):
    a = cfg[part]
    if part == 'synthetic':
      task = final_task = mlp_task(a)
      make = lambda k, a=a: make_pools(k, a)
    else:
      L = lm_length(a)
      task, final_task = lm_task(a.proxy, L), lm_task(a.final, L)
      make = lambda k, a=a: make_lm_pools(k, a)
    pools_S = jax.eval_shape(jax.vmap(make), keys)
    search = dict(num_steps=a.search_steps, data=pools_S, sharded=sharded,
                  chunk_size=min(a.chunk_size, a.search_steps))
    M = a.num_proxies
    P = len(METHODS) - 1 + a.oracle_mixtures   # every method but the oracle
    seed = lambda n: rows(n, dtype=jnp.int32)
    evals = (f'the val/test losses ({a.val_size} + {a.test_size} examples) '
             f'run under lax.cond every {a.eval_every} steps, which the FLOP '
             'count charges to every step')
    # Rows train `rows_per_call` at a time: the largest group's program,
    # called once per group.
    group = lambda n: min(a.rows_per_call or n, n)
    calls = lambda n: -(-n // group(n))
    proxies = loop.train_program(
        f'train/{part}_proxies', *make_fixed(a, task, a.search_steps),
        num_seeds=group((M + 1) * S), init_args=(
            seed(group((M + 1) * S)), rows(group((M + 1) * S), K)), **search)
    proxies = dataclasses.replace(
        proxies, calls=proxies.calls * calls((M + 1) * S))
    final = loop.train_program(
        f'train/{part}_final', *make_fixed(a, final_task, a.final_steps),
        num_seeds=group(P * S), num_steps=a.final_steps, data=pools_S,
        chunk_size=min(a.chunk_size, a.final_steps),
        init_args=(seed(group(P * S)), rows(group(P * S), K)),
        sharded=sharded)
    final = dataclasses.replace(final, calls=final.calls * calls(P * S))
    progs += [
        loop.train_program(
            f'train/{part}_fastmix', *make_fastmix(a, cfg.fastmix, task),
            num_seeds=2 * S, init_args=(seed(2 * S),
                                        rows(2 * S, dtype=jnp.bool_)),
            **search),
        dataclasses.replace(proxies, note=(
            f'{M} RegMix proxies and DoReMi\'s reference per seed, as rows; '
            'the LightGBM fit and its simplex search are host work; '
            + evals)),
        loop.train_program(
            f'train/{part}_doremi', *make_doremi(a, cfg.doremi, task),
            num_seeds=S, init_args=(seed(S), jax.eval_shape(
                jax.vmap(task.init), keys)), **search),
        dataclasses.replace(final, note=f'{P} mixtures per seed as rows; '
                            + evals)]
  return progs


PAPER_SCALE = (
    'arXiv 2606.14971: pre-training mixtures over the Pile\'s 17 domains, '
    'searched with one 1M-parameter proxy (the released code\'s Llama '
    'config: hidden 256, 2 layers, 8 heads; z updated every 1000 steps) '
    'against RegMix\'s 512 proxies, then a 1B model trained on 25B tokens '
    'and scored on 14 benchmarks; and SFT of Qwen2.5-Math 7B over 8 '
    'domains. Batch sizes and step counts were not extracted.')


# -- run, claims, plots -------------------------------------------------------


def run(r: launch.Run) -> launch.Result:
  parts = {'synthetic': run_synthetic(r), 'lm': run_lm(r)}
  metrics = {}
  for part, s in parts.items():
    for n, v in s['test_loss'].items():
      metrics[f'{part}/test_loss_{n}'] = v
    for n, m in s['mix'].items():
      for i, src in enumerate(SOURCES):
        metrics[f'{part}/alpha_{n}_{src}'] = np.asarray(m)[..., i]
  _plots(r, parts)
  extra = {part: {'cost_grad_evals': s['cost'],
                  'wall_s': {k: round(v, 2) for k, v in s['wall'].items()},
                  'mixture_mean': {k: np.asarray(v).mean(0).round(4).tolist()
                                   if np.ndim(v) > 1 else
                                   np.asarray(v).round(4).tolist()
                                   for k, v in s['mix'].items()}}
           for part, s in parts.items()}
  return launch.Result(metrics=metrics,
                       claims=evaluate_claims(r.config, parts), extra=extra)


def _plots(r, parts) -> None:
  for part, s in parts.items():
    names = [n for n in METHODS if n in s['test_loss']]
    xs = np.arange(len(SOURCES))
    series = [(n, xs, np.asarray(s['mix'][n]).reshape(-1, len(SOURCES)).T)
              for n in names]
    plots.plot_series(series, r.plots_dir / f'{part}_mixtures.png',
                      title=f'{part}: mixture found per method',
                      xlabel=' | '.join(f'{i}: {n}' for i, n in
                                        enumerate(SOURCES)),
                      ylabel='alpha', bounds=(0.0, 1.0))


def _quality(q, loss, ref) -> tuple[bool, str]:
  """Final test loss (seed mean) <= RegMix (1 + tol) and <= uniform
  (1 - gain)."""
  m, rm, un = loss.mean(), ref['regmix'].mean(), ref['uniform'].mean()
  ok = m <= rm * (1 + q.regmix_tol) and m <= un * (1 - q.uniform_gain)
  return bool(ok), (f'{m:.4f} (RegMix {m / rm - 1:+.1%}, uniform '
                    f'{m / un - 1:+.1%})')


def part_claims(cfg, part: str, s: dict[str, Any]) -> list[launch.Claim]:
  """The three FastMix claims on one part, each with its control."""
  q = cfg.claims
  K = len(SOURCES)
  idx = {n: i for i, n in enumerate(SOURCES)}
  label = {'synthetic': '', 'lm': 'LM: '}[part]
  S = cfg.num_seeds

  def mixture_ok(mix):
    mix = np.asarray(mix)
    noise, useful = mix[:, idx['random_labels']], (
        mix[:, idx['target']] + mix[:, idx['shifted']])
    ok = bool(np.all(noise < q.max_noise) and np.all(useful > q.min_useful))
    return ok, (f'alpha_random_labels max {noise.max():.3f}, alpha_target + '
                f'alpha_shifted min {useful.min():.3f} over {S} seeds '
                f'(mean mixture {[round(float(v), 3) for v in mix.mean(0)]} '
                f'for '
                f'{list(SOURCES)})')

  ok, ev = mixture_ok(s['mix']['fastmix'])
  ok_c, ev_c = mixture_ok(s['mix']['fastmix_control'])
  claims = [launch.Claim(
      claim=(f'{label}FastMix\'s search ends with alpha < {q.max_noise:g} on '
             f'the random-label source and > {q.min_useful:g} on the two '
             'useful sources together, in every seed.'),
      holds=ok, evidence=ev,
      control=launch.control_text(
          'the same search validated on the unrelated task', ev_c, ok_c))]

  loss = s['test_loss']
  ok, ev = _quality(q, loss['fastmix'], loss)
  ok_c, ev_c = _quality(q, loss['fastmix_control'], loss)
  others = ', '.join(f'{n} {loss[n].mean():.4f}' for n in METHODS
                     if n in loss and n != 'fastmix')
  claims.append(launch.Claim(
      claim=(f'{label}A fresh model trained on FastMix\'s mixture reaches a '
             f'target test loss <= RegMix + {q.regmix_tol:.0%} and <= '
             f'uniform - {q.uniform_gain:.0%} (mean over {S} seeds).'),
      holds=ok, evidence=f'FastMix {ev}; {others}',
      control=launch.control_text(
          'the mixture of the search validated on the unrelated task', ev_c,
          ok_c)))

  cost, wall = s['cost'], s['wall']
  ratio = cost['fastmix'] / cost['regmix']
  ok_q, _ = _quality(q, loss['fastmix'], loss)
  ok_b, ev_b = _quality(q, loss['random_budget'], loss)
  claims.append(launch.Claim(
      claim=(f'{label}FastMix\'s search costs <= 1/{1 / q.max_cost_ratio:.0f} '
             'of RegMix\'s (per-example gradient evaluations) at RegMix\'s '
             'quality (the loss claim above).'),
      holds=bool(ratio <= q.max_cost_ratio and ok_q),
      evidence=(f'{cost["fastmix"]:,} vs {cost["regmix"]:,} gradient '
                f'evaluations per seed (1/{1 / ratio:.1f}; DoReMi '
                f'{cost["doremi"]:,}); wall clock of the {S}-seed searches '
                f'on {jax.devices()[0].platform}: FastMix '
                f'{wall["fastmix"]:.1f} s, RegMix {wall["regmix"]:.1f} s '
                f'({cfg[part].num_proxies} proxies as '
                f'{_groups(cfg[part], S)} vmapped phase(s), each compile '
                'included; benchmarks/fastmix.py times both compiled)'),
      control=launch.control_text(
          f'random search at FastMix\'s cost (the best on validation of '
          f'{s["m_budget"]} random proxies)', f'test loss {ev_b}', ok_b)))
  return claims


def evaluate_claims(cfg, parts) -> list[launch.Claim]:
  return [c for part, s in parts.items() for c in part_claims(cfg, part, s)]


def check_config(c: ml_collections.ConfigDict) -> None:
  for part in ('synthetic', 'lm'):
    a = c[part]
    cfg_lib.check(a.search_steps >= c.fastmix.n_inner, f'{part}.search_steps',
                  a.search_steps, f'>= fastmix.n_inner = {c.fastmix.n_inner} '
                  '(at least one outer step)')
  cfg_lib.check(c.regmix.top_k <= c.regmix.num_samples, 'regmix.top_k',
                c.regmix.top_k, f'<= regmix.num_samples = '
                f'{c.regmix.num_samples}')


_POS = cfg_lib.Int(min=1)
EXPERIMENT = launch.Experiment('fastmix', run, requires=lambda c: [
    ('lightgbm', 'stats')], schema={
    'num_seeds': cfg_lib.Int(min=2),
    'fastmix.n_inner': _POS,
    'fastmix.z_lr': cfg_lib.Float(min=0.0, min_inclusive=False),
    'fastmix.beta': cfg_lib.Float(min=0.0),
    'fastmix.lam': cfg_lib.Float(min=0.0),
    'fastmix.params': cfg_lib.Choice('all', 'head'),
    'doremi.eta': cfg_lib.Float(min=0.0, min_inclusive=False),
    'doremi.eps': cfg_lib.Float(min=0.0, max=1.0),
    'regmix.num_samples': _POS,
    'regmix.top_k': _POS,
    **{f'{part}.{k}': spec for part in ('synthetic', 'lm') for k, spec in (
        ('num_proxies', cfg_lib.Int(min=8)), ('oracle_mixtures', _POS),
        ('rows_per_call', cfg_lib.Int(min=0)),
        ('search_steps', _POS), ('final_steps', _POS), ('pool_size', _POS),
        ('batch_size', _POS), ('outer_batch', _POS), ('eval_every', _POS),
        ('lr', cfg_lib.Float(min=0.0, min_inclusive=False)))},
    'lm.length': cfg_lib.Int(min=2),
    'lm.shift_length': cfg_lib.Int(min=2),
}, check_fn=check_config)

if __name__ == '__main__':
  EXPERIMENT.main()
