"""GRPO's loss and advantages (src/ops/grpo_logprobs.h, grpo_loss.h, src/rl/advantages.h) against
TRL's GRPOTrainer (trl 1.16), through the C++ probe tests/rl/grpo_probe.cpp.

The loss: TRL's own GRPOTrainer._compute_loss runs on a stand-in trainer (the attributes the method
reads, a one-process accelerator) whose _get_per_token_logps_and_entropies returns TRL's
selective_log_softmax of fixed logits at the temperature (what the model would give): per-token
log-probs, the loss of each loss_type with clipping (epsilon, epsilon_high, delta), the k3 KL to a
reference, an old policy (num_iterations > 1), a masked (truncated) completion, the clip metrics,
and the gradient of the logits by loss.backward(). fp32 on both sides; agreement to rel 1e-5
(max |ours − TRL| / max |TRL| over an array, and per scalar).

The advantages: the sum_then_normalize block of GRPOTrainer._generate_and_score_completions is
inline code there (no function to call), so it is reproduced here line for line with TRL's own
nanstd, in float64 (TRL runs it in float32, whose rounding alone exceeds 1e-5 on advantages near 0).
"""
import collections
import json
import subprocess
from types import SimpleNamespace

import pytest
import torch

trl = pytest.importorskip("trl")
from trl import GRPOTrainer  # noqa: E402
from trl.trainer.utils import nanstd, selective_log_softmax  # noqa: E402

from conftest import build_binary  # noqa: E402

TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def probe():
    binary = build_binary("tests/rl/grpo_probe")

    def run(request):
        done = subprocess.run([str(binary)], input=json.dumps(request), capture_output=True, text=True, check=True)
        return json.loads(done.stdout)

    return run


def relative(ours, theirs):
    ours = torch.as_tensor(ours, dtype=torch.float64)
    theirs = torch.as_tensor(theirs, dtype=torch.float64).reshape(ours.shape)
    scale = theirs.abs().max().clamp(min=1e-30)
    return ((ours - theirs).abs().max() / scale).item()


class OneProcess:
    num_processes = 1

    def gather(self, tensor):
        return tensor

    def reduce(self, tensor, reduction="sum"):
        return tensor

    def gather_for_metrics(self, tensor):
        return tensor


def trl_compute_loss(logits, completion_ids, completion_mask, advantages, old, ref, options):
    """TRL's GRPOTrainer._compute_loss on a stand-in trainer; returns (loss, metrics)."""
    temperature = options["temperature"]

    def logps_and_entropies(model, input_ids, attention_mask, logits_to_keep, **_):
        logps = selective_log_softmax(logits, completion_ids, temperature=temperature)
        return logps, torch.zeros_like(logps), None

    epsilon_high = options["epsilon_high"]
    stand_in = SimpleNamespace(
        _get_per_token_logps_and_entropies=logps_and_entropies,
        top_entropy_quantile=1.0,
        off_policy_mask_threshold=None,
        importance_sampling_level="token",
        beta=options["beta"],
        loss_type=options["loss_type"],
        epsilon_low=options["epsilon"],
        epsilon_high=epsilon_high,
        args=SimpleNamespace(delta=options["delta"], use_bias_correction_kl=False, steps_per_generation=1),
        use_vllm=False,
        vllm_importance_sampling_correction=False,
        model=SimpleNamespace(training=True),
        current_gradient_accumulation_steps=options["accumulation_steps"],
        max_completion_length=options["max_completion_length"],
        accelerator=OneProcess(),
        _entropy_bonus_enabled=False,
        aux_loss_enabled=False,
        _metrics={"train": {}, "eval": {}},
    )
    stand_in._metrics["train"] = collections.defaultdict(list)
    batch = completion_ids.shape[0]
    inputs = {
        "prompt_ids": torch.ones(batch, 2, dtype=torch.long),
        "prompt_mask": torch.ones(batch, 2, dtype=torch.long),
        "completion_ids": completion_ids,
        "completion_mask": completion_mask,
        "advantages": advantages,
        "num_items_in_batch": completion_mask.sum(),
    }
    if old is not None:
        inputs["old_per_token_logps"] = old
    if ref is not None:
        inputs["ref_per_token_logps"] = ref
    loss = GRPOTrainer._compute_loss(stand_in, None, inputs)
    return loss, {key: values[-1] for key, values in stand_in._metrics["train"].items()}


CASES = [
    # loss_type, off-policy old log-probs, beta, delta, epsilon_high, accumulation steps
    ("grpo", False, 0.0, None, 0.2, 1),
    ("grpo", True, 0.04, None, 0.28, 2),
    ("bnpo", True, 0.04, None, 0.28, 3),
    ("dr_grpo", True, 0.1, None, 0.2, 2),
    ("dapo", False, 0.0, None, 0.28, 1),
    ("dapo", True, 0.04, 1.3, 0.28, 4),
    ("bnpo", True, 0.0, 1.25, 0.2, 1),
]


@pytest.mark.parametrize("loss_type,off_policy,beta,delta,epsilon_high,accumulation", CASES)
def test_loss_metrics_and_gradient_match_trl(probe, loss_type, off_policy, beta, delta, epsilon_high, accumulation):
    generator = torch.Generator().manual_seed(CASES.index((loss_type, off_policy, beta, delta, epsilon_high, accumulation)))
    batch, tokens, vocab, temperature = 4, 6, 11, 0.8
    logits = (torch.randn(batch, tokens, vocab, generator=generator) * 2).requires_grad_(True)
    completion_ids = torch.randint(0, vocab, (batch, tokens), generator=generator)
    completion_mask = torch.ones(batch, tokens, dtype=torch.long)
    completion_mask[1, 4:] = 0  # a short completion
    completion_mask[3, :] = 0  # a truncated one (mask_truncated_completions)
    advantages = torch.tensor([1.2, -0.8, 0.4, 2.0])
    current = selective_log_softmax(logits.detach(), completion_ids, temperature=temperature)
    old = current + torch.empty(batch, tokens).uniform_(-0.45, 0.45, generator=generator) if off_policy else None
    ref = current + torch.empty(batch, tokens).uniform_(-1, 1, generator=generator) if beta else None
    max_completion_length = 8
    options = {"temperature": temperature, "beta": beta, "loss_type": loss_type, "epsilon": 0.2,
               "epsilon_high": epsilon_high, "delta": delta, "accumulation_steps": accumulation,
               "max_completion_length": max_completion_length}
    loss, metrics = trl_compute_loss(logits, completion_ids, completion_mask, advantages, old, ref, options)
    loss.backward()
    # TRL's dapo normaliser with one process and steps_per_generation 1.
    token_normalizer = float(completion_mask.sum().clamp(min=1)) * accumulation
    ours = probe({
        "op": "loss", "sequences": batch, "tokens": tokens, "vocab": vocab,
        "logits": logits.detach().flatten().tolist(), "labels": completion_ids.flatten().tolist(),
        "temperature": temperature, "old_logp": None if old is None else old.flatten().tolist(),
        "ref_logp": None if ref is None else ref.flatten().tolist(), "advantages": advantages.tolist(),
        "mask": completion_mask.flatten().float().tolist(), "loss_type": loss_type, "epsilon": 0.2,
        "epsilon_high": epsilon_high, "delta": delta, "beta": beta,
        "max_completion_length": max_completion_length, "accumulation_steps": accumulation,
        "token_normalizer": token_normalizer if loss_type == "dapo" else 0.0,
    })
    assert relative(ours["logp"], current) <= TOLERANCE
    assert relative([ours["loss"]], [loss.item()]) <= TOLERANCE, (ours["loss"], loss.item())
    assert relative(ours["d_logits"], logits.grad) <= TOLERANCE
    assert logits.grad.abs().max() > 0
    for name in ["clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean", "clip_ratio/low_min",
                 "clip_ratio/high_max"] + (["kl"] if beta else []):
        assert abs(ours["metrics"][name] - metrics[name]) <= TOLERANCE * max(abs(metrics[name]), 1e-3), name
    if off_policy:  # the test clips something, so the clip metrics are not all zero
        assert metrics["clip_ratio/region_mean"] > 0


def trl_advantages(rewards_per_func, reward_weights, num_generations, scale_rewards):
    """GRPOTrainer._generate_and_score_completions' sum_then_normalize block (trl 1.16), verbatim but
    for the device moves."""
    unscorable_mask = torch.isnan(rewards_per_func).all(dim=1)
    rewards = (rewards_per_func * reward_weights.unsqueeze(0)).nansum(dim=1)
    rewards[unscorable_mask] = torch.nan
    mean_grouped_rewards = torch.nanmean(rewards.view(-1, num_generations), dim=1)
    mean_grouped_rewards = mean_grouped_rewards.repeat_interleave(num_generations, dim=0)
    if scale_rewards in ["group", "none"]:
        if num_generations > 1:
            std_rewards = nanstd(rewards.view(-1, num_generations), dim=1)
            std_rewards = std_rewards.repeat_interleave(num_generations, dim=0)
        else:
            std_rewards = torch.zeros_like(rewards)
    elif scale_rewards == "batch":
        std_rewards = nanstd(rewards).expand_as(rewards) if rewards.numel() > 1 else torch.zeros_like(rewards)
    advantages = rewards - mean_grouped_rewards
    if scale_rewards != "none":
        advantages = advantages / (std_rewards + 1e-4)
    is_std_zero = torch.isclose(std_rewards, torch.zeros_like(std_rewards))
    advantages = torch.nan_to_num(advantages, nan=0.0)
    return advantages, rewards, is_std_zero.float().mean().item()


@pytest.mark.parametrize("scale_rewards", ["group", "batch", "none"])
def test_advantages_match_trl(probe, scale_rewards):
    generator = torch.Generator().manual_seed(7)
    groups, generations = 5, 4
    rewards = torch.rand(groups * generations, 2, generator=generator, dtype=torch.float64).round(decimals=1)
    rewards[4:8, 0] = 1.0  # a group whose rewards are all equal: zero std
    rewards[4:8, 1] = 0.5
    rewards[9, 0] = torch.nan  # None from one function
    rewards[13, :] = torch.nan  # unscorable
    weights = torch.tensor([1.0, 0.5], dtype=torch.float64)
    advantages, summed, frac_zero = trl_advantages(rewards, weights, generations, scale_rewards)
    ours = probe({"op": "advantages", "rewards": [[None if v != v else v for v in column]
                                                  for column in rewards.T.tolist()],
                  "weights": weights.tolist(), "num_generations": generations, "scale_rewards": scale_rewards})
    assert relative(ours["advantages"], advantages) <= TOLERANCE
    assert abs(ours["frac_reward_zero_std"] - frac_zero) <= 1e-7  # TRL takes that mean in float32
    assert frac_zero > 0 if scale_rewards != "batch" else True
    assert ours["rewards"][13] is None
    finite = ~torch.isnan(summed)
    assert relative(torch.tensor([v for v in ours["rewards"] if v is not None]), summed[finite]) <= TOLERANCE
    assert abs(ours["reward"] - torch.nanmean(summed).item()) <= 1e-12
    # nanstd's count / (count - 1) is a float32 division in TRL: rel 1e-8 apart from exact.
    assert relative([ours["reward_std"]], [nanstd(summed).item()]) <= TOLERANCE
