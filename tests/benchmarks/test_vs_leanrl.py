"""benchmarks/vs_leanrl.py: our side of the comparison is LeanRL's work (the same network, iteration,
passes and budget, checked on the composed config and the built model), LeanRL's progress bar is read
back as it prints it, and the summary's medians and ratios come out as worked by hand."""

import sys
from pathlib import Path

import pytest

from sf_hydra.config import validate
from tests.conftest import compose_cfg

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from vs_leanrl import ITERATION, Run, leanrl_command, our_overrides, parse_args, parse_leanrl_output, summary_rows  # noqa: E402,E501

# What LeanRL's ppo_continuous_action*.py build for HalfCheetah (17 observations, 6 actions): a critic
# 17-64-64-1 and an actor 17-64-64-6, tanh, plus a log std of 6.
LEANRL_PARAMETERS = (17 * 64 + 64) + (64 * 64 + 64) + (64 + 1) + (17 * 64 + 64) + (64 * 64 + 64) + (64 * 6 + 6) + 6


def test_leanrl_progress_bar_gives_its_last_speed_and_return():
    # tqdm rewrites its bar with carriage returns; the description changes every 10 iterations.
    eager = ("  0%|          | 0/50 [00:00<?, ?it/s]\r"
             "speed:  401.5 sps, global_step=20480, episodic_return=-350.12 (max=-190.00):  20%|## | 10/50\r"
             "speed:  455.0 sps, global_step=40960, episodic_return=-120.50 (max=20.00):  40%|#### | 20/50\r"
             "speed:  455.0 sps, global_step=40960, episodic_return=-120.50 (max=20.00):  42%|#### | 21/50\n")
    assert parse_leanrl_output(eager) == (455.0, -120.5)
    compiled = "speed:  1234.5 sps, reward avg: -0.20, reward max: 1.50, returns:  312.25,lr:  0.00\r"
    assert parse_leanrl_output(compiled) == (1234.5, 312.25)
    assert parse_leanrl_output("  0%|          | 0/50 [00:00<?, ?it/s]\rTraceback ...\n") == (None, None)


def test_leanrl_runs_its_own_script_unchanged_on_the_cpu():
    cmd = leanrl_command("/venv/bin/python", Path("/LeanRL"), "leanrl_compile", seed=2, env_steps=4 * ITERATION)
    assert cmd[:2] == ["/venv/bin/python", "/LeanRL/leanrl/ppo_continuous_action_torchcompile.py"]
    assert {"--env-id=HalfCheetah-v4", "--seed=2", f"--total-timesteps={4 * ITERATION}", "--no-cuda",
            "--compile"} == set(cmd[2:])


@pytest.mark.parametrize("system", ["ours", "ours_async"])
def test_our_side_does_leanrls_work(tmp_path, system):
    pytest.importorskip("mujoco", reason="the mujoco extra")
    from sf_hydra.models import build_model, model_recipe
    from sf_hydra.sampler.env_info import describe_env

    cfg = compose_cfg(*our_overrides(system, seed=3, env_steps=50 * ITERATION, train_dir=tmp_path, extra=[]))
    validate(cfg)
    a, h = cfg.algo, cfg.hardware
    assert cfg.env.id == "HalfCheetah-v4" and cfg.seed == 3 and cfg.train_for_env_steps == 50 * ITERATION
    assert cfg.train_until_avg_return is None  # no early stop
    assert a.async_rl == (system == "ours_async")
    # one iteration of 2,048 frames, 10 epochs of 32 minibatches of 64: 320 optimizer steps
    assert h.num_workers * h.num_envs_per_worker * a.rollout == a.batch_size * a.num_batches_per_epoch == ITERATION
    assert (a.num_epochs, a.num_batches_per_epoch, a.batch_size) == (10, 32, 64)
    assert (a.learning_rate, a.lr_schedule, a.adam_eps, a.max_grad_norm) == (3e-4, "linear_decay", 1e-5, 0.5)
    assert (a.gamma, a.gae_lambda, a.ppo_clip_value, a.exploration_loss_coeff) == (0.99, 0.95, 0.2, 0.0)
    assert a.value_loss_coeff == 0.25  # LeanRL: 0.5 x vf_coef 0.5 x MSE; ours: coeff x MSE
    info = describe_env(cfg.env, seed=0)
    model = build_model(model_recipe(cfg), info.observation_space, info.action_space)
    assert sum(p.numel() for p in model.parameters()) == LEANRL_PARAMETERS
    tanh = [m for m in model.modules() if type(m).__name__ == "Tanh"]
    assert len(tanh) == 4  # two hidden layers in each of the actor's and the critic's towers


def test_summary_medians_and_ratios_against_each_system():
    runs = [Run("ours", 1, 0, 2048.0, 4.0, 600.0, -100.0, 0.0), Run("leanrl", 1, 0, 2048.0, 8.0, 400.0, -200.0, 0.0),
            Run("ours", 2, 0, 2048.0, 2.0, 800.0, 50.0, 0.0), Run("leanrl", 2, 0, 2048.0, 8.0, 200.0, 10.0, 0.0),
            Run("ours", 3, 0, 2048.0, 4.0, 700.0, 0.0, 0.0), Run("leanrl", 3, 1, None, 9.0, None, None, 0.0)]
    ours, leanrl = summary_rows(runs, ["ours", "leanrl"])
    # ours: wall 4 s, FPS (wall) 512, steady 700; LeanRL: wall 8 s, FPS 256 (the failed run has none), steady 300
    assert ours == ["ours", "3", "4.0", "512", "1.00", "700", "1.00", "0.0", "-100 / 50 / 0"]
    assert leanrl == ["leanrl", "3", "8.0", "256", "2.00", "300", "2.33", "-95.0", "-200 / 10 / -"]


def test_a_budget_of_part_of_an_iteration_is_refused(capsys):
    with pytest.raises(SystemExit):
        parse_args(["--env-steps", "3000"])
    assert f"--env-steps=3000: a multiple of {ITERATION}" in capsys.readouterr().err
