"""A list of bad command lines, each refused before any process starts, with the key named in one message shape:
`bad config: key=value is not allowed: ...`.

Most run in this process through what train.py runs first (sf_hydra.app.checks.check_command_line, which composes
the config as hydra.main will); a handful run `python train.py ...` for real: exit code 2, the message on stderr,
and nothing written into train_dir.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest
import torch

from sf_hydra.app.checks import check_command_line
from sf_hydra.config import ConfigError
from sf_hydra.config.aliases import apply_aliases
from tests.conftest import CONF_DIR, REPO_ROOT

# (command line, the key the message names, a text the message holds)
BAD = [
    # unknown keys: the near matches, and the keys of the group
    ("algo.learnign_rate=1", "algo.learnign_rate", "near matches: ['algo.learning_rate']"),
    ("+algo.learnign_rate=1", "+algo.learnign_rate", "near matches: ['algo.learning_rate']"),
    ("++algo.learnign_rate=1", "++algo.learnign_rate", "near matches: ['algo.learning_rate']"),
    ("algo.rnn_size=3", "algo.rnn_size", "near matches: ['model.rnn_size']"),
    ("model.rnn_sizee=3", "model.rnn_sizee", "'model.rnn_size'"),
    ("+model.rnn_typ=gru", "+model.rnn_typ", "'model.rnn_type'"),
    ("hardware.num_worker=2", "hardware.num_worker", "'hardware.num_workers'"),
    ("hardware.devise=cpu", "hardware.devise", "'hardware.device'"),
    ("env.frame_skip=4", "env.frame_skip", "'env.frameskip'"),
    ("logger.tensorbord=false", "logger.tensorbord", "'logger.tensorboard'"),
    ("foo=1", "foo", "keys of the config's top level"),
    ("+foo=1", "+foo", "keys of the config's top level"),
    ("seedd=1", "seedd", "'seed'"),
    ("env.kwargs.x=1", "env.kwargs.x", "+env.kwargs.x=1"),
    ("+model.core.bogus=3", "+model.core.bogus", "an argument of sf_hydra.models.cores.rnn_core"),
    ("+algo.optimizer.wd=0.1", "+algo.optimizer.wd", "'weight_decay'"),
    ("+algo.rollout=3", "+algo.rollout", "algo.rollout=..."),
    ("+seed=1", "+seed", "seed=..."),
    # values outside an Enum
    ("model.rnn_type=gruu", "model.rnn_type", "one of gru, lstm"),
    ("restart_behavior=resum", "restart_behavior", "one of resume, restart, overwrite"),
    ("hardware.device=gpu", "hardware.device", "one of cpu, cuda"),
    ("hardware.precision=16", "hardware.precision", "32-true"),
    ("model.nonlinearity=relux", "model.nonlinearity", "relu"),
    ("model.policy_initialization=bogus", "model.policy_initialization", "orthogonal"),
    ("model.encoder_conv_architecture=resnet99", "model.encoder_conv_architecture", "convnet_simple"),
    ("algo.lr_schedule=bogus", "algo.lr_schedule", "constant"),
    # values of the wrong type
    ("algo.rollout=abc", "algo.rollout", "Integer"),
    ("algo.async_rl=maybe", "algo.async_rl", "maybe"),
    ("seed=one", "seed", "Integer"),
    ("algo.learning_rate=fast", "algo.learning_rate", "Float"),
    ("hardware.num_workers=1.5", "hardware.num_workers", "Integer"),
    ("hardware.num_envs_per_worker=1e1", "hardware.num_envs_per_worker", "Integer; write 10"),  # a whole float
    ("train_for_env_steps=1M5", "train_for_env_steps", "1M, 2.5M, 1B, 10k, 1e6"),  # a budget: the forms it takes
    ("train_for_env_steps=1.5", "train_for_env_steps", "1M, 2.5M, 1B, 10k, 1e6"),
    ("algo.batch_size=2.0", "algo.batch_size", "Integer; write 2"),
    ("model.encoder_mlp_layers=[64,abc]", "model.encoder_mlp_layers", "element [1]: Value 'abc'"),  # the list, as given
    ("env=doom/basic env.resize=[128,72.5]", "env.resize", "element [1]: Value '72.5'"),
    ("train_for_env_steps=1e", "train_for_env_steps", "1M, 2.5M, 1B, 10k, 1e6"),
    # unparsable overrides
    ("seed=[1", "seed", "Hydra's syntax"),
    ("algo.rollout=(1", "algo.rollout", "Hydra's syntax"),
    ("algo.rollout=1)", "algo.rollout", "Hydra's syntax"),
    # unknown group options: near matches first
    ("model=nope", "model", "options: ['atari_conv', 'conv_gru', 'mlp', 'mlp_continuous']"),
    ("algo=appoo", "algo", "near matches: ['appo', 'ppo']"),
    ("hardware=gpux", "hardware", "options: ['cpu'"),
    ("logger=nope", "logger", "options: ['default'"),
    ("env=doom/batle", "env", "close matches: ['doom/battle'"),
    ("env=gym/nope", "env", "gym/cartpole"),
    ("env=nope", "env", "families:"),
    ("+experiment=doom_batle", "+experiment", "near matches: ['doom_battle'"),
    ("hydra/launcher=nope", "hydra/launcher", "local_parallel"),
    # env ids
    ("env=gym/any", "env.id", "a value must be given"),
    ("env=gym/any env.id=nomodule:X-v0", "env.id", "No module named 'nomodule'"),
    ("env=gym/any env.id=CartPol-v1", "env.id", "'CartPole-v1'"),
    # values the config's rules refuse
    ("algo.rollout=0", "algo.rollout", ">= 1"),
    ("algo.batch_size=-1", "algo.batch_size", ">= 1"),
    ("algo.gamma=1.5", "algo.gamma", "[0, 1]"),
    ("algo.learning_rate=0", "algo.learning_rate", "> 0"),
    ("algo.adam_beta1=1.0", "algo.adam_beta1", "[0, 1)"),
    ("algo.max_grad_norm=nan", "algo.max_grad_norm", ">= 0"),
    ("hardware.num_envs_per_worker=5 hardware.worker_num_splits=2", "hardware.num_envs_per_worker", "splits=2"),
    ("experiment=a/b", "experiment", "without '/'"),
    ("algo.recurrence=0", "algo.recurrence", "-1"),
    ("algo.normalize_input=false algo.normalize_input_keys=[obs]", "algo.normalize_input_keys",
     "null or [] while algo.normalize_input=false"),
    ("algo.normalize_input=true algo.normalize_input_keys=[]", "algo.normalize_input_keys",
     "[] would normalize nothing"),
    ("algo.kl_loss_coeff=inf", "algo.kl_loss_coeff", "a finite number"),
    ("algo.exploration_loss_coeff=inf", "algo.exploration_loss_coeff", "a finite number"),
    ("model.decoder_mlp_layers=[0]", "model.decoder_mlp_layers", "each an integer >= 1"),
    ("model.encoder_mlp_layers=[64,-3]", "model.encoder_mlp_layers", "each an integer >= 1"),
    ("hardware.worker_nice=20", "hardware.worker_nice", "19"),
    ("model.initial_stddev=0", "model.initial_stddev", "> 0"),
    ("save_every_sec=0", "save_every_sec", "> 0"),
    ("keep_checkpoints=0", "keep_checkpoints", ">= 1"),
    ("algo.num_policies=0", "algo.num_policies", ">= 1"),
    ("hardware.batched_sampling=true algo.num_policies=3", "algo.num_policies", "a whole worker serves one policy"),
    ("hardware.batched_sampling=true selfplay.pool_size=1", "selfplay.pool_size", "no opponent seats"),
    ("algo.policy_assignment=fixed algo.num_policies=2 hardware.num_workers=1 hardware.num_envs_per_worker=3",
     "algo.policy_assignment", "with 3 envs (hardware.num_workers x num_envs_per_worker) for algo.num_policies=2"),
    ("algo.policy_assignment=per_episode algo.num_policies=2 hardware.batched_sampling=true", "algo.policy_assignment",
     "auto or fixed with hardware.batched_sampling=true"),
    ("algo.policy_assignment=random", "algo.policy_assignment", "one of auto, fixed, per_episode"),
    ("selfplay.latest_prob=1.5", "selfplay.latest_prob", "[0, 1]"),
    ("selfplay.pool_size=-2", "selfplay.pool_size", ">= 0"),
    ("selfplay.snapshot_every_env_steps=0", "selfplay.snapshot_every_env_steps", ">= 1"),
    ("algo.nonfinite_updates_limit=0", "algo.nonfinite_updates_limit", ">= 1"),
    ("env.nonfinite=ignore", "env.nonfinite", "error"),
    ("hardware.max_env_restarts=-1", "hardware.max_env_restarts", ">= 0"),
    ("pbt.with_pbt=true", "pbt.with_pbt", "a population needs algo.num_policies >= 2"),
    pytest.param("hardware.device=cuda", "hardware.device", "no CUDA device",
                 marks=pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is visible")),
    # folders that cannot be created
    ("train_dir={file}/sub", "train_dir", "is a file, not a folder"),
    ("run_dir={file}/x", "run_dir", "is a file, not a folder"),
    # --multirun: the keys, with each sweep's first value
    ("--multirun seed=1,2 algo.learnign_rate=3", "algo.learnign_rate", "'algo.learning_rate'"),
    ("--multirun model.rnn_typ=gru,lstm", "model.rnn_typ", "'model.rnn_type'"),
    ("--multirun model.rnn_type=gruu,lstm", "model.rnn_type", "one of gru, lstm"),
    ("--multirun train_dir={file} seed=1,2", "train_dir", "is a file, not a folder"),
]


def _argv(line: str, tmp_path) -> list:
    file = tmp_path / "a_file"
    file.write_text("")
    argv = line.format(file=file).split()
    if not any(a.startswith(("train_dir=", "run_dir=")) for a in argv):
        argv.append(f"train_dir={tmp_path / 'runs'}")
    return argv


@pytest.mark.parametrize("line,key,says", BAD)
def test_refused_before_any_process_starts(tmp_path, line, key, says):
    with pytest.raises(ConfigError) as info:
        check_command_line(apply_aliases(_argv(line, tmp_path)), str(CONF_DIR))
    err, msg = info.value, str(info.value)
    assert err.key == key, msg
    assert msg.startswith(f"{key}={err.value!r} is not allowed: "), msg
    assert says in msg, msg
    assert not (tmp_path / "runs").exists()  # nothing written


def test_the_list_is_long_enough():
    print(f"checked {len(BAD)} bad command lines")
    assert len(BAD) >= 50


def test_good_command_lines_pass(tmp_path):
    for line in ("seed=3", "+env.kwargs.x=1", "+algo.optimizer.weight_decay=0.1", "+experiment=cartpole_seeds",
                 "--multirun seed=1,2", "--cfg job algo.learnign_rate=1", "--help"):
        check_command_line(apply_aliases(_argv(line, tmp_path)), str(CONF_DIR))


def _train_py(*argv, module=None, timeout=60):
    cmd = [sys.executable, *(["-m", module] if module else [str(REPO_ROOT / "train.py")]), *argv]
    return subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("line,key,says", [
    ("algo.learnign_rate=1", "algo.learnign_rate", "near matches: ['algo.learning_rate']"),
    ("+algo.learnign_rate=1", "+algo.learnign_rate", "near matches: ['algo.learning_rate']"),
    ("model.rnn_type=gruu", "model.rnn_type", "one of gru, lstm"),
    ("env=doom/batle", "env", "close matches: ['doom/battle'"),
    ("train_dir={file}/sub", "train_dir", "is a file, not a folder"),
    ("algo.rollout=0", "algo.rollout", ">= 1"),
])
def test_train_py_refuses_with_one_framed_line(tmp_path, line, key, says):
    proc = _train_py(*_argv(line, tmp_path))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"bad config: {key}=") and says in lines[0], proc.stderr
    assert len(lines[0]) < 1500, lines[0]
    assert not (tmp_path / "runs").exists()  # no run folder, no .hydra/, no train.log


def test_launcher_without_the_slurm_extra_names_the_extra(tmp_path):
    proc = _train_py("--multirun", "hydra/launcher=local_parallel", "seed=1,2", f"train_dir={tmp_path / 'runs'}",
                     module="tests.helpers.without_slurm")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("bad config: hydra/launcher='local_parallel' is not allowed:"), proc.stderr
    assert 'pip install -e ".[slurm]"' in proc.stderr
    assert not (tmp_path / "runs").exists()


def test_no_plugin_warning_without_the_slurm_extra():
    proc = _train_py("--cfg", "job", module="tests.helpers.without_slurm")
    assert proc.returncode == 0, proc.stderr
    assert "Error importing" not in proc.stderr and "Warning" not in proc.stderr, proc.stderr
    assert "algo:" in proc.stdout


def _marked(mark: str) -> list:
    """Live processes whose environment holds SF_HYDRA_TEST_MARK=mark (train.py and what it started)."""
    found = []
    for proc in psutil.process_iter(["environ", "cmdline", "status"]):
        env = proc.info["environ"] or {}
        if env.get("SF_HYDRA_TEST_MARK") == mark and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


@pytest.mark.slow
def test_a_check_after_the_rules_still_refuses_and_the_fork_server_then_exits(tmp_path):
    # The env id is checked after the config's own rules passed: by then train.py has started the
    # sampler's fork server (it imports torch meanwhile). The refusal is the same; the server exits too,
    # once its preload is imported (it watches train.py's lifeline only then: a few seconds).
    mark = str(tmp_path)
    env = {**os.environ, "SF_HYDRA_TEST_MARK": mark}
    argv = _argv("env=gym/any env.id=CartPol-v1", tmp_path)
    proc = subprocess.Popen([sys.executable, str(REPO_ROOT / "train.py"), *argv], cwd=REPO_ROOT, env=env,
                            stderr=subprocess.PIPE, text=True)
    servers = set()
    while proc.poll() is None:
        servers |= {p.pid for p in _marked(mark) if "forkserver" in " ".join(p.info["cmdline"] or [])}
        time.sleep(0.05)
    stderr = proc.stderr.read()
    assert proc.returncode == 2, stderr
    assert stderr.startswith("bad config: env.id='CartPol-v1' is not allowed:") and "'CartPole-v1'" in stderr, stderr
    assert servers, "the fork server was not started once the config's own rules passed"
    deadline = time.monotonic() + 30
    while _marked(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _marked(mark), [p.info["cmdline"] for p in _marked(mark)]
    assert not (tmp_path / "runs").exists()
