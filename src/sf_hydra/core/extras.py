"""The optional extras (pyproject.toml, [project.optional-dependencies]) and the modules they install, so that
a module missing at import is reported with the extra that installs it and the line to type: one for a
checkout of sf_hydra, one for the package installed from an index. tests/config/test_missing_extra.py keeps
this table and pyproject.toml in step."""

from __future__ import annotations

from typing import Optional

# The module's import name (top level, or a dotted prefix for a plugin package) -> the extra that installs it.
EXTRA_OF_MODULE = {
    "vizdoom": "doom",
    "ale_py": "atari",
    "cv2": "atari",  # gymnasium's AtariPreprocessing resizes with OpenCV
    "mujoco": "mujoco",
    "Box2D": "box2d",
    "pettingzoo": "multiagent",
    "envpool": "envpool",
    "pygame": "render",
    "imageio": "video",
    "imageio_ffmpeg": "video",
    "wandb": "wandb",
    "submitit": "slurm",
    "hydra_plugins.hydra_submitit_launcher": "slurm",
    "optuna": "optuna",
    "hydra_plugins.hydra_optuna_sweeper": "optuna",
    "onnx": "export",
    "onnxscript": "export",
    "onnxruntime": "export",
    "huggingface_hub": "hub",
    "safetensors": "hub",
}


def extra_of(module: str) -> Optional[str]:
    """The extra that installs `module` (a dotted import name, or one inside such a package); None for a
    module no extra installs (a core dependency, the user's own code)."""
    for name, extra in EXTRA_OF_MODULE.items():
        if module == name or module.startswith(name + "."):
            return extra
    return None


def install_lines(extra: str) -> str:
    """How to install `extra`, for a checkout of sf_hydra and for the package installed from an index."""
    return f'pip install -e ".[{extra}]" in a checkout of sf_hydra, or pip install "sf_hydra[{extra}]"'


def missing_module(error: BaseException) -> Optional[str]:
    """The name of the module whose absence caused `error` (a ModuleNotFoundError in its chain of causes,
    as Hydra's locate wraps it in an ImportError), or None."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, ModuleNotFoundError) and error.name:
            return error.name
        error = error.__cause__ or error.__context__
    return None


def missing_extra(error: BaseException) -> Optional[str]:
    """What to say when `error` comes from a module of an optional extra that is not installed: the module,
    the extra and the install lines; None when it comes from anything else."""
    module = missing_module(error)
    extra = extra_of(module) if module else None
    if extra is None:
        return None
    return f"it needs {module}, which is not installed: the {extra} extra installs it ({install_lines(extra)})"
