"""A trained policy as one self-contained file for another runtime: ONNX (onnxruntime, TensorRT, a browser) or
TorchScript (libtorch, C++), with a small JSON beside it that says how to call it: the file's own description,
named after it (`policy_0.onnx.json` beside `policy_0.onnx`, so that an ONNX and a TorchScript export of one policy
keep one each), holding the file's sha256.

The file holds the whole acting step of the network: the observation normalizer, the encoders, the recurrent core
and both heads. Its inputs are the observation's arrays (one per key of a dict observation, in the JSON's order;
an `action_mask` is one of them) and, for a recurrent policy, the state; its outputs are the action
distribution's parameters (logits of each categorical, or a Gaussian's means and standard deviations before any
squashing), the most likely action, the value, and the next state. Every input and output has a leading batch
dimension of any size. Sampling is left to the caller, who has the parameters: the file is deterministic.

The file and its description are written whole, under temporary names, before either replaces an earlier export
(sf_hydra.core.files.write_together): a kill while exporting leaves the previous export and its description as they
were. Only a crash between the two renames leaves a new file beside its previous description, which its sha256
then tells apart."""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import gymnasium as gym
import torch

from sf_hydra.core.files import write_together
from sf_hydra.core.spaces import ACTION_MASK, obs_specs, space_to_json
from sf_hydra.evaluation.policy import Policy

FORMATS = ("onnx", "torchscript")
SUFFIX = {"onnx": ".onnx", "torchscript": ".pt"}
OUTPUTS = ("action_dist_params", "action", "value")
STATE_IN, STATE_OUT = "rnn_state", "next_rnn_state"


class ActingStep(torch.nn.Module):
    """The network's acting step with tensors in and out, as the exported file runs it."""

    def __init__(self, model: torch.nn.Module, obs_keys: List[str]):
        super().__init__()
        self.model, self.obs_keys = model, list(obs_keys)
        self.recurrent = model.core is not None

    def forward(self, *inputs: torch.Tensor):
        obs = dict(zip(self.obs_keys, inputs[:len(self.obs_keys)]))
        state = inputs[len(self.obs_keys)] if self.recurrent else None
        dist, value, next_state = self.model.forward_step(obs, state)
        outputs = (dist.params(), most_likely(dist), value)
        return outputs + (next_state,) if self.recurrent else outputs


def most_likely(dist) -> torch.Tensor:
    """The deterministic action, as Policy.act(deterministic=True) takes it: each categorical's highest logit
    (ties: the first), a Gaussian's mean (squashed for a tanh Gaussian)."""
    if hasattr(dist, "act"):
        return dist.act(True)[0]
    return dist.mode()


@contextlib.contextmanager
def _no_distribution_checks():
    """torch.distributions check their arguments' values in Python, which a traced graph cannot hold; the
    exported step computes the same numbers without the checks."""
    before = torch.distributions.Distribution._validate_args
    torch.distributions.Distribution.set_default_validate_args(False)
    try:
        yield
    finally:
        torch.distributions.Distribution.set_default_validate_args(before)


def example_inputs(policy: Policy, batch: int = 2) -> Tuple[torch.Tensor, ...]:
    """Inputs of the right shapes and dtypes (zeros; an action mask of ones) for tracing."""
    specs = obs_specs(policy.observation_space)
    tensors = [(torch.ones if key == ACTION_MASK else torch.zeros)(batch, *shape, dtype=dtype)
               for key, (shape, dtype) in specs.items()]
    if policy.recurrent:
        tensors.append(torch.zeros(batch, policy.model.rnn_state_size))
    return tuple(tensors)


def input_names(policy: Policy) -> List[str]:
    return list(obs_specs(policy.observation_space)) + ([STATE_IN] if policy.recurrent else [])


def output_names(policy: Policy) -> List[str]:
    return list(OUTPUTS) + ([STATE_OUT] if policy.recurrent else [])


def export(policy: Policy, fmt: str, path: Path) -> Tuple[Path, Path]:
    """Writes `path` (the file) and its description `path` + `.json` (how to call it, the file's sha256), both
    whole or neither; returns both."""
    if fmt not in FORMATS:
        raise ValueError(f"format={fmt!r}: one of {', '.join(FORMATS)}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    model = copy.deepcopy(policy.model).cpu().eval().requires_grad_(False)  # the file computes no gradients
    step = ActingStep(model, list(obs_specs(policy.observation_space))).eval()
    inputs = example_inputs(policy)
    written: Dict[str, str] = {}

    def write_file(tmp: Path) -> None:
        with _no_distribution_checks(), torch.no_grad():
            if fmt == "torchscript":
                _torchscript(step, inputs, tmp)
            else:
                _onnx(step, inputs, tmp, input_names(policy), output_names(policy))
        written["sha256"] = sha256_of(tmp)

    def write_description(tmp: Path) -> None:
        tmp.write_text(json.dumps(description(policy, fmt, path, written["sha256"]), indent=1))

    described = description_path(path)
    write_together([(path, write_file), (described, write_description)])
    return path, described


def description_path(path: Path) -> Path:
    """The description of the exported file `path`: its whole name + `.json`."""
    return Path(path).with_name(Path(path).name + ".json")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _torchscript(step: ActingStep, inputs, path: Path) -> None:
    traced = torch.jit.trace(step, inputs, check_trace=False)
    traced.save(str(path))


# The exporter's own chatter: onnxscript's and onnx_ir's passes log each rewrite at INFO, torch's registry warns that
# torchvision (which a policy never uses) is not installed. Said only at ERROR while sf-export runs.
EXPORTER_LOGGERS = ("onnxscript", "onnx_ir", "torch.onnx")


@contextlib.contextmanager
def _exporter_quiet():
    import logging
    import warnings

    loggers = [logging.getLogger(name) for name in EXPORTER_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # torch.export's pytree deprecations, not ours
            yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def _onnx(step: ActingStep, inputs, path: Path, names: List[str], outputs: List[str]) -> None:
    batch = torch.export.Dim("batch", min=1)
    with _exporter_quiet():
        torch.onnx.export(step, inputs, str(path), input_names=names, output_names=outputs,
                          dynamic_shapes=(tuple({0: batch} for _ in inputs),), dynamo=True, external_data=False,
                          verbose=False)


def description(policy: Policy, fmt: str, path: Path, sha256: str) -> Dict:
    """The JSON beside the file: its name and sha256, its inputs and outputs (names, shapes, dtypes; -1: the
    batch), the env's spaces, what the distribution parameters are, where the weights came from, and how to
    call it."""
    specs = obs_specs(policy.observation_space)
    inputs = [{"name": k, "shape": [-1, *shape], "dtype": str(dtype).replace("torch.", "")}
              for k, (shape, dtype) in specs.items()]
    if policy.recurrent:
        inputs.append({"name": STATE_IN, "shape": [-1, policy.model.rnn_state_size], "dtype": "float32",
                       "note": "zeros at an episode's start; the last call's next_rnn_state after"})
    origin = policy.origin
    return {
        "format": fmt, "file": path.name, "sha256": sha256, "inputs": inputs, "outputs": output_names(policy),
        "action_distribution": distribution_kind(policy.action_space, policy.model),
        "observation_space": space_to_json(policy.observation_space),
        "action_space": space_to_json(policy.action_space),
        "recurrent": policy.recurrent, "rnn_state_size": int(policy.model.rnn_state_size),
        "source": {"run_dir": str(origin.run_dir) if origin.run_dir else None,
                   "checkpoint": str(origin.checkpoint) if origin.checkpoint else None,
                   "policy": origin.policy, "env_steps": origin.env_steps},
        "exported_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "torch": torch.__version__,
        "how_to_call": how_to_call(fmt, policy),
    }


def distribution_kind(space: gym.Space, model) -> Dict:
    """What `action_dist_params` holds for this action space."""
    if isinstance(space, gym.spaces.Box):
        squashed = bool(getattr(model.action_head, "squash", False))
        return {"kind": "tanh_gaussian" if squashed else "gaussian", "size": int(space.shape[0]),
                "params": "the means, then the standard deviations (before any squashing)"}
    if isinstance(space, gym.spaces.Discrete):
        return {"kind": "categorical", "sizes": [int(space.n)], "params": "the logits"}
    if isinstance(space, (gym.spaces.MultiDiscrete, gym.spaces.Tuple)):
        return {"kind": "product", "params": "each part's parameters in order (logits of a categorical; means "
                "then standard deviations of a Gaussian)"}
    return {"kind": type(space).__name__}


def how_to_call(fmt: str, policy: Policy) -> str:
    feed = ", ".join(input_names(policy))
    if fmt == "onnx":
        return (f"onnxruntime.InferenceSession(file).run(None, {{name: array for name in ({feed})}}) -> "
                f"[{', '.join(output_names(policy))}]; each array with a leading batch dimension")
    return (f"torch.jit.load(file)({feed}) -> ({', '.join(output_names(policy))}); "
            "tensors with a leading batch dimension")


def default_path(policy: Policy, fmt: str, out: Optional[str]) -> Path:
    """`out`, else <run>/export/policy_<k><suffix>."""
    if out:
        return Path(out)
    base = policy.origin.run_dir or Path(".")
    return Path(base) / "export" / f"policy_{policy.origin.policy}{SUFFIX[fmt]}"
