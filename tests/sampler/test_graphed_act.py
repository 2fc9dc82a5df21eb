"""hardware.inference_cuda_graphs (sampler/graphed_act.py): a server's policy step on fixed shapes.
On the CPU the buckets run their step eagerly on the same buffers a CUDA graph would replay: each
call of n rows answers as the plain step on those n rows (same draws, same values, same next RNN
states) whatever the padding rows hold; the buffers stay put across calls, weights changed in place
act at the next call, several policies and oversized batches act eagerly, a recording that fails
falls back to eager acting and says so. The `gpu` tests record real CUDA graphs."""

from __future__ import annotations

import logging

import pytest
import torch

from sf_hydra.config import validate
from sf_hydra.core.errors import ConfigError
from sf_hydra.models import build_model, model_recipe
from sf_hydra.models.actor_critic import policies_act
from sf_hydra.sampler.env_info import describe_env
from sf_hydra.sampler.graphed_act import BucketedAct, bucket_sizes, record_cuda_graph
from tests.helpers.servers import GRU, SERVER, server_and_channel

MAX_ROWS = 12


def _policy(tmp_cfg, model: str):
    cfg = tmp_cfg(*SERVER, *(GRU if model == "gru" else ()))
    info = describe_env(cfg.env, seed=0)
    torch.manual_seed(0)
    return build_model(model_recipe(cfg), info.observation_space, info.action_space).eval()


def _inputs(policy, rows: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    obs = {"obs": torch.randn(rows, 4, generator=gen)}
    rnn = torch.randn(rows, policy.rnn_state_size, generator=gen) if policy.core is not None else None
    return obs, rnn


def test_buckets_are_powers_of_two_then_the_most_rows():
    assert bucket_sizes(1) == [1]
    assert bucket_sizes(8) == [1, 2, 4, 8]
    assert bucket_sizes(12) == [1, 2, 4, 8, 12]
    with pytest.raises(ValueError):
        bucket_sizes(0)


@pytest.mark.parametrize("model", ["mlp", "gru"])
def test_each_call_answers_as_the_plain_step_on_its_rows(tmp_cfg, model):
    policy = _policy(tmp_cfg, model)
    plain = policies_act([policy])
    bucketed = BucketedAct(plain, MAX_ROWS)
    with torch.no_grad():
        for i, n in enumerate([5, 1, 12, 3, 7, 8]):  # 5 and then 7 share the 8-row bucket: stale rows behind 7
            obs, rnn = _inputs(policy, n, seed=i)
            torch.manual_seed(100 + i)
            got = bucketed(obs, rnn, None)
            torch.manual_seed(100 + i)
            want = plain(obs, rnn, None)
            assert got.actions.shape == want.actions.shape == (n,)
            # The draws: the bucket draws for its padding rows after the first n rows' (row-major uniforms)
            assert torch.equal(got.actions, want.actions), n
            assert torch.allclose(got.log_probs, want.log_probs, atol=1e-6)
            assert torch.allclose(got.values, want.values, atol=1e-6)
            if rnn is not None:
                assert torch.allclose(got.rnn_states, want.rnn_states, atol=1e-6)
                assert not torch.allclose(got.rnn_states, rnn)
    assert bucketed.calls_on_buckets == 6 and bucketed.eager_calls == 0
    assert sorted(bucketed.buckets) == [1, 4, 8, 12]


def test_buffers_stay_put_and_weights_changed_in_place_act_at_the_next_call(tmp_cfg):
    policy = _policy(tmp_cfg, "gru")
    bucketed = BucketedAct(policies_act([policy]), MAX_ROWS)
    obs, rnn = _inputs(policy, 6, seed=0)
    with torch.no_grad():
        first = bucketed(obs, rnn, None).values.clone()
        bucket = bucketed.buckets[8]
        where = [t.data_ptr() for t in (*bucket.obs.values(), bucket.rnn)]
        for p in policy.parameters():  # as PolicyStore.load_into: in place
            p.add_(0.5 * torch.randn_like(p))
        second = bucketed(obs, rnn, None).values
        assert where == [t.data_ptr() for t in (*bucket.obs.values(), bucket.rnn)]
        assert not torch.allclose(first, second)
        assert torch.allclose(second, policy.act(obs, rnn).values, atol=1e-6)


def test_several_policies_and_oversized_batches_act_eagerly(tmp_cfg):
    policy = _policy(tmp_cfg, "mlp")
    bucketed = BucketedAct(policies_act([policy, policy]), MAX_ROWS)
    obs, rnn = _inputs(policy, 4, seed=0)
    with torch.no_grad():
        bucketed(obs, rnn, torch.tensor([0, 1, 0, 1]).numpy())
        big, _ = _inputs(policy, MAX_ROWS + 1, seed=1)
        assert bucketed(big, None, None).actions.shape == (MAX_ROWS + 1,)
    assert bucketed.eager_calls == 2 and bucketed.calls_on_buckets == 0 and not bucketed.buckets


def test_a_recording_that_fails_falls_back_to_eager_acting_and_says_so(tmp_cfg, caplog):
    policy = _policy(tmp_cfg, "mlp")
    plain = policies_act([policy])

    def refuses(step):
        raise RuntimeError("operation not permitted when stream is capturing")
    bucketed = BucketedAct(plain, MAX_ROWS, capture=refuses)
    obs, _ = _inputs(policy, 3, seed=0)
    with torch.no_grad(), caplog.at_level(logging.WARNING, logger="sf_hydra.sampler.graphed_act"):
        torch.manual_seed(1)
        got = bucketed(obs, None, None)
        torch.manual_seed(1)
        assert torch.equal(got.actions, plain(obs, None, None).actions)
        bucketed(obs, None, None)
    assert "not permitted" in bucketed.failed and bucketed.eager_calls == 2
    assert len([r for r in caplog.records if "inference_cuda_graphs" in r.getMessage()]) == 1  # said once


def test_a_server_on_buckets_answers_as_the_eager_server(tmp_cfg):
    """The server copies each answer out of the bucket's buffers before its next batch."""
    cfg = tmp_cfg(*SERVER, *GRU)
    eager, channel, _ = server_and_channel(cfg, rows=8)
    bucketed, channel_b, _ = server_and_channel(cfg, rows=8)
    bucketed.policies_act = BucketedAct(bucketed.policies_act, 8)
    for requests in ([(0, (0, 3))], [(0, (3, 8))], [(0, (0, 4)), (0, (4, 8))]):
        torch.manual_seed(5)
        eager.serve(requests)
        torch.manual_seed(5)
        bucketed.serve(requests)
        for name in channel.out:
            assert torch.allclose(channel.out[name].float(), channel_b.out[name].float(), atol=1e-6), name
        assert torch.allclose(channel.next_rnn, channel_b.next_rnn, atol=1e-6)
    assert bucketed.policies_act.calls_on_buckets == 3 and sorted(bucketed.policies_act.buckets) == [4, 8]


@pytest.mark.parametrize("overrides", [
    ("hardware.inference=server", "hardware.inference_cuda_graphs=true"),  # a CPU server
    ("hardware.inference_cuda_graphs=true",),  # the policy in the workers
])
def test_cuda_graphs_without_a_cuda_server_are_refused_naming_the_key(tmp_cfg, overrides):
    with pytest.raises(ConfigError, match=r"hardware\.inference_cuda_graphs"):
        validate(tmp_cfg(*overrides))


@pytest.mark.gpu
@pytest.mark.parametrize("model", ["mlp", "gru"])
def test_cuda_graphs_answer_as_the_eager_cuda_step(tmp_cfg, model):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    policy = _policy(tmp_cfg, model).cuda()
    plain = policies_act([policy])
    graphed = BucketedAct(plain, MAX_ROWS, capture=record_cuda_graph)
    with torch.no_grad():
        for i, n in enumerate([5, 12, 7, 2]):
            obs, rnn = _inputs(policy, n, seed=i)
            obs = {k: v.cuda() for k, v in obs.items()}
            rnn = None if rnn is None else rnn.cuda()
            got = graphed(obs, rnn, None)
            want_lp, want_v = _log_probs_and_values(policy, obs, got.actions, rnn)
            assert torch.allclose(got.log_probs, want_lp, atol=2e-3) and torch.allclose(got.values, want_v, atol=2e-3)
        for p in policy.parameters():
            p.add_(0.5 * torch.randn_like(p))
        obs, rnn = _inputs(policy, 7, seed=9)
        obs = {k: v.cuda() for k, v in obs.items()}
        rnn = None if rnn is None else rnn.cuda()
        got = graphed(obs, rnn, None)  # replays the 8-row graph: the new weights act
        want_lp, want_v = _log_probs_and_values(policy, obs, got.actions, rnn)
        assert torch.allclose(got.values, want_v, atol=2e-3)
    assert graphed.failed is None and graphed.calls_on_buckets == 5 and sorted(graphed.buckets) == [2, 8, 12]


def _log_probs_and_values(policy, obs, actions, rnn):
    n = len(actions)
    dones = torch.zeros(n, 1, device=actions.device)
    log_probs, _, values = policy.evaluate({k: v.unsqueeze(1) for k, v in obs.items()}, actions.unsqueeze(1), rnn,
                                           dones)
    return log_probs[:, 0], values[:, 0]
