"""Our PPO and kernel-PPO vs rejax's PPO (CartPole-v1) and brax.training's
PPO (Brax MJX inverted_pendulum), side by side in one process.

  python -m benchmarks.ppo [--updates=200] [--repeats=5] [--seeds=10]
                           [--solve_seeds=5] [--solve_budget=500000]
                           [--skip_throughput] [--skip_solve] [--skip_rejax]
                           [--skip_rejax_config] [--skip_brax]
                           [--brax_updates=20] [--brax_reset_pools=4,none]

The last line printed is the summary: ours / rejax at rejax's own config
(table 3) and ours / brax.training (table 4), ratios of medians.

Every agent runs the kernel-PPO paper's batch structure (configs/kernel_ppo.py
`ppo`/`npg` sections): 1 env x 128 steps per iteration, 4 epochs x 4
minibatches of 32, MLPs of 64x64.

Table 1, throughput (env steps per second, compile excluded): `--updates`
iterations compiled as one `core.loop.chunk_fn` call (scan over iterations,
vmap over seeds, exactly what the launcher runs), for 1 seed and for
`--seeds` seeds vmapped; each is compiled ahead of time and run once to
warm up, then `--repeats` rounds run every variant once in turn
(`block_until_ready`), and the median per variant is kept. Rows:

  PPO                   rl/ppo.py: GAE(0.95), separate actor and critic MLPs.
  PPO lambda=0          the same with gae_lambda=0: the reverse GAE scan still
                        runs (lambda is a Python float multiplied in, not a
                        branch), so this row should equal PPO's.
  PPO, no GAE scan      rollout.gae swapped (in this process only) for the
                        scan-free one-step TD advantage, numerically the same
                        as lambda=0 (checked): the cost of the scan itself.
  PPO, no scan/shuffle/ the previous row without minibatch shuffling, gradient
    clip/anneal         clipping and lr annealing, the remaining settings in
                        which kernel-PPO's config differs from PPO's.
  kernel-PPO network    rl/kernel_ppo.py make_network: ONE MLP is policy
                        logits and Q, one-step expected-SARSA TD target (one
                        extra forward pass on s'), no GAE, no shuffle.
  rejax PPO             rejax.PPO with the same batch, GAE and loss settings,
                        `jax.vmap` over `algo.train(train_state=...)`.

Table 2, time to solve: 5 seeds vmapped, budget 500k env steps, run in
chunks of `--solve_chunk` iterations and stopped once every seed solved
(rolling mean of the last 10 training episodes >= 475, as in
`state.solved_at`); per-seed wall-clock is the time at the end of the chunk in
which that seed solved (compile excluded).

Table 3, rejax's own CartPole config (its configs/gymnax/cartpole.yaml: 5
envs x 100 steps, 5 epochs x 5 minibatches, lr 7.5e-4, ent 0.01): our PPO
at the same settings (plus its own lr annealing and global-norm clip) and
rejax's, both timed as in table 1.

Table 4, Brax: our PPO at configs/kernel_ppo.py:brax's `ppo` section (64
envs x 32 steps, 4 epochs x 8 minibatches) on MJX inverted_pendulum, and
`brax.training.agents.ppo.train` at the same env, batch, network sizes and
loss settings; brax's PPO does not vmap over seeds, so both run 1 seed.
Ours runs one row per `--brax_reset_pools` entry: the adapter's reset pool
(default 4 entries per env, drawn once per rollout) and "none", a fresh MJX
reset per env per step (the adapter before the pool; see
`rl.envs.BraxEnv`). Both train for `--repeats` + 2 chunks (epochs) of
`--brax_updates` iterations and keep the median over the last `--repeats`:
brax's with its own `training/sps` per compiled epoch (the first two
include compiles), ours with the wall-clock of each compiled chunk call,
the rows taking turns. Timing the same training iterations matters: MJX's
cost per step depends on the states the policy visits (iterations 0-20 of
ours ran ~6% slower than 40-140 in one measurement, 20-40 slower still),
and brax.training cannot be rerun from its initial state.

rejax 0.1.3 notes (read from its source):
  * `rejax.PPO.create(env=..., env_params=..., num_envs, num_steps,
    num_epochs, num_minibatches, learning_rate, max_grad_norm, gamma,
    gae_lambda, clip_eps, vf_coef, ent_coef, total_timesteps, eval_freq,
    skip_initial_evaluation, agent_kwargs={'hidden_layer_sizes': (64, 64),
    'activation': 'tanh'})`; `algo.init_state(key)` and
    `algo.train(rng=None, train_state=None) -> (train_state, evaluations)`,
    a scan of `total_timesteps / eval_freq` blocks, each `eval_freq / (num_envs
    * num_steps)` iterations followed by `eval_callback(algo, ts, rng)`.
    Many seeds: `jax.vmap(algo.train)(keys)`.
  * rejax unpacks gymnax's step as 5 values (obs, state, reward, done,
    info); gymnax 1.0.1 returns 6 (terminated and truncated apart), so
    `PPO.create(env='CartPole-v1')` fails with "too many values to unpack".
    We pass `_FiveTupleEnv`, which returns done = terminated | truncated
    (rejax treats a time-limit cut as terminal; we bootstrap it).
  * The default eval callback rolls out 128 full episodes with a
    `while_loop`; for throughput it is replaced by a no-op, for time-to-solve
    by a read of episode statistics that `_FiveTupleEnv(track=True)` keeps in
    the env state, the same criterion as ours.
  * `max_grad_norm` is applied with `optax.clip` (each gradient element
    clipped to +-0.5), not a global-norm clip; learning rate is constant
    (ours anneals to 0 over the run); default network init (ours:
    orthogonal); separate Adam optimisers for actor and critic; clipped value
    loss.

A plain-PyTorch PPO row is not included: torch is not installed in this
environment (the script only reports whether it imports).

Initial states are built one seed at a time (`_init_states`): with
`loop.init_states` (vmapped init) runs hung now and then on this 2-core CPU,
a deadlock in jaxlib 0.10.2's batched CPU QR used by the orthogonal
initialiser (details in `_init_states`).
"""

from __future__ import annotations

import functools
from importlib import metadata
import os
import time
from typing import Any, NamedTuple
from unittest import mock

from absl import app
from absl import flags
import jax
import jax.numpy as jnp
import numpy as np

from configs import kernel_ppo as kppo_config
from iclrjax.core import loop
from iclrjax.rl import envs
from iclrjax.rl import kernel_ppo
from iclrjax.rl import ppo
from iclrjax.rl import rollout as ro

_UPDATES = flags.DEFINE_integer(
    'updates', 200, 'PPO iterations per timed run (x128 env steps per seed).')
_REPEATS = flags.DEFINE_integer('repeats', 5, 'Timed repeats (median).')
_SEEDS = flags.DEFINE_integer('seeds', 10, 'Seeds of the vmapped timing.')
_SOLVE_SEEDS = flags.DEFINE_integer('solve_seeds', 5, 'Seeds, time-to-solve.')
_SOLVE_BUDGET = flags.DEFINE_integer('solve_budget', 500_000,
                                     'Env steps per seed, time-to-solve.')
_SOLVE_CHUNK = flags.DEFINE_integer(
    'solve_chunk', 20, 'Iterations per compiled call in the time-to-solve '
    'runs (the granularity of the wall-clock and of early stopping).')
_SKIP_SOLVE = flags.DEFINE_bool('skip_solve', False, 'Leave out table 2.')
_SKIP_THROUGHPUT = flags.DEFINE_bool('skip_throughput', False,
                                     'Leave out table 1.')
_SKIP_REJAX = flags.DEFINE_bool('skip_rejax', False, 'Leave rejax out.')
_SKIP_REJAX_CONFIG = flags.DEFINE_bool(
    'skip_rejax_config', False, 'Leave out table 3 (rejax\'s own config).')
_SKIP_BRAX = flags.DEFINE_bool('skip_brax', False,
                               'Leave out table 4 (Brax/MJX).')
_BRAX_UPDATES = flags.DEFINE_integer(
    'brax_updates', 20, 'PPO iterations per timed run in table 4 (x2048 '
    'env steps).')
_BRAX_POOLS = flags.DEFINE_list(
    'brax_reset_pools', ['4', 'none'], 'Table 4: one row of our PPO per '
    'BraxEnv reset_pool (entries per env; "none": a fresh MJX reset per env '
    'per step, the adapter before the pool). The first is the headline '
    'ratio; 4 is the default.')

ENV = 'CartPole-v1'
WINDOW, THRESHOLD = 10, 475.0


# ---------------------------------------------------------------------------
# Our agents.


def _one_step_advantage(reward, value, next_value, terminated, done, gamma,
                        lam):
  """GAE with lambda = 0 without the reverse scan (same numbers)."""
  del done, lam
  adv = reward + gamma * (1.0 - terminated) * next_value - value
  return adv, adv + value


def _ppo_config(**overrides) -> Any:
  c = kppo_config.get_config().ppo
  c.update(overrides)
  ppo.check_config(c)
  return c


class _Agent(NamedTuple):
  init: Any              # init(key[, arg]) -> state
  step: Any              # step(state, t) -> (state, metrics)
  arg: float | None      # per-seed init argument (kernel-PPO's power)
  no_scan: bool = False  # trace with rollout.gae patched out


def _our_agents(num_updates: int) -> dict[str, _Agent]:
  env = envs.make(ENV)
  kw = dict(num_updates=num_updates, return_window=WINDOW,
            solve_threshold=THRESHOLD)
  agents = {}
  agents['PPO (GAE 0.95)'] = _Agent(*ppo.make_ppo(env, _ppo_config(), **kw),
                                    None)
  agents['PPO lambda=0'] = _Agent(
      *ppo.make_ppo(env, _ppo_config(gae_lambda=0.0), **kw), None)
  agents['PPO, no GAE scan'] = _Agent(
      *ppo.make_ppo(env, _ppo_config(gae_lambda=0.0), **kw), None, True)
  agents['PPO, no scan/shuf/clip'] = _Agent(
      *ppo.make_ppo(env, _ppo_config(gae_lambda=0.0, shuffle=False,
                                     max_grad_norm=None, anneal_lr=False),
                    **kw), None, True)
  npg = kppo_config.get_config().npg
  agents['kernel-PPO network'] = _Agent(
      *kernel_ppo.make_network(env, npg, return_window=WINDOW,
                               solve_threshold=THRESHOLD), 0.5)
  return agents


def _init_states(agent: _Agent, keys: jax.Array) -> Any:
  """`loop.init_states(init, keys)` computed one seed at a time.

  Works around a deadlock in jaxlib 0.10.2's CPU QR kernel: a batched
  `geqrf` (the orthogonal initialiser under `vmap`) splits its batch over the
  2-thread intra-op pool and waits inside a pool thread (`ParallelBatchMap` ->
  `BlockingCounter::Wait`); two such QRs running at once (the actor and critic
  layers) wait on each other forever. With one seed per call there is no
  batch to split. Same states up to rounding; not timed.
  """
  f = jax.jit(agent.init)
  if agent.arg is None:
    states = [f(k) for k in keys]
  else:
    states = [f(k, jnp.float32(agent.arg)) for k in keys]
  return jax.tree.map(lambda *xs: jnp.stack(xs), *states)


def _compile_ours(agent: _Agent, num_seeds: int, chunk: int):
  """(compiled chunk f(states, start), initial states, compile seconds)."""
  states = _init_states(agent, loop.seed_keys(0, num_seeds))
  f = loop.chunk_fn(agent.step, chunk, donate=False)
  t0 = time.perf_counter()
  if agent.no_scan:
    with mock.patch.object(ro, 'gae', _one_step_advantage):
      compiled = f.lower(states, jnp.int32(0)).compile()
  else:
    compiled = f.lower(states, jnp.int32(0)).compile()
  return compiled, states, time.perf_counter() - t0


# ---------------------------------------------------------------------------
# rejax.


class _Tracked(NamedTuple):
  inner: Any
  ep_return: jax.Array  # return of the episode in progress
  recent: jax.Array     # [WINDOW] last finished returns (NaN while unfilled)
  count: jax.Array      # finished episodes


class _FiveTupleEnv:
  """gymnax 1.0 env -> the 5-value step API rejax 0.1.3 expects.

  done = terminated | truncated. With `track=True` the env state also keeps
  the last WINDOW finished episode returns, so a cheap eval callback can
  apply our solve criterion to rejax's training episodes.
  """

  def __init__(self, env, track: bool = False):
    self.env = env
    self.track = track

  def __getattr__(self, name):  # observation_space, action_space, name, ...
    if name.startswith('__') or name in ('env', 'track'):
      raise AttributeError(name)
    return getattr(self.env, name)

  def reset(self, key, params=None):
    obs, state = self.env.reset(key, params)
    if self.track:
      state = _Tracked(state, jnp.zeros(()), jnp.full((WINDOW,), jnp.nan),
                       jnp.zeros((), jnp.int32))
    return obs, state

  def step(self, key, state, action, params=None):
    inner = state.inner if self.track else state
    obs, inner, reward, terminated, truncated, info = self.env.step(
        key, inner, action, params)
    done = jnp.logical_or(terminated, truncated)
    if not self.track:
      return obs, inner, reward, done, info
    ret = state.ep_return + reward
    recent = jnp.where(done, state.recent.at[state.count % WINDOW].set(ret),
                       state.recent)
    state = _Tracked(inner, jnp.where(done, 0.0, ret), recent,
                     state.count + done.astype(jnp.int32))
    return obs, state, reward, done, info


def _make_rejax(total_timesteps: int, eval_freq: int, track: bool,
                c: Any = None):
  import gymnax  # pylint: disable=g-import-not-at-top
  import rejax  # pylint: disable=g-import-not-at-top
  c = c or kppo_config.get_config().ppo
  env, params = gymnax.make(ENV)
  algo = rejax.PPO.create(
      env=_FiveTupleEnv(env, track), env_params=params,
      num_envs=c.num_envs, num_steps=c.num_steps, num_epochs=c.num_epochs,
      num_minibatches=c.num_minibatches, learning_rate=c.learning_rate,
      max_grad_norm=c.max_grad_norm, gamma=c.gamma, gae_lambda=c.gae_lambda,
      clip_eps=c.clip_eps, vf_coef=c.vf_coef, ent_coef=c.ent_coef,
      normalize_observations=c.normalize_obs,
      total_timesteps=total_timesteps, eval_freq=eval_freq,
      skip_initial_evaluation=True,
      agent_kwargs={'hidden_layer_sizes': tuple(c.hidden),
                    'activation': c.activation})
  if track:
    def solve_stats(algo, ts, rng):
      del algo, rng
      s = ts.env_state  # leaves [num_envs, ...]; num_envs = 1 here
      return (ts.global_step, jnp.nanmean(s.recent),
              jnp.min(s.count) >= WINDOW)
    callback = solve_stats
  else:
    callback = lambda algo, ts, rng: jnp.zeros(())
  return algo.replace(eval_callback=callback)


def _compile_rejax(algo, num_seeds: int):
  keys = loop.seed_keys(0, num_seeds)
  states = jax.vmap(algo.init_state)(keys)
  f = jax.jit(jax.vmap(lambda ts: algo.train(train_state=ts)))
  t0 = time.perf_counter()
  compiled = f.lower(states).compile()
  return compiled, states, time.perf_counter() - t0


def _rejax_status() -> str | None:
  """None if rejax imports, else why not."""
  try:
    import rejax  # pylint: disable=g-import-not-at-top,unused-import
  except ImportError as e:
    return f'rejax not importable ({e}); pip install -e ".[bench]"'
  return None


# ---------------------------------------------------------------------------
# Timing.


def _throughput(agents, rejax_ok: bool, updates: int, repeats: int,
                seeds: int, c: Any = None):
  """Compiles every (variant, seed count), then times them interleaved.

  Each variant is compiled and run once (warm-up and a check that it ran
  `updates` iterations); then `repeats` rounds each run every variant once,
  so a transient load on the machine hits all rows alike, and the median
  over rounds is kept.
  """
  c = c or kppo_config.get_config().ppo
  batch = c.num_envs * c.num_steps
  runs = {}      # (name, n) -> zero-argument function returning the result
  compile_s = {}
  finals: dict[str, Any] = {}
  for name, agent in agents.items():
    for n in (1, seeds):
      f, states, compile_s[name, n] = _compile_ours(agent, n, updates)
      runs[name, n] = functools.partial(f, states, jnp.int32(0))
      out_states, metrics = runs[name, n]()
      steps = np.asarray(metrics['env_steps'])[:, -1]
      assert (steps == updates * batch).all(), steps
      if n == seeds:
        finals[name] = out_states.params
  if rejax_ok:
    algo = _make_rejax(updates * batch, updates * batch, track=False, c=c)
    for n in (1, seeds):
      f, states, compile_s['rejax PPO', n] = _compile_rejax(algo, n)
      runs['rejax PPO', n] = functools.partial(f, states)
      steps = np.asarray(runs['rejax PPO', n]()[0].global_step)
      assert (steps == updates * batch).all(), steps
  print(f'  compiled and warmed up {len(runs)} programs; timing {repeats} '
        'interleaved rounds', flush=True)
  times = {k: [] for k in runs}
  for _ in range(repeats):
    for k, run in runs.items():
      t0 = time.perf_counter()
      jax.block_until_ready(run())
      times[k].append(time.perf_counter() - t0)
  rows: dict[str, dict[int, tuple[float, float]]] = {}
  for (name, n), ts in times.items():
    t = float(np.median(ts))
    rows.setdefault(name, {})[n] = (n * updates * batch / t,
                                    compile_s[name, n])
    print(f'  {name:<24} seeds={n:<3} median {t:6.3f} s  '
          f'(min {min(ts):.3f}, max {max(ts):.3f})', flush=True)
  return rows, finals


def _print_throughput(rows, seeds: int, updates: int):
  base = rows['PPO (GAE 0.95)']
  print(f'\nTable 1. Env steps/s on {ENV}, 1 env x 128 steps, 4 epochs x 4 '
        f'minibatches of 32, 64x64; {updates} iterations '
        f'({updates * 128:,} env steps per seed) per compiled call; '
        'compile excluded.')
  hdr = (f'{"variant":<26}{"1 seed":>12}{"x PPO":>8}'
         f'{f"{seeds} seeds":>12}{"x PPO":>8}{"compile s":>11}')
  print(hdr)
  print('-' * len(hdr))
  for name, r in rows.items():
    s1, c1 = r[1]
    sn, cn = r[seeds]
    print(f'{name:<26}{s1:>12,.0f}{s1 / base[1][0]:>8.2f}'
          f'{sn:>12,.0f}{sn / base[seeds][0]:>8.2f}{max(c1, cn):>11.1f}')
  print('("1 seed": a vmapped seed axis of size 1; the launcher pads a lone '
        'seed to 2. compile s: the larger of the two compiles.)')


def _print_attribution(rows, seeds: int):
  """Splits kernel-PPO's speed-up over PPO into multiplicative factors."""
  names = ['PPO (GAE 0.95)', 'PPO, no GAE scan', 'PPO, no scan/shuf/clip',
           'kernel-PPO network']
  labels = ['the GAE scan (PPO -> no GAE scan)',
            'shuffle + grad clip + anneal (-> no scan/shuf/clip)',
            'one shared MLP + one-step TD target (-> kernel-PPO)']
  print('\nWhere kernel-PPO\'s speed-up over PPO comes from (ratios of '
        'steps/s; they multiply to the total):')
  print(f'{"factor":<54}{"1 seed":>9}{f"{seeds} seeds":>11}')
  for n_from, n_to, label in zip(names, names[1:], labels):
    print(f'{label:<54}{rows[n_to][1][0] / rows[n_from][1][0]:>9.2f}'
          f'{rows[n_to][seeds][0] / rows[n_from][seeds][0]:>11.2f}')
  print(f'{"total (PPO -> kernel-PPO)":<54}'
        f'{rows[names[-1]][1][0] / rows[names[0]][1][0]:>9.2f}'
        f'{rows[names[-1]][seeds][0] / rows[names[0]][seeds][0]:>11.2f}')
  lam0 = rows['PPO lambda=0']
  print('(PPO lambda=0 / PPO: '
        f'{lam0[1][0] / rows[names[0]][1][0]:.2f} at 1 seed, '
        f'{lam0[seeds][0] / rows[names[0]][seeds][0]:.2f} at {seeds} seeds: '
        'lambda=0 does not skip the scan, it only zeroes the trace.)')


# ---------------------------------------------------------------------------
# Time to solve.


class _SolveResult(NamedTuple):
  solved_at: np.ndarray  # [seeds] env steps, -1 if never
  solved_s: np.ndarray   # [seeds] wall seconds, nan if never
  wall_s: float          # whole run (until all solved or budget)
  env_steps: int         # per seed, run until then
  compile_s: float


def _solve_ours(agent: _Agent, seeds: int, num_updates: int,
                chunk: int) -> _SolveResult:
  f, states, compile_s = _compile_ours(agent, seeds, chunk)
  solved_s = np.full(seeds, np.nan)
  t0 = time.perf_counter()
  start = 0
  while start < num_updates:
    states, _ = f(states, jnp.int32(start))
    start += chunk
    solved = np.asarray(states.solved_at)  # blocks
    solved_s = np.where((solved >= 0) & np.isnan(solved_s),
                        time.perf_counter() - t0, solved_s)
    if (solved >= 0).all():
      break
  return _SolveResult(solved, solved_s, time.perf_counter() - t0,
                      start * 128, compile_s)


def _solve_rejax(seeds: int, num_updates: int, chunk: int) -> _SolveResult:
  algo = _make_rejax(chunk * 128, 128, track=True)
  f, states, compile_s = _compile_rejax(algo, seeds)
  solved_at = np.full(seeds, -1)
  solved_s = np.full(seeds, np.nan)
  t0 = time.perf_counter()
  start = 0
  while start < num_updates:
    states, (step, ret, full) = f(states)
    start += chunk
    step, ret, full = np.asarray(step), np.asarray(ret), np.asarray(full)
    hit = full & (ret >= THRESHOLD)  # [seeds, chunk]
    first = np.where(hit.any(1), step[np.arange(seeds), hit.argmax(1)], -1)
    new = (solved_at < 0) & (first >= 0)
    solved_at = np.where(new, first, solved_at)
    solved_s = np.where(new, time.perf_counter() - t0, solved_s)
    if (solved_at >= 0).all():
      break
  return _SolveResult(solved_at, solved_s, time.perf_counter() - t0,
                      start * 128, compile_s)


def _print_solve(results: dict[str, _SolveResult], seeds: int, budget: int):
  print(f'\nTable 2. Time to solve {ENV} (rolling mean of the last '
        f'{WINDOW} training episodes >= {THRESHOLD:g}), {seeds} seeds '
        f'vmapped, budget {budget:,} env steps per seed; stopped when all '
        'seeds solved; compile excluded.')
  hdr = (f'{"agent":<22}{"solved":>8}{"env steps median [min, max]":>33}'
         f'{"wall s median/max":>19}{"run s":>8}{"steps/s":>10}')
  print(hdr)
  print('-' * len(hdr))
  for name, r in results.items():
    ok = r.solved_at >= 0
    if ok.any():
      s = r.solved_at[ok]
      steps = (f'{np.median(s):,.0f} [{s.min():,}, {s.max():,}]')
      wall = f'{np.median(r.solved_s[ok]):.1f} / {r.solved_s[ok].max():.1f}'
    else:
      steps, wall = '-', '-'
    rate = seeds * r.env_steps / r.wall_s
    print(f'{name:<22}{f"{ok.sum()}/{seeds}":>8}{steps:>33}{wall:>19}'
          f'{r.wall_s:>8.1f}{rate:>10,.0f}')
  print('(wall s: time at the end of the chunk in which a seed solved; the '
        'seeds share one vmapped run, so a seed\'s wall time includes the '
        'others\' compute. Solve steps are rounded up to the iteration.)')



# ---------------------------------------------------------------------------
# Table 3: rejax's own CartPole config.

# rejax's configs/gymnax/cartpole.yaml, `ppo` section (keraJLi/rejax@main);
# network: its default 64x64, tanh; observations not normalised.
REJAX_CARTPOLE = dict(num_envs=5, num_steps=100, num_epochs=5,
                      num_minibatches=5, learning_rate=7.5e-4,
                      max_grad_norm=0.5, gamma=0.99, gae_lambda=0.95,
                      clip_eps=0.2, ent_coef=0.01, vf_coef=0.5,
                      normalize_obs=False, hidden=(64, 64), activation='tanh')


def _rejax_config_table(updates: int, repeats: int, seeds: int):
  c = _ppo_config(**REJAX_CARTPOLE)
  agent = _Agent(*ppo.make_ppo(envs.make(ENV), c, num_updates=updates),
                 None)
  rows, _ = _throughput({'PPO (ours)': agent}, True, updates, repeats, seeds,
                        c)
  batch = c.num_envs * c.num_steps
  print(f'\nTable 3. Env steps/s on {ENV} at rejax\'s own config '
        f'(configs/gymnax/cartpole.yaml: {c.num_envs} envs x {c.num_steps} '
        f'steps, {c.num_epochs} epochs x {c.num_minibatches} minibatches, '
        f'lr {c.learning_rate:g}, 64x64 tanh); {updates} iterations '
        f'({updates * batch:,} env steps per seed) per compiled call.')
  hdr = f'{"agent":<16}{"1 seed":>12}{f"{seeds} seeds":>14}{"compile s":>11}'
  print(hdr)
  print('-' * len(hdr))
  for name, r in rows.items():
    print(f'{name:<16}{r[1][0]:>12,.0f}{r[seeds][0]:>14,.0f}'
          f'{max(r[1][1], r[seeds][1]):>11.1f}')
  ours, rj = rows['PPO (ours)'], rows['rejax PPO']
  print(f'ours / rejax: {ours[1][0] / rj[1][0]:.2f}x at 1 seed, '
        f'{ours[seeds][0] / rj[seeds][0]:.2f}x at {seeds} seeds '
        '(ratio of medians).')
  return {n: ours[n][0] / rj[n][0] for n in (1, seeds)}


# ---------------------------------------------------------------------------
# Table 4: Brax/MJX, ours vs brax.training.agents.ppo.

BRAX_ENV = 'inverted_pendulum'


def _brax_training_sps(c: Any, updates: int, repeats: int) -> list[float]:
  """brax.training's PPO on the same env and batch, timed by brax itself.

  Batch mapping: brax collects `batch_size * num_minibatches / num_envs`
  unrolls of `unroll_length` per training step, so num_envs = E,
  unroll_length = T, batch_size = E / M, num_minibatches = M and
  num_updates_per_batch = epochs give our E x T rollout and M minibatches.
  `train` runs `num_evals - 1` compiled epochs of `updates` training steps
  and reports each epoch's `training/sps` (its own wall clock around the
  jitted epoch, `block_until_ready`); the first two epochs include
  compiles and are dropped. Evaluation is off (`run_evals=False`).
  """
  import flax.linen as nn  # pylint: disable=g-import-not-at-top
  from brax import envs as brax_envs  # pylint: disable=g-import-not-at-top
  from brax.training.agents.ppo import networks as bppo_networks  # pylint: disable=g-import-not-at-top
  from brax.training.agents.ppo import train as bppo  # pylint: disable=g-import-not-at-top

  env = brax_envs.get_environment(BRAX_ENV, backend='mjx')
  E, T, M = c.num_envs, c.num_steps, c.num_minibatches
  sps = []
  factory = functools.partial(
      bppo_networks.make_ppo_networks,
      policy_hidden_layer_sizes=tuple(c.hidden),
      value_hidden_layer_sizes=tuple(c.hidden),
      activation={'tanh': nn.tanh, 'relu': nn.relu}[c.activation])
  with mock.patch.object(jax, 'device_put_replicated',
                         _device_put_replicated, create=True):
    bppo.train(
        environment=env, num_timesteps=(repeats + 2) * updates * E * T,
        episode_length=1000, num_envs=E, unroll_length=T,
        batch_size=E // M, num_minibatches=M,
        num_updates_per_batch=c.num_epochs, learning_rate=c.learning_rate,
        entropy_cost=c.ent_coef, discounting=c.gamma,
        gae_lambda=c.gae_lambda, clipping_epsilon=c.clip_eps,
        max_grad_norm=c.max_grad_norm,
        normalize_observations=c.normalize_obs, network_factory=factory,
        num_evals=repeats + 3, run_evals=False, num_eval_envs=1, seed=0,
        progress_fn=lambda step, m: sps.append(float(m['training/sps'])))
  # Epoch 1 compiles; epoch 2 compiles again (its input state comes from
  # pmap, not from the replicated initial state); the rest are timed.
  return sps[2:]


def _device_put_replicated(x: Any, devices: list[Any]) -> Any:
  """`jax.device_put_replicated`, which brax 0.14.2's PPO still calls and
  jax 0.10 removed (it raises AttributeError): each leaf stacked once per
  device on a new leading axis, sharded over those devices (what `pmap`
  expects)."""
  mesh = jax.sharding.Mesh(np.asarray(devices), ('d',))
  sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec('d'))
  return jax.tree.map(
      lambda a: jax.device_put(jnp.stack([jnp.asarray(a)] * len(devices)),
                               sharding), x)


def _brax_table(updates: int, repeats: int,
                pools: list[str]) -> dict[str, float]:
  c = kppo_config.get_config('brax').ppo
  batch = c.num_envs * c.num_steps
  chunks = repeats + 2  # brax.training's epochs: 2 dropped, then timed
  fns, states, compile_s = {}, {}, {}
  for pool in pools:
    q = None if pool.lower() == 'none' else int(pool)
    env = envs.make('brax:' + BRAX_ENV, reset_pool=q)
    agent = _Agent(*ppo.make_ppo(env, c, num_updates=chunks * updates), None)
    name = (f'PPO (ours), reset pool {q}' if q is not None else
            'PPO (ours), reset per step')
    fns[name], states[name], compile_s[name] = _compile_ours(agent, 1,
                                                             updates)
  # One training run per row, timed chunk by chunk at the same iterations
  # as brax's timed epochs: the physics' cost depends on the states the
  # policy visits (MJX's constraint solver iterates until every env
  # converges), so repeating the first chunk would time an untrained policy
  # against brax's learning one. Rows take turns chunk by chunk.
  ours = {name: [] for name in fns}
  for k in range(chunks):
    for name, f in fns.items():
      t0 = time.perf_counter()
      states[name], _ = jax.block_until_ready(
          f(states[name], jnp.int32(k * updates)))
      if k >= 2:
        ours[name].append(updates * batch / (time.perf_counter() - t0))
  t0 = time.perf_counter()
  brax_sps = _brax_training_sps(c, updates, repeats)
  brax_wall = time.perf_counter() - t0
  b = float(np.median(brax_sps))
  print(f'\nTable 4. Env steps/s on Brax MJX {BRAX_ENV} (configs/'
        f'kernel_ppo.py:brax `ppo`: {c.num_envs} envs x {c.num_steps} steps, '
        f'{c.num_epochs} epochs x {c.num_minibatches} minibatches, '
        f'{"x".join(map(str, c.hidden))} {c.activation}, normalised '
        f'observations), 1 seed, {updates} iterations ({updates * batch:,} '
        f'env steps) per timed chunk, chunks 3-{chunks} of one training run; '
        'compile excluded.')
  hdr = f'{"agent":<32}{"steps/s":>10}{"min":>10}{"max":>10}{"x brax":>8}'
  print(hdr)
  print('-' * len(hdr))
  for name, sps in ours.items():
    o = float(np.median(sps))
    print(f'{name:<32}{o:>10,.0f}{min(sps):>10,.0f}{max(sps):>10,.0f}'
          f'{o / b:>8.2f}   (compile {compile_s[name]:.1f} s)')
  print(f'{"brax.training PPO":<32}{b:>10,.0f}{min(brax_sps):>10,.0f}'
        f'{max(brax_sps):>10,.0f}{1.0:>8.2f}   (whole train() '
        f'{brax_wall:.1f} s)')
  head = next(iter(ours))
  o = float(np.median(ours[head]))
  print(f'ours ({head}) / brax.training: {o / b:.2f}x (ratio of medians '
        f'over training iterations {2 * updates}-{chunks * updates} of one '
        'run each; brax times its own epochs).')
  print('(brax.training: its EpisodeWrapper/AutoResetWrapper (every episode '
        'of an env restarts from that env\'s first state), tanh-normal '
        'policy with a learned scalar std, lecun-uniform init, no truncation '
        'bootstrap by default; ours: fresh-random resets (reset pool: E x Q '
        'i.i.d. draws per rollout, see rl.envs.BraxEnv), bootstrapped time '
        'limits.)')
  return {'brax.training': o / b}

# ---------------------------------------------------------------------------


def main(argv):
  del argv
  t_start = time.perf_counter()
  load = os.getloadavg()
  print(f'backend={jax.default_backend()} devices={jax.device_count()} '
        f'cpus={os.cpu_count()} jax={jax.__version__} '
        f'load average at start={load[0]:.2f}')
  rejax_why = 'skipped (--skip_rejax)' if _SKIP_REJAX.value else (
      _rejax_status())
  rejax_ok = rejax_why is None
  if rejax_ok:
    print(f'rejax={metadata.version("rejax")} gymnax='
          f'{metadata.version("gymnax")} (rejax runs through _FiveTupleEnv: '
          'gymnax 1.0 returns 6 values from step, rejax expects 5)')
  else:
    print(f'rejax: {rejax_why}')
  try:
    import torch  # pylint: disable=g-import-not-at-top,unused-import
    print('torch is importable, but no plain-PyTorch row is implemented.')
  except ImportError:
    print('torch is not installed: no plain-PyTorch PPO row (not installed '
          'on purpose).')

  updates, seeds = _UPDATES.value, _SEEDS.value
  if not _SKIP_THROUGHPUT.value:
    agents = _our_agents(updates)
    print('\nTiming throughput ...', flush=True)
    rows, finals = _throughput(agents, rejax_ok, updates, _REPEATS.value,
                               seeds)
    diff = max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(
        jax.tree.leaves(finals['PPO lambda=0']),
        jax.tree.leaves(finals['PPO, no GAE scan'])))
    _print_throughput(rows, seeds, updates)
    _print_attribution(rows, seeds)
    print(f'(check: final params of "PPO lambda=0" and "PPO, no GAE scan" '
          f'differ by at most {diff:.1e} after {updates} iterations.)')

  if not _SKIP_SOLVE.value:
    chunk = _SOLVE_CHUNK.value
    n_seeds, budget = _SOLVE_SEEDS.value, _SOLVE_BUDGET.value
    num_updates = (budget // (128 * chunk)) * chunk
    solve_agents = _our_agents(num_updates)  # lr anneals over the budget
    results = {}
    print('\nTime to solve ...', flush=True)
    for name, label in (('PPO (GAE 0.95)', 'PPO (GAE 0.95)'),
                        ('kernel-PPO network', 'kernel-PPO p=0.5')):
      results[label] = _solve_ours(solve_agents[name], n_seeds, num_updates,
                                   chunk)
      print(f'  ran {label}: {results[label].wall_s:.1f} s', flush=True)
    if rejax_ok:
      results['rejax PPO'] = _solve_rejax(n_seeds, num_updates, chunk)
      print(f'  ran rejax PPO: {results["rejax PPO"].wall_s:.1f} s',
            flush=True)
    _print_solve(results, n_seeds, num_updates * 128)
    if rejax_ok:
      print('(rejax: lr constant 2.5e-4 and element-wise grad clip, ours '
            'anneals lr and clips the global norm; rejax counts the '
            'same training episodes through _FiveTupleEnv(track=True).)')
  ratios = {}
  if rejax_ok and not _SKIP_REJAX_CONFIG.value:
    print('\nTiming rejax\'s own CartPole config ...', flush=True)
    r = _rejax_config_table(updates, _REPEATS.value, seeds)
    ratios.update({f'rejax ({n} seed{"s" * (n > 1)})': v
                   for n, v in r.items()})
  if not _SKIP_BRAX.value:
    print('\nTiming Brax/MJX ...', flush=True)
    ratios.update(_brax_table(_BRAX_UPDATES.value, _REPEATS.value,
                              _BRAX_POOLS.value))
  if ratios:
    print('\nSummary, ours / peer (env steps/s): ' + ', '.join(
        f'{k} {v:.2f}x' for k, v in ratios.items()))
  load = os.getloadavg()
  print(f'\nload average at end={load[0]:.2f}; total '
        f'{time.perf_counter() - t_start:.0f} s')


if __name__ == '__main__':
  app.run(main)
