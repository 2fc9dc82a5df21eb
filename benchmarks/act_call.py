"""What one acting step of a rollout worker costs, by component, in this process.

    python benchmarks/act_call.py                       # CartPole 16 and 32 rows, Doom basic 8 rows
    python benchmarks/act_call.py --cases cartpole:16 --calls 2000 --repeats 7

Builds a serial-mode sampler with one worker (hardware.num_workers=1, one split of `rows` envs),
takes one rollout so its observations are real, then times, with process CPU time and torch on
one thread, `calls` calls of each component in turn, the components alternating within every
repeat (so that a busy machine hurts them alike), and prints the medians in microseconds per call:

- `worker step`: the worker's whole acting step (`_act` on the split, `_policy_record`, the staging
  write): what a rollout pays per split and step besides the envs;
- `_act`: the numpy -> torch views, the RNN state slice, the model's act;
- `model.act`: the model's own act alone; `policies_act (1 policy)`: what the worker acts with
  (FusedPolicies' flat layer list where the model allows it, else model.act);
- `preprocess`, `tower`, `value head`, `head logits`: the forward's parts;
- `sample (multinomial)` against `sample (gumbel)`: the categorical draw from the logits, as the base
  code did it (log-softmax, torch.multinomial, gather) and by Gumbel-max (what MultiCategorical.act does
  now); `sample (current)`: the head as the model acts with it (its linear layer, the distribution, its act);
- `record + write`: `_policy_record` and `RolloutStaging.write` of one step;
- `2 policies (act_per_policy)`: the same rows split between two policies, what algo.num_policies=2
  does per split, against `2 policies (fused)` when the models can act fused
  (sf_hydra.models.actor_critic.FusedPolicies).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, print_table  # noqa: E402

ENVS = {"cartpole": ["env=gym/cartpole"], "doom": ["env=doom/basic"]}


def build_worker(env: str, rows: int, extra):
    from hydra import compose, initialize_config_dir

    from sf_hydra.config import register_configs, validate
    from sf_hydra.plan import plan_run
    from sf_hydra.sampler.env_info import describe_env
    from sf_hydra.sampler.sampler import Sampler

    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("train", overrides=[*ENVS[env], "hardware.serial_mode=true", "hardware.num_workers=1",
                                          f"hardware.num_envs_per_worker={rows}", "hardware.worker_num_splits=1",
                                          "hardware.decorrelate_envs_on_one_worker=false", *extra])
    validate(cfg)
    plan = plan_run(cfg, describe_env(cfg.env, seed=cfg.seed))
    model = plan.initial_policies[0]
    sampler = Sampler(plan.sampler, plan.spec, plan.spaces, model)
    sampler.publish(0, model, 0)
    sampler.start()
    sampler.free(sampler.poll().slots)  # one rollout: real observations in the worker
    return sampler, sampler.serial_workers[0]


def base_sample(logits):
    """The base commit's MultiCategorical.act for one categorical: log-softmax, multinomial, gather."""
    import torch

    logp = torch.log_softmax(logits, dim=-1)
    a = torch.multinomial(logp.exp(), 1, True)
    return a[..., 0], logp.gather(-1, a)[..., 0]


def gumbel_sample(logits):
    import torch

    logp = torch.log_softmax(logits, dim=-1)
    u = torch.empty_like(logp).exponential_()
    a = (logp - u.log()).argmax(-1, keepdim=True)
    return a[..., 0], logp.gather(-1, a)[..., 0]


def components(worker, rows: int):
    import contextlib
    import copy

    import numpy as np
    import torch

    from sf_hydra.models import actor_critic as ac

    model = worker.model
    split = slice(0, rows)
    obs = {k: torch.from_numpy(v[split]) for k, v in worker.obs.items()}
    rnn = worker.rnn[split] if model.core is not None else None
    # as the worker acts: under its autocast (hardware.acting_precision bf16), the heads on float32 features
    acting = getattr(worker, "autocast", None) or contextlib.nullcontext()
    with acting:
        inputs = model._inputs(obs)
        x, _ = ac._tower_step(model.encoder, model.core, model.decoder, inputs, rnn)
        x = x.float()
        logits = model.action_head.linear(x) if hasattr(model.action_head, "linear") else None
        out = model.act(obs, rnn)

    def worker_step():
        o, r, out, p = worker._act(split)
        worker.staging.write(split, 0, worker._policy_record(o, out, r, p))

    def record_write():
        worker.staging.write(split, 0, worker._policy_record(obs, out, rnn, None))

    def timed_under(fn):
        def call():
            with torch.no_grad(), acting:
                fn()
        return call

    got = {
        "worker step": worker_step,
        "_act": lambda: worker._act(split),
        "model.act": timed_under(lambda: model.act(obs, rnn)),
        "preprocess": timed_under(lambda: model._inputs(obs)),
        "tower": timed_under(lambda: ac._tower_step(model.encoder, model.core, model.decoder, inputs, rnn)),
        "value head": timed_under(lambda: model.value_head(x).squeeze(-1)),
        "record + write": record_write,
    }
    if hasattr(worker, "policies_act"):  # absent before FusedPolicies (run with an older checkout's src)
        got["policies_act (1 policy)"] = timed_under(lambda: worker.policies_act(obs, rnn, None))
    if logits is not None:
        got["head logits"] = timed_under(lambda: model.action_head.linear(x))
        got["sample (multinomial)"] = timed_under(lambda: base_sample(logits))
        got["sample (gumbel)"] = timed_under(lambda: gumbel_sample(logits))
        got["sample (current)"] = timed_under(lambda: model.action_head.distribution(x).act())
    other = copy.deepcopy(model)
    models = [model, other]
    policies = np.arange(rows) % 2
    got["2 policies (act_per_policy)"] = timed_under(lambda: ac.act_per_policy(models, obs, rnn, policies))
    if hasattr(ac, "FusedPolicies") and ac.FusedPolicies.supports(models):
        fused = ac.FusedPolicies(models)
        got["2 policies (fused)"] = lambda: fused.act(obs, rnn, policies)
    return got


def measure(fns, calls: int, repeats: int):
    per = {name: [] for name in fns}
    for name, fn in fns.items():  # warm-up
        for _ in range(max(10, calls // 10)):
            fn()
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.process_time()
            for _ in range(calls):
                fn()
            per[name].append((time.process_time() - t0) / calls * 1e6)
    return {name: statistics.median(v) for name, v in per.items()}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", nargs="+", default=["cartpole:16", "cartpole:32", "doom:8"],
                   help="env:rows (env: cartpole or doom)")
    p.add_argument("--calls", type=int, default=1000, help="calls per component and repeat (Doom: a tenth)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("overrides", nargs="*", help="after `--`: Hydra overrides for every case")
    args = p.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    for case in args.cases:
        env, rows = case.split(":")
        sampler, worker = build_worker(env, int(rows), args.overrides)
        try:
            calls = args.calls if env != "doom" else max(20, args.calls // 10)
            got = measure(components(worker, int(rows)), calls, args.repeats)
        finally:
            sampler.stop()
        print(f"\n{env}, {rows} rows: microseconds per call (process CPU time, medians of {args.repeats} x {calls})")
        print_table(["component", "us / call"], [[k, f"{v:,.1f}"] for k, v in got.items()])


if __name__ == "__main__":
    main()
