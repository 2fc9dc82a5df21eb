"""hardware.layout=auto: the probe that measures this machine and env and picks the sampler's layout.

It runs in train.py's process once the run folder's decision is taken (a new run: a resumed one keeps the layout
its config.yaml saved), before the run's own processes start, within hardware.layout_probe_sec:

1. costs measured here, in this process (`measure_costs`): one env's step with random actions; the policy's
   acting call at a few batch sizes; the learner's gradient passes over one minibatch of the run's model, batch
   size, micro-batches, precision and device (a copy of the model: the run's initial weights are untouched);
2. the candidate layouts (app/layout.py `candidates`) ordered by the model of their training rate, and short
   sampler runs (`sampler_run`: the run's own Sampler, its processes started and stopped, the learner's passes
   in the loop) of the likeliest ones, at least one per kind of layout (in_worker/server, 1/2 splits) first, as
   long as the budget lasts (a run that would not fit is passed over for a smaller one; the first always runs);
3. the pick (app/layout.py `pick`): the best measured training rate.

Only train.py's process imports this module (the sampler's processes never do).
"""

from __future__ import annotations

import copy
import logging
import time
from typing import Dict, Iterable, List, Mapping, Optional, Tuple

import psutil
import torch
from omegaconf import open_dict

from sf_hydra.app.layout import Candidate, Costs, Measured, candidates, fixed_values, pick, ranked
from sf_hydra.config import ConfigError, validate
from sf_hydra.config.aliases import cores

log = logging.getLogger("sf_hydra")
ACT_BATCHES = (1, 4, 16, 64, 256)
HEAVY_OBS = 4096  # observation elements from which an env counts as image-like: fewer envs per worker
WARM_S, MEASURE_S = 2.0, 4.0  # a sampler run's warm-up and measurement (from an iteration's end to another's)
START_S = 1.0  # a sampler's start besides its envs' (processes, buffers)
MAX_RUNS = 12  # candidates considered for a sampler run, likeliest first
HEAVY_ENVS_PER_CORE = 16  # image-like envs in all, per core, at most (their buffers, their start-up in the probe)


def with_layout(cfg, values: Mapping[str, object]):
    """A copy of `cfg` with these hardware keys."""
    out = cfg.copy()
    with open_dict(out):
        for key, value in values.items():
            out.hardware[key] = value
    return out


def valid_candidates(cfg, cands: Iterable[Candidate]) -> List[Candidate]:
    """The candidates the config's own rules accept (algo.async_rl=false's round sizes, splits, ...)."""
    out = []
    for c in cands:
        try:
            validate(with_layout(cfg, c.values()))
        except ConfigError:
            continue
        out.append(c)
    return out


def _timed(fn, min_seconds: float, max_calls: int = 10_000) -> float:
    """Seconds per call of `fn` (after one warm-up call), over at least `min_seconds` or `max_calls` calls."""
    fn()
    calls, start = 0, time.perf_counter()
    while calls < max_calls and (calls < 3 or time.perf_counter() - start < min_seconds):
        fn()
        calls += 1
    return (time.perf_counter() - start) / calls


def env_step_seconds(cfg, seconds: float) -> float:
    """Seconds per step of one env built here, random actions, episodes reset as they end."""
    from sf_hydra.envs import make_env

    env = make_env(cfg.env, seed=cfg.seed)
    try:
        env.reset(seed=cfg.seed)
        env.action_space.seed(0 if cfg.seed is None else cfg.seed)

        def step():
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated is True or truncated is True:
                env.reset()

        return _timed(step, seconds)
    finally:
        env.close()


def random_obs(spec, rows: int, steps: Optional[int] = None) -> Dict[str, torch.Tensor]:
    """Observations of the trajectory spec's shapes and types, random: `[rows, *shape]` or `[rows, steps, *shape]`."""
    from sf_hydra.core.trajectory import OBS_PREFIX

    out = {}
    lead = (rows,) if steps is None else (rows, steps)
    for f in spec:
        if f.name.startswith(OBS_PREFIX):
            shape = (*lead, *f.shape)
            value = (torch.randint(0, 255, shape).to(f.dtype) if not f.dtype.is_floating_point
                     else torch.rand(shape, dtype=f.dtype))
            out[f.name[len(OBS_PREFIX):]] = value
    return out


def act_seconds(model, spec, seconds_each: float) -> Dict[int, float]:
    """Seconds per acting call of `model` at each of ACT_BATCHES rows (no gradients, as workers act)."""
    out = {}
    for rows in ACT_BATCHES:
        obs = random_obs(spec, rows)
        rnn = torch.zeros(rows, model.rnn_state_size) if model.rnn_state_size else None
        out[rows] = _timed(lambda: model.act(obs, rnn), seconds_each)
    return out


def learner_minibatch(plan, cfg):
    """(a function that runs one minibatch's forward and backward passes, in the run's micro-batches, precision
    and device, and its optimizer step, on a copy of the run's model and random data, transitions per call)."""
    algo, settings = cfg.algo, plan.learner
    device = torch.device(plan.learner_device)
    model = copy.deepcopy(plan.initial_policies[0]).to(device)
    opt = settings.optimizer(model.parameters()) if settings.optimizer else torch.optim.Adam(model.parameters())
    r = settings.recurrence
    chunks = max(1, algo.batch_size // r)
    obs = {k: v.to(device) for k, v in random_obs(plan.spec, chunks, r).items()}
    act_field = plan.spec["actions"]
    actions = torch.zeros(chunks, r, *act_field.shape, dtype=act_field.dtype, device=device)
    dones = torch.zeros(chunks, r, device=device)
    rnn = torch.zeros(chunks, model.rnn_state_size, device=device) if model.rnn_state_size else None
    step = max(1, settings.micro_batch // r) if settings.micro_batch > 0 else chunks

    def minibatch():
        opt.zero_grad(set_to_none=True)
        for i in range(0, chunks, step):
            part = slice(i, i + step)
            precision = torch.autocast(device.type, dtype=torch.bfloat16) if settings.bf16 else _nothing()
            with precision:
                lp, ent, v = model.evaluate({k: o[part] for k, o in obs.items()}, actions[part],
                                            None if rnn is None else rnn[part], dones[part])
            (-(lp.float().mean()) - 0.01 * ent.float().mean() + v.float().pow(2).mean()).backward()
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    return minibatch, chunks * r


def learner_seconds(cfg, minibatch, transitions: int, seconds: float) -> float:
    """Learner seconds per transition alone: a minibatch's passes times the epochs, over its transitions."""
    return _timed(minibatch, seconds, max_calls=50) * cfg.algo.num_epochs / transitions


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def measure_costs(cfg, plan, minibatch, transitions: int, seconds: float) -> Costs:
    """The costs of `Costs`, measured here within about `seconds`."""
    model = plan.initial_policies[0]
    env_s = env_step_seconds(cfg, seconds * 0.3)
    act = act_seconds(model, plan.spec, seconds * 0.3 / len(ACT_BATCHES))
    learner = learner_seconds(cfg, minibatch, transitions, seconds * 0.4)
    return Costs(cores(1), env_s, act, learner, learner_on_cpu=plan.learner_device == "cpu")


def _sampler_processes() -> List[psutil.Process]:
    return psutil.Process().children(recursive=True)


def _cpu(procs: List[psutil.Process]) -> Dict[int, float]:
    out = {}
    for p in procs:
        try:
            t = p.cpu_times()
            out[p.pid] = t.user + t.system
        except psutil.Error:
            pass
    return out


def sampler_run(cfg, info, c: Candidate, learner, warm: float, seconds: float) -> Measured:
    """The run's sampler in layout `c` with the learner's passes in the loop, as training runs them: slots are freed
    as their trajectories come (the learner copies them into the batch it gathers), and each time an iteration's
    transitions (batch_size x num_batches_per_epoch) have come, the iteration's minibatches (`learner`: (one
    minibatch's passes, its transitions)) run on random data, while the workers fill their free slots. After
    `warm` seconds, for `seconds`: transitions trained per second, the sampler processes' CPU seconds per
    transition sampled, and the share of the time the learner's passes took."""
    from sf_hydra.plan import plan_run
    from sf_hydra.sampler.sampler import Sampler

    minibatch, per_minibatch = learner
    passes = cfg.algo.num_epochs * cfg.algo.num_batches_per_epoch
    per_iteration = per_minibatch * cfg.algo.num_batches_per_epoch
    frameskip = int(cfg.env.frameskip)
    synchronous = not cfg.algo.async_rl  # workers wait for the learner between rounds
    plan = plan_run(with_layout(cfg, c.values()), info)
    sampler = Sampler(plan.sampler, plan.spec, plan.spaces, plan.initial_policies[0])
    sampler.publish(0, plan.initial_policies[0], 0)
    waiting = 0.0
    trained = sampled = busy = 0.0

    def step() -> Tuple[float, float, float]:
        nonlocal waiting
        traj = sampler.poll(timeout=0.05)
        if traj is not None:
            sampler.free(traj.slots)  # copied into the batch being gathered, as the learner does
            waiting += traj.frames / frameskip
        if waiting < per_iteration:
            return 0.0, (traj.frames / frameskip if traj is not None else 0.0), 0.0
        waiting -= per_iteration
        began = time.perf_counter()
        for _ in range(passes):
            minibatch()
        if synchronous and waiting < per_iteration:  # the round is trained: the workers start the next one
            sampler.release_round()
        return per_iteration, (traj.frames / frameskip if traj is not None else 0.0), time.perf_counter() - began

    try:
        sampler.start()
        deadline = time.perf_counter() + warm
        while time.perf_counter() < deadline:
            step()
        while step()[0] == 0 and time.perf_counter() < deadline + 3 * seconds:  # up to an iteration's end
            pass
        procs = _sampler_processes()
        cpu0, start = _cpu(procs), time.perf_counter()
        while True:  # from an iteration's end to another's: whole iterations only
            got, came, spent = step()
            trained, sampled, busy = trained + got, sampled + came, busy + spent
            now = time.perf_counter() - start
            if (now >= seconds and got > 0) or now >= 3 * seconds:
                break
        elapsed, cpu1 = time.perf_counter() - start, _cpu(procs)
    finally:
        sampler.stop()
    used = sum(cpu1[p] - cpu0[p] for p in cpu1 if p in cpu0)
    return Measured(trained / elapsed, used / sampled if sampled else float("inf"), busy / elapsed)


def to_run(ordered: List[Candidate]) -> List[Candidate]:
    """The order of the sampler runs: the likeliest of each kind (placement, splits) first, then the rest."""
    firsts, seen = [], set()
    for c in ordered:
        if (c.inference, c.splits) not in seen:
            seen.add((c.inference, c.splits))
            firsts.append(c)
    best = ordered[:1]
    return best + [c for c in firsts if c not in best] + [c for c in ordered if c not in firsts and c not in best]


def run_seconds(c: Candidate, per_env: float) -> float:
    """The expected seconds of a sampler run of layout `c` (its start grows with its envs, from those seen)."""
    return START_S + per_env * c.workers * c.envs + WARM_S + MEASURE_S * 1.5


def env_bounds(info, cores: int) -> Tuple[Tuple[int, ...], int]:
    """(envs per worker to try, most envs in all): image-like observations cost more per env (memory, start-up,
    an env process each for some families), so fewer of them, and at most HEAVY_ENVS_PER_CORE per core."""
    from sf_hydra.core.spaces import obs_shapes

    elements = max(int(torch.tensor(s).prod()) for s in obs_shapes(info.observation_space).values())
    if elements >= HEAVY_OBS:
        return (4, 8, 16, 32), HEAVY_ENVS_PER_CORE * cores
    return (8, 16, 32, 64), 512


def probe_layout(cfg, plan, info, fixed: Mapping[str, object]) -> Tuple[Dict[str, object], str]:
    """(the four layout keys picked, the line that says why) for `cfg`'s env on this machine, within
    hardware.layout_probe_sec; keys in `fixed` keep their values."""
    budget = float(cfg.hardware.layout_probe_sec)
    t0 = time.monotonic()
    learner = learner_minibatch(plan, cfg)
    costs = measure_costs(cfg, plan, *learner, min(6.0, budget * 0.15))
    counts, most = env_bounds(info, costs.cores)
    cands = valid_candidates(cfg, candidates(costs.cores, fixed, counts, most))
    if not cands:
        raise ConfigError("hardware.layout", "auto", "manual: no layout within the probe's bounds passes the config's "
                          f"rules with the keys typed ({', '.join(f'hardware.{k}={v}' for k, v in fixed.items())})")
    measured: Dict[Candidate, Measured] = {}
    per_env = 0.0  # seconds of a sampler's start per env, the most seen so far
    for c in to_run(ranked(cands, costs))[:MAX_RUNS]:
        left = budget - (time.monotonic() - t0)
        if left <= 0:
            break
        if measured and run_seconds(c, per_env) > left:
            continue  # a smaller layout may still fit
        began = time.monotonic()
        try:
            measured[c] = sampler_run(cfg, info, c, learner, warm=WARM_S, seconds=MEASURE_S)
        except Exception as e:  # a layout that does not start here (memory, processes) is passed over, named
            log.warning("hardware.layout=auto: layout %s failed in the probe (%s: %s)", c, type(e).__name__, e)
        log.debug("hardware.layout=auto: %s: %s in %.1f s", c, measured.get(c), time.monotonic() - began)
        start = time.monotonic() - began - WARM_S - MEASURE_S
        per_env = max(per_env, (start - START_S) / (c.workers * c.envs))
    if not any(m.rate > 0 for m in measured.values()):
        raise ConfigError("hardware.layout", "auto", "manual: no layout's sampler trained an iteration in the probe "
                          "(see the warnings; a larger hardware.layout_probe_sec gives each more time)")
    choice, why = pick(measured)
    seconds = time.monotonic() - t0
    frameskip = int(cfg.env.frameskip)
    line = (f"hardware.layout=auto: picked {choice} (why: measured {why}; {measured[choice].rate * frameskip:,.0f} "
            f"FPS in the probe, whose learner runs its passes only; probe {seconds:.1f} s)")
    return choice.values(), line


def apply_layout(cfg, typed: Iterable[str], plan, info) -> str:
    """hardware.layout=auto for a new run: probes, writes the pick into `cfg` (whose config.yaml then shows the
    concrete values) and returns the line that says why."""
    values, line = probe_layout(cfg, plan, info, fixed_values(cfg, typed))
    with open_dict(cfg):
        for key, value in values.items():
            cfg.hardware[key] = value
    return line

