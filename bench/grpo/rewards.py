"""The GRPO benchmark's reward functions (TRL's signature), used by both `surogate grpo` and the
TRL peer (bench/peers/trl_grpo_bench.py): an exact-answer reward and a format reward.

The format reward gives partial credit (the share of plain ASCII characters) so that even a
random-weight model's completions differ in reward and the advantages are not all zero: both
engines then back-propagate a non-zero loss, as a real run does.
"""
import re

BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
NUMBER = re.compile(r"-?\d+")


def _text(completion):
    # A chat prompt's completion is [{"role": "assistant", "content": text}].
    return completion[0]["content"] if isinstance(completion, list) else completion


def correct_answer(prompts, completions, answer, **kwargs):
    """1 when the last \\boxed{} (else the last number) of the completion is the row's answer."""
    rewards = []
    for completion, expected in zip(completions, answer):
        text = _text(completion)
        boxed = BOXED.findall(text)
        numbers = NUMBER.findall(boxed[-1] if boxed else text)
        rewards.append(1.0 if numbers and numbers[-1] == str(expected) else 0.0)
    return rewards


def boxed_format(prompts, completions, **kwargs):
    """1 for a completion with a \\boxed{number}; else half the share of its characters that are plain ASCII."""
    rewards = []
    for completion in completions:
        text = _text(completion)
        if re.search(r"\\boxed\{-?\d+\}", text):
            rewards.append(1.0)
        else:
            rewards.append(0.5 * sum(ch.isascii() and ch.isprintable() for ch in text) / max(len(text), 1))
    return rewards
