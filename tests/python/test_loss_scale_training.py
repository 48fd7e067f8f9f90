"""loss_scale end to end on CPU (`surogate sft`, tiny random Llama, one token per character, a
ChatML-like template): weights reach the loss. With `hermes` on data without <tool_call> blocks
every weight is 1, so the step losses equal the `default` run's exactly; on data with tool calls
the weighted mean differs from the plain one."""
import json
import string

import pytest

from conftest import run_surogate
from tiny_model import SPECIAL, TOKENIZER_CONFIG, write_model

TEMPLATE = ("{% for m in messages %}<{{ m.role }}>{{ m.content }}</s>{% endfor %}"
            "{% if add_generation_prompt %}<assistant>{% endif %}")


def printable_tokenizer():
    vocab = {token: index for index, token in enumerate(SPECIAL)}
    for character in string.ascii_letters + string.digits + string.punctuation + " \n":
        vocab.setdefault(character, len(vocab))
    added = [{"id": vocab[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for t in SPECIAL]
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
            "pre_tokenizer": None, "post_processor": None, "decoder": {"type": "Fuse"},
            "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                      "ignore_merges": False, "vocab": vocab, "merges": []}}


def rows(with_calls):
    out = []
    for i in range(16):
        answer = f"Checking {i}." + ("<tool_call>{\"name\": \"f\"}</tool_call>" if with_calls else " Done.")
        out.append({"messages": [{"role": "user", "content": f"Question {i}?"},
                                 {"role": "assistant", "content": answer}]})
    return out


def step_losses(surogate_bin, tmp_path, name, loss_scale, data_rows, extra="sequence_len: 128"):
    return run_sft(surogate_bin, tmp_path, name, loss_scale, data_rows, extra)[0]


def run_sft(surogate_bin, tmp_path, name, loss_scale, data_rows, extra="sequence_len: 128"):
    """(step losses, the run's stdout + stderr)."""
    model = write_model(tmp_path / "model", tokenizer=printable_tokenizer(), weights=True)
    (model / "tokenizer_config.json").write_text(json.dumps(dict(TOKENIZER_CONFIG, chat_template=TEMPLATE)))
    data = tmp_path / f"{name}.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in data_rows))
    out = tmp_path / name
    config = tmp_path / f"{name}.yaml"
    config.write_text(f"""model: {model}
output_dir: {out}
lora: false
optimizer: adamw
learning_rate: 1e-2
per_device_train_batch_size: 2
max_steps: 3
validation_split_ratio: 0
loss_scale: {loss_scale}
{extra}
datasets:
  - path: {data}
    type: conversation
""")
    result = run_surogate(surogate_bin, "sft", config)
    assert result.returncode == 0, result.stderr + result.stdout
    log = next(out.glob("log-*.jsonl"))
    losses = [r["loss"] for r in map(json.loads, log.read_text().splitlines()) if r["type"] == "step"]
    return losses, result.stdout + result.stderr


def test_hermes_weights_reach_the_loss(surogate_bin, tmp_path):
    plain = step_losses(surogate_bin, tmp_path, "plain_default", "default", rows(False))
    plain_hermes, output = run_sft(surogate_bin, tmp_path, "plain_hermes", "hermes", rows(False))
    assert plain_hermes == plain
    # ... and the run says once that hermes found nothing to weigh.
    assert output.count("warning: loss_scale hermes weighs tool calls, but dataset") == 1, output
    calls_default = step_losses(surogate_bin, tmp_path, "calls_default", "default", rows(True))
    calls_hermes = step_losses(surogate_bin, tmp_path, "calls_hermes", "hermes", rows(True))
    # The constant initial weights give every token the same loss at step 1 (ln V); the updates differ.
    assert calls_hermes[0] == calls_default[0] and calls_hermes[1:] != calls_default[1:]
    assert all(loss == loss and loss > 0 for loss in calls_hermes)  # finite, positive


def tool_rows():
    return [{"messages": [
        {"role": "user", "content": f"Question {i}?"},
        {"role": "assistant", "content": f"Checking {i}.", "tool_calls": [
            {"type": "function", "function": {"name": "f", "arguments": {"n": i}}}]},
        {"role": "tool", "content": f"{i * 7}"},
        {"role": "assistant", "content": f"It is {i * 7}."}]} for i in range(16)]


def test_agent_template_calls_are_weighted_in_training(surogate_bin, tmp_path):
    # The template has no tool support: each agent template writes the calls as text, and the
    # agent strategy's weights (2 on the calls) change the updates against `default`.
    for agent_template in ("hermes", "llama3", "react_en"):
        extra = f"agent_template: {agent_template}\nsequence_len: 256"
        plain = step_losses(surogate_bin, tmp_path, f"{agent_template}_default", "default", tool_rows(), extra)
        weighted = step_losses(surogate_bin, tmp_path, f"{agent_template}_react", "react", tool_rows(), extra)
        # Step 1: every token has the same loss (ln V), so the weighted mean equals the plain one up
        # to float32 summation order (1e-6 relative); the updates then differ far beyond that.
        assert weighted[0] == pytest.approx(plain[0], rel=1e-6), agent_template
        assert max(abs(w - p) / p for w, p in zip(weighted[1:], plain[1:])) > 1e-4, (agent_template, weighted, plain)
        assert all(loss == loss and loss > 0 for loss in weighted)
