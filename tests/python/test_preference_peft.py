"""An adapter trained by `surogate dpo` is what PEFT loads (issue 42's "done when"), on the CPU
backend in fp32 with the tiny random Qwen3 and the real Qwen3 tokenizer of test_preference_tuning.py:

- the held-out pairs' completion log-probabilities that transformers + PEFT compute with the written
  adapter (PeftModel.from_pretrained) are those of the run's last evaluation record
  (eval_logps/chosen, eval_logps/rejected: means over the pairs; eval_loss and eval_rewards/*: the
  per-pair values through the DPO loss), and the merged model (merge_adapter) gives them too; so
  does the model folder a full fine-tuning run writes;
- the stored reference log-probabilities (tokenized/reference_logps.json, per pair) are PEFT's base
  model with the adapter switched off (`disable_adapter()`, TRL's reference under PEFT);
- the reference pass runs the forward only, and gives bit for bit what the training plan's forward
  gives: at the first step (the starting weights) the policy's log-probs minus the reference's are
  exactly 0 (rewards/chosen, rewards/rejected), the loss ln 2;
- `surogate dpo --dry-run` says which reference the run has, its cost and its memory.
The runs use lora_dropout 0.3: dpo's evaluation runs the training plan with its dropout switched off
(docs/preference-tuning.md), as PEFT's eval mode does; with the masks on, the log-probs differ.
Tolerances (fp32 on both sides, transformers in float64 after the logits): log-probabilities and
losses rel 1e-6 (measured ≤ 1e-7); rewards, β times the small difference of two such sums, rel 1e-5
(measured ≤ 3.3e-6).
"""
import json
import math
import pathlib
import sys

import pytest

from conftest import run_surogate

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
peft = pytest.importorskip("peft")

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from test_preference_tuning import (CPU_ONLY, TEXT_ROWS, dpo_config, preview_pairs, qwen3_model,  # noqa: E402,F401
                                    read_records, write_jsonl)

RELATIVE = 1e-6  # the engine's fp32 log-probabilities against transformers' (each ~ -10 to -40 nats)
BETA = 0.1
HELD_OUT = [
    {"prompt": "The grass is", "chosen": " green.", "rejected": " blue."},
    {"prompt": "Three minus one is", "chosen": " two.", "rejected": " seven."},
    {"prompt": "Name an animal:", "chosen": " a cat", "rejected": " a table"},
]


def completion_logps(model, ids, completion):
    """The summed log-probability of the last `completion` tokens of `ids` under `model`."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0, :-1].double()
    per_token = torch.log_softmax(logits, dim=-1).gather(-1, torch.tensor(ids[1:]).unsqueeze(-1)).squeeze(-1)
    return float(per_token[-completion:].sum())


def pair_logps(model, pairs):
    return [(completion_logps(model, c, lc), completion_logps(model, r, lr)) for c, r, lc, lr in pairs]


def run_dpo(surogate_bin, model, folder, extra):
    """A DPO run of four steps with the held-out split; its output folder and the held-out pairs
    (token ids as the run builds them: test_preference_tuning checks them against TRL's)."""
    train = write_jsonl(folder / "pairs.jsonl", TEXT_ROWS)
    valid = write_jsonl(folder / "valid.jsonl", HELD_OUT)
    out = folder / "out"
    config = dpo_config(folder / "dpo.yaml", model, out, train,
                        f"validation_datasets:\n  - path: {valid}\n    type: preference\n{extra}"
                        "per_device_train_batch_size: 1\ngradient_accumulation_steps: 1\n"
                        f"max_steps: 4\neval_steps: 4\nloss:\n  type: dpo\n  dpo_beta: {BETA}\n")
    result = run_surogate(surogate_bin, "dpo", config, env=CPU_ONLY)
    assert result.returncode == 0, result.stdout + result.stderr
    chosen, rejected, losses = preview_pairs(surogate_bin, dpo_config(folder / "valid.yaml", model, out, valid))
    pairs = [(c, r, losses[2 * i], losses[2 * i + 1]) for i, (c, r) in enumerate(zip(chosen, rejected))]
    assert len(pairs) == len(HELD_OUT)
    return out, pairs


@pytest.fixture(scope="module")
def trained(surogate_bin, qwen3_model, tmp_path_factory):
    """The LoRA run, with merge_adapter."""
    return run_dpo(surogate_bin, qwen3_model, tmp_path_factory.mktemp("dpo_peft"),
                   "lora: true\nlora_rank: 4\nlora_alpha: 8\nlora_dropout: 0.3\nmerge_adapter: true\n"
                   "learning_rate: 2e-2\n")


def hf_base(model_dir):
    return transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()


def stored_reference(out, base):
    """The stored eval reference per pair, in the order of `base` (the same pairs' log-probs under the
    starting weights): the file keeps the token cache's row order, not the file's."""
    stored = json.loads((out / "tokenized" / "reference_logps.json").read_text())["eval"]
    stored = [(stored[2 * i], stored[2 * i + 1]) for i in range(len(stored) // 2)]
    order = [min(range(len(stored)), key=lambda i: abs(stored[i][0] - c)) for c, _ in base]
    assert sorted(order) == list(range(len(base)))
    reference = [stored[i] for i in order]
    for mine, theirs in zip(reference, base):
        assert mine == pytest.approx(theirs, rel=RELATIVE)
    return reference


def expect_last_eval(out, policy, reference):
    """The run's last eval record is `policy` (per pair) through DPO against `reference`, and moved
    from the first far beyond the tolerance (the weights were trained)."""
    losses = [-math.log(1.0 / (1.0 + math.exp(-BETA * ((c - c0) - (r - r0)))))
              for (c, r), (c0, r0) in zip(policy, reference)]
    mean = lambda values: sum(values) / len(values)  # noqa: E731
    expected = {"eval_logps/chosen": mean([c for c, _ in policy]), "eval_logps/rejected": mean([r for _, r in policy]),
                "eval_rewards/chosen": BETA * mean([c - c0 for (c, _), (c0, _) in zip(policy, reference)]),
                "eval_rewards/rejected": BETA * mean([r - r0 for (_, r), (_, r0) in zip(policy, reference)]),
                "eval_loss": mean(losses)}
    first, last = read_records(out, "eval")[0], read_records(out, "eval")[-1]
    # A reward is BETA × (policy − reference) log-probability: a difference of two values known to
    # RELATIVE each, so its bound is absolute, BETA × RELATIVE × (|policy| + |reference|), however
    # small the difference (a relative bound on it failed at 1.3e-5 with torch 2.15 for an error of
    # 5.5e-8 in the reward, 130× inside this bound).
    side = {"chosen": 0, "rejected": 1}
    for name, value in expected.items():
        if name.startswith("eval_rewards/"):
            i = side[name.split("/")[1]]
            bound = BETA * RELATIVE * mean([abs(p[i]) + abs(r[i]) for p, r in zip(policy, reference)])
            assert last[name] == pytest.approx(value, rel=0, abs=bound), (name, last, expected)
        else:
            assert last[name] == pytest.approx(value, rel=RELATIVE), (name, last, expected)
    assert abs(last["eval_logps/chosen"] - first["eval_logps/chosen"]) > 1e3 * RELATIVE * abs(first["eval_logps/chosen"])


def test_peft_loads_the_adapter_with_the_runs_log_probabilities(trained, qwen3_model):
    out, pairs = trained
    model = peft.PeftModel.from_pretrained(hf_base(qwen3_model), out).eval()
    policy = pair_logps(model, pairs)
    with model.disable_adapter():  # TRL's reference under PEFT: the base, adapter off
        reference = stored_reference(out, pair_logps(model, pairs))
    expect_last_eval(out, policy, reference)
    merged = pair_logps(hf_base(out / "merged"), pairs)
    for mine, theirs in zip(merged, policy):
        assert mine == pytest.approx(theirs, rel=RELATIVE)


def test_full_fine_tuning_writes_the_model_of_the_runs_log_probabilities(surogate_bin, qwen3_model, tmp_path):
    out, pairs = run_dpo(surogate_bin, qwen3_model, tmp_path, "lora: false\nlearning_rate: 1e-3\n")
    reference = stored_reference(out, pair_logps(hf_base(qwen3_model), pairs))
    expect_last_eval(out, pair_logps(hf_base(out), pairs), reference)


def test_the_forward_only_reference_is_the_training_forward_bit_for_bit(trained):
    out, _ = trained
    step = read_records(out, "step")[0]  # the training plan's forward at the starting weights
    assert step["rewards/chosen"] == 0.0 and step["rewards/rejected"] == 0.0, step
    assert step["loss"] == pytest.approx(math.log(2.0), rel=1e-7), step
    first = read_records(out, "eval")[0]
    assert first["eval_rewards/margins"] == 0.0 and first["eval_loss"] == pytest.approx(math.log(2.0), rel=1e-7)


@pytest.mark.parametrize("extra,expected", [
    ("lora: true\n", "# reference: log-probabilities precomputed from the starting weights (the base model, LoRA "
                     "adapters off)\n#   cost: one forward per pair (train and eval), once, before the first step\n"
                     "#   memory: 8 bytes per pair on the host (chosen and rejected, fp32), stored in {out}/tokenized/"
                     "reference_logps.json; no copy of the weights\n"),
    ("lora: false\n", "# reference: log-probabilities precomputed from the starting weights (the loaded model)\n"),
    ("loss:\n  type: simpo\n", "# reference: none (simpo needs no reference model): no reference pass, no memory\n"),
    ("loss:\n  type: orpo\n", "# reference: none (orpo needs no reference model): no reference pass, no memory\n"),
    ("loss:\n  reference_free: true\n",
     "# reference: none (dpo with reference_free needs no reference model): no reference pass, no memory\n"),
], ids=["lora", "full", "simpo", "orpo", "reference_free"])
def test_dry_run_says_which_reference_and_its_cost(surogate_bin, qwen3_model, tmp_path, extra, expected):
    yaml = pytest.importorskip("yaml")
    data = write_jsonl(tmp_path / "pairs.jsonl", TEXT_ROWS)
    out = tmp_path / "out"
    config = dpo_config(tmp_path / "dpo.yaml", qwen3_model, out, data, extra)
    result = run_surogate(surogate_bin, "dpo", config, "--dry-run", env=CPU_ONLY)
    assert result.returncode == 0, result.stdout + result.stderr
    assert expected.format(out=out) in result.stdout, result.stdout
    assert result.stdout.count("# reference:") == 1
    yaml.safe_load(result.stdout)  # still the resolved configuration, the lines are comments
    assert not (out / "tokenized").exists()  # nothing computed
    sft_config = tmp_path / "sft.yaml"
    sft_config.write_text(config.read_text().replace(str(data), str(write_jsonl(tmp_path / "rows.jsonl", [{"text": "hi"}])))
                          .replace("type: preference", "type: text"))
    sft = run_surogate(surogate_bin, "sft", sft_config, "--dry-run", env=CPU_ONLY)
    assert sft.returncode == 0 and "# reference:" not in sft.stdout, sft.stdout + sft.stderr
