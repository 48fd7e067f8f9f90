"""`surogate dpo` against TRL (the oracle, a test dependency: scripts/install_deps.sh), on the CPU
backend in fp32, with a tiny random Qwen3 model and the real Qwen3 tokenizer:

- token ids: `surogate preview` of text and conversational preference rows shows, for every pair,
  exactly the ids TRL's DPOTrainer builds (prompt_ids + chosen_ids / rejected_ids, cut to max_length)
  and marks loss on the completion tokens only;
- per-pair log-probabilities, each loss type's loss and its gradients (through the global gradient
  norm of full fine-tuning): one pair per step at a learning rate too small to move an fp32 weight
  (1e-12), so every step's record is the pair's values under the initial weights; TRL computes the
  same pair with its own code (DPOTrainer._compute_loss for sigmoid / sigmoid_norm / ipo with the
  reference log-probs given, CPOTrainer.cpo_loss for simpo, ORPOTrainer.odds_ratio_loss plus its NLL
  term for orpo) and torch's autograd gives the gradient; relative tolerance 1e-5;
- a learnable preference set (chosen answers end in "yes", rejected ones in "no"): a short LoRA run
  per loss type drives the held-out eval_rewards/accuracies to at least 0.9.
"""
import copy
import json
import math
import os
import pathlib
import shutil
import sys

import pytest

from conftest import run_surogate

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
trl = pytest.importorskip("trl")

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from tiny_model import TOKENIZER_CONFIG, char_tokenizer, tokenizer_size  # noqa: E402

RELATIVE = 1e-5
MAX_LENGTH = 24
# The comparisons with TRL run on the CPU backend (fp32) even where a GPU is visible; the learnable
# runs take the machine's backend (CUDA on a GPU machine: the bf16 path end to end).
CPU_ONLY = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}

TEXT_ROWS = [
    {"prompt": "The sky is", "chosen": " blue.", "rejected": " green."},
    {"prompt": "Two plus two is", "chosen": " four.", "rejected": " five, or maybe six."},
    {"prompt": "Name a fruit:", "chosen": " an apple", "rejected": " a chair"},
    {"prompt": "Water boils at", "chosen": " 100 degrees Celsius at sea level, which is 212 degrees Fahrenheit, "
                                           "as every kitchen thermometer shows.", "rejected": " 50 degrees."},
    {"prompt": "Say hi", "chosen": " hi<|im_end|>", "rejected": " bye"},
]
CHAT_ROWS = [
    {"prompt": [{"role": "user", "content": "What colour is grass?"}],
     "chosen": [{"role": "assistant", "content": "Green."}],
     "rejected": [{"role": "assistant", "content": "Purple, obviously."}]},
    {"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Capital of France?"}],
     "chosen": [{"role": "assistant", "content": "Paris."}],
     "rejected": [{"role": "assistant", "content": "Lyon."}]},
]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.fixture(scope="module")
def qwen3_model(tmp_path_factory, tokenizers_dir):
    """A tiny random Qwen3 (fp32, tied head) with the real Qwen3 tokenizer files."""
    folder = tmp_path_factory.mktemp("qwen3_tiny")
    torch.manual_seed(0)
    config = transformers.Qwen3Config(vocab_size=151936, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=1, head_dim=8,
                                      max_position_embeddings=128, tie_word_embeddings=True, torch_dtype="float32")
    model = transformers.Qwen3ForCausalLM(config)
    with torch.no_grad():  # larger random weights, so log-probabilities and gradients are far from uniform
        for parameter in model.parameters():
            if parameter.dim() == 2:
                parameter.normal_(0.0, 0.2)
    model.save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tokenizers_dir / "qwen3" / name, folder / name)
    return folder


@pytest.fixture(scope="module")
def trl_trainer(qwen3_model, tmp_path_factory):
    """TRL's DPOTrainer over the text rows (its tokenization, collator and loss)."""
    from datasets import Dataset
    tokenizer = transformers.AutoTokenizer.from_pretrained(qwen3_model)
    model = transformers.AutoModelForCausalLM.from_pretrained(qwen3_model, dtype=torch.float32)
    args = trl.DPOConfig(output_dir=str(tmp_path_factory.mktemp("trl")), report_to=[], use_cpu=True,
                         max_length=MAX_LENGTH, per_device_train_batch_size=1, beta=0.1, loss_type=["sigmoid"])
    trainer = trl.DPOTrainer(model=model, ref_model=copy.deepcopy(model), args=args,
                             train_dataset=Dataset.from_list(TEXT_ROWS), processing_class=tokenizer)
    trainer.model.train()
    return trainer


def trl_token_ids(trainer, rows):
    from datasets import Dataset
    dataset = trainer._prepare_dataset(Dataset.from_list(rows), trainer.processing_class, trainer.args, "test")
    pairs = []
    for example in dataset:
        prompt = example["prompt_ids"]
        pairs.append(((prompt + example["chosen_ids"])[:MAX_LENGTH], (prompt + example["rejected_ids"])[:MAX_LENGTH],
                      len(prompt)))
    return pairs


def preview_pairs(surogate_bin, config):
    result = run_surogate(surogate_bin, "preview", config, "-n", "10")
    assert result.returncode == 0, result.stderr
    chosen = [[int(t) for t in line.split(":", 1)[1].split()] for line in result.stdout.splitlines()
              if line.startswith("chosen ids:")]
    rejected = [[int(t) for t in line.split(":", 1)[1].split()] for line in result.stdout.splitlines()
                if line.startswith("rejected ids:")]
    losses = [int(line.split("loss on ")[1].split()[0]) for line in result.stdout.splitlines()
              if line.startswith("--- chosen loss on") or line.startswith("--- rejected loss on")]
    return chosen, rejected, losses


def dpo_config(path, model, out, data, extra=""):
    path.write_text(f"""model: {model}
output_dir: {out}
log_file: {out}/log.jsonl
sequence_len: 64
max_length: {MAX_LENGTH}
datasets:
  - path: {data}
    type: preference
validation_split_ratio: 0
{extra}""")
    return path


@pytest.mark.parametrize("rows", ["text", "chat"])
def test_token_ids_are_trls(surogate_bin, qwen3_model, trl_trainer, tmp_path, rows):
    data = write_jsonl(tmp_path / "pairs.jsonl", TEXT_ROWS if rows == "text" else CHAT_ROWS)
    config = dpo_config(tmp_path / "dpo.yaml", qwen3_model, tmp_path / "out", data)
    chosen, rejected, losses = preview_pairs(surogate_bin, config)
    expected = trl_token_ids(trl_trainer, TEXT_ROWS if rows == "text" else CHAT_ROWS)
    assert [c for c, _, _ in expected] == chosen
    assert [r for _, r, _ in expected] == rejected
    assert losses == [n for c, r, p in expected for n in (len(c) - p, len(r) - p)]
    assert any(len(c) == MAX_LENGTH for c, _, _ in expected) or rows == "chat"  # truncation exercised


def read_records(out, kind):
    return [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()
            if json.loads(line).get("type") == kind]


def policy_logps(model, batch):
    """Summed completion log-probs and completion lengths of a [chosen; rejected] batch (TRL's layout)."""
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, :-1]
    targets = batch["input_ids"][:, 1:]
    mask = batch["completion_mask"][:, 1:].float()
    per_token = torch.log_softmax(logits.float(), dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return (per_token * mask).sum(-1), mask.sum(-1)


def trl_pair(trainer, index, loss_type, options):
    """TRL's loss, log-probs and the global gradient norm of one pair under the initial weights."""
    from types import SimpleNamespace
    model = trainer.model
    model.zero_grad()
    batch = trainer.data_collator([trainer.train_dataset[index]])
    logps, lengths = policy_logps(model, batch)
    if loss_type in ("sigmoid", "sigmoid_norm", "ipo"):
        trainer.loss_types, trainer.loss_weights = [loss_type], [1.0]
        trainer.precompute_ref_logps = True
        batch["ref_chosen_logps"], batch["ref_rejected_logps"] = torch.zeros(1), torch.zeros(1)
        trainer._metrics["train"].clear()
        loss = trainer._compute_loss(model, batch, False)
    elif loss_type == "simpo":
        from trl.experimental.cpo import CPOTrainer
        fake = SimpleNamespace(beta=0.1, loss_type="simpo", simpo_gamma=options["simpo_gamma"], label_smoothing=0.0,
                               cpo_alpha=0.0, alpha=0.0, accelerator=SimpleNamespace(device="cpu"))
        losses, _, _ = CPOTrainer.cpo_loss(fake, logps[0:1] / lengths[0:1], logps[1:2] / lengths[1:2])
        loss = losses.mean()
    else:
        from trl.experimental.orpo import ORPOTrainer
        fake = SimpleNamespace(beta=options["beta"], accelerator=SimpleNamespace(device="cpu"))
        losses = ORPOTrainer.odds_ratio_loss(fake, logps[0:1] / lengths[0:1], logps[1:2] / lengths[1:2])[0]
        loss = -logps[0] / lengths[0] - losses.mean()  # policy_nll_loss - losses.mean()
    loss.backward()
    norm = math.sqrt(sum(float((p.grad.double() ** 2).sum()) for p in model.parameters() if p.grad is not None))
    return {"loss": float(loss), "grad_norm": norm, "logps/chosen": float(logps[0]),
            "logps/rejected": float(logps[1])}


CASES = [
    ("dpo", {"reference_free": True}, "sigmoid"),
    ("dpo", {"reference_free": True, "length_norm": True}, "sigmoid_norm"),
    ("ipo", {"reference_free": True}, "ipo"),
    ("simpo", {"simpo_gamma": 0.5}, "simpo"),
    ("orpo", {"beta": 0.1}, "orpo"),
]


@pytest.mark.parametrize("loss_type,options,trl_type", CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_losses_log_probs_and_gradients_are_trls(surogate_bin, qwen3_model, trl_trainer, tmp_path, loss_type, options,
                                                 trl_type):
    data = write_jsonl(tmp_path / "pairs.jsonl", TEXT_ROWS)
    loss_block = "loss:\n  type: " + loss_type + "\n" + "".join(f"  {k}: {str(v).lower()}\n" for k, v in options.items())
    config = dpo_config(tmp_path / "dpo.yaml", qwen3_model, tmp_path / "out", data,
                        f"lora: false\nlearning_rate: 1e-12\nweight_decay: 0\nmax_grad_norm: 0\n"
                        f"per_device_train_batch_size: 1\ngradient_accumulation_steps: 1\nmax_steps: {len(TEXT_ROWS)}\n{loss_block}")
    result = run_surogate(surogate_bin, "dpo", config, env=CPU_ONLY)
    assert result.returncode == 0, result.stdout + result.stderr
    steps = read_records(tmp_path / "out", "step")
    assert len(steps) == len(TEXT_ROWS)
    for name in ("loss", "rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracies", "logps/chosen",
                 "logps/rejected", "logits/chosen", "logits/rejected"):
        assert all(name in step for step in steps), name
    expected = [trl_pair(trl_trainer, i, trl_type, options) for i in range(len(TEXT_ROWS))]
    for step in steps:  # the loader shuffles: each step is the pair with its chosen log-prob
        pair = min(expected, key=lambda e: abs(e["logps/chosen"] - step["logps/chosen"]))
        for name, value in pair.items():
            assert step[name] == pytest.approx(value, rel=RELATIVE), (name, step, pair)


def test_dpo_with_reference_starts_at_ln2(surogate_bin, qwen3_model, tmp_path):
    data = write_jsonl(tmp_path / "pairs.jsonl", TEXT_ROWS)
    config = dpo_config(tmp_path / "dpo.yaml", qwen3_model, tmp_path / "out", data,
                        "lora: true\nlora_dropout: 0\nper_device_train_batch_size: 2\nmax_steps: 1\n")
    result = run_surogate(surogate_bin, "dpo", config, env=CPU_ONLY)
    assert result.returncode == 0, result.stdout + result.stderr
    step = read_records(tmp_path / "out", "step")[0]
    assert step["loss"] == pytest.approx(math.log(2.0), rel=1e-6)
    assert step["rewards/margins"] == pytest.approx(0.0, abs=1e-6)
    assert (tmp_path / "out" / "tokenized" / "reference_logps.json").exists()


def test_fp8_hybrid_starts_at_ln2(surogate_bin, qwen3_model, tmp_path):
    """recipe fp8_hybrid (the CPU backend's exact emulation): the FP8 scales are calibrated before the
    reference pass, so the policy's log-probabilities are the reference's bits although its
    micro-batches hold other pairs than the pass's (without the calibration each micro-batch scaled
    by its own amax and the first loss was 0.698), and with the calibration's headroom the scales
    stay put over the next steps (without it the later steps' amaxes moved them: 0.691, 0.698, ...):
    at a learning rate too small to move a weight every step's loss is ln 2."""
    rows = [{"prompt": f"Say {w} and", "chosen": f" {w} it is, {w}.", "rejected": f" no {w}, never" * (1 + i % 3)}
            for i, w in enumerate(WORDS[:12])]
    data = write_jsonl(tmp_path / "pairs.jsonl", rows)
    config = dpo_config(tmp_path / "dpo.yaml", qwen3_model, tmp_path / "out", data,
                        "recipe: fp8_hybrid\nlora: false\nlearning_rate: 1e-12\nper_device_train_batch_size: 2\n"
                        "gradient_accumulation_steps: 2\nmax_steps: 4\n")
    result = run_surogate(surogate_bin, "dpo", config, env=CPU_ONLY)
    assert result.returncode == 0, result.stdout + result.stderr
    steps = read_records(tmp_path / "out", "step")
    assert len(steps) == 4
    for step in steps:
        assert step["loss"] == pytest.approx(math.log(2.0), rel=1e-6), step
        assert step["rewards/chosen"] == 0.0 and step["rewards/rejected"] == 0.0, step
    assert "the FP8 scales from a forward over 12 training pairs" in result.stdout, result.stdout
    # Two CPU ranks of one micro-batch each quantize as the one rank of two micro-batches: the
    # reference pass's amaxes are dropped on both (TrainingDevice::skip_update), so every step's
    # scales match (before, the ranks' steps 2 and 3 drifted: 0.676 against 0.647).
    ranks = run_surogate(surogate_bin, "dpo", config, "--gpus=2", "--gradient_accumulation_steps=1",
                         "--output_dir", str(tmp_path / "ranks"), "--log_file", str(tmp_path / "ranks" / "log.jsonl"),
                         env=CPU_ONLY)
    assert ranks.returncode == 0, ranks.stdout + ranks.stderr
    for one, two in zip(read_records(tmp_path / "out", "step"), read_records(tmp_path / "ranks", "step"), strict=True):
        for name in ("loss", "grad_norm", "logps/chosen", "logps/rejected"):
            assert two[name] == pytest.approx(one[name], rel=1e-6), (name, one, two)


@pytest.mark.parametrize("backend", ["cpu", "machine"])
def test_shared_prompts_train_as_whole_pairs(surogate_bin, qwen3_model, tmp_path, backend):
    """loss.share_prompts (the default): each pair's prompt once in a shorter row, its completions
    attending to it; three steps of full fine-tuning give the records of the two-document rows: on
    the CPU backend (fp32) to rel 1e-5, on a GPU (bf16, products of other row counts) to rel 2e-2."""
    from conftest import gpu_visible
    if backend == "machine" and not gpu_visible():
        pytest.skip("no GPU: the CPU backend's case covers the layout")
    relative = RELATIVE if backend == "cpu" else 2e-2
    data = write_jsonl(tmp_path / "pairs.jsonl", TEXT_ROWS)
    runs = {}
    for shared in (True, False):
        out = tmp_path / f"out_{shared}"
        config = dpo_config(tmp_path / f"dpo_{shared}.yaml", qwen3_model, out, data,
                            "lora: false\nlearning_rate: 1e-3\nper_device_train_batch_size: 2\nmax_steps: 3\n"
                            f"loss:\n  type: dpo\n  share_prompts: {str(shared).lower()}\n")
        result = run_surogate(surogate_bin, "dpo", config, env=CPU_ONLY if backend == "cpu" else None)
        assert result.returncode == 0, result.stdout + result.stderr
        assert ("share their prompts: rows of" in result.stdout) == shared, result.stdout
        runs[shared] = read_records(out, "step")
    assert len(runs[True]) == len(runs[False]) == 3
    for with_sharing, without in zip(runs[True], runs[False]):
        # On a GPU the small differences (margins, mean logits) are at bf16's noise: the sums only.
        names = ("loss", "grad_norm", "logps/chosen", "logps/rejected")
        if backend == "cpu":
            names += ("logits/chosen", "logits/rejected", "rewards/margins")
        for name in names:
            assert with_sharing[name] == pytest.approx(without[name], rel=relative, abs=1e-9), (name, with_sharing, without)


def test_bad_rows_name_file_and_line(surogate_bin, qwen3_model, tmp_path):
    cases = {
        "no_chosen": ({"prompt": "a", "rejected": "b"}, "has no 'chosen'"),
        "empty": ({"prompt": "a", "chosen": "", "rejected": "b"}, "'chosen' (chosen_field) is empty"),
        "long_prompt": ({"prompt": "word " * 40, "chosen": "x", "rejected": "y"}, "fills max_length"),
    }
    assert_bad_rows_refused(surogate_bin, tmp_path, TEXT_ROWS[0], cases,
                            lambda path, out, data: dpo_config(path, qwen3_model, out, data))


def assert_bad_rows_refused(surogate_bin, tmp_path, good_row, cases, make_config):
    """Each case {name: (bad row, message)}: `surogate dpo` on [good_row, bad row] exits 2 with the
    message and name.jsonl:2 on stderr; make_config(path, out, data) writes the configuration."""
    for name, (bad, message) in cases.items():
        data = write_jsonl(tmp_path / f"{name}.jsonl", [good_row, bad])
        config = make_config(tmp_path / f"{name}.yaml", tmp_path / f"out_{name}", data)
        result = run_surogate(surogate_bin, "dpo", config, env=CPU_ONLY)
        assert result.returncode == 2, result.stdout + result.stderr
        assert f"{name}.jsonl:2" in result.stderr and message in result.stderr, result.stderr


def test_sft_refuses_preference_data(surogate_bin, qwen3_model, tmp_path):
    data = write_jsonl(tmp_path / "pairs.jsonl", TEXT_ROWS)
    config = dpo_config(tmp_path / "sft.yaml", qwen3_model, tmp_path / "out", data)
    result = run_surogate(surogate_bin, "sft", config)
    assert result.returncode == 2 and "only `surogate dpo` trains on" in result.stderr, result.stderr


WORDS = ["apple", "river", "stone", "cloud", "green", "happy", "light", "music", "ocean", "plant", "quiet", "sunny",
         "tiger", "water", "zebra", "bread", "chair", "dream", "field", "grape", "house", "juice", "knife", "lemon"]


@pytest.fixture(scope="module")
def learnable(tmp_path_factory):
    """A tiny random Llama with the character tokenizer, and pairs whose chosen answer ends in "yes"
    and rejected one in "no", split 20 / 8 into train and held-out validation files."""
    folder = tmp_path_factory.mktemp("learnable")
    tokenizer = char_tokenizer()
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    (folder / "tokenizer_config.json").write_text(json.dumps(TOKENIZER_CONFIG))
    torch.manual_seed(1)
    config = transformers.LlamaConfig(vocab_size=tokenizer_size(tokenizer), hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                                      max_position_embeddings=64, tie_word_embeddings=True, bos_token_id=1,
                                      eos_token_id=2, pad_token_id=0)
    transformers.LlamaForCausalLM(config).save_pretrained(folder)
    rows = [{"prompt": f"{word} =", "chosen": " yes.", "rejected": " no."} for word in WORDS[:24]]
    write_jsonl(folder / "train.jsonl", rows[:16])
    write_jsonl(folder / "valid.jsonl", rows[16:])  # prompts the training never saw
    return folder


def learnable_config(path, model, out, data, dataset_type, loss_type, steps):
    """A short LoRA run on the learnable set: data/train.jsonl, held-out data/valid.jsonl."""
    path.write_text(f"""model: {model}
output_dir: {out}
log_file: {out}/log.jsonl
sequence_len: 32
max_length: 16
use_chat_template: false
lora: true
lora_rank: 8
lora_alpha: 16
lora_dropout: 0
learning_rate: 3e-2
per_device_train_batch_size: 4
max_steps: {steps}
eval_steps: {steps}
datasets:
  - path: {data}/train.jsonl
    type: {dataset_type}
validation_datasets:
  - path: {data}/valid.jsonl
    type: {dataset_type}
loss:
  type: {loss_type}
""")
    return path


@pytest.mark.parametrize("loss_type", ["dpo", "ipo", "simpo", "orpo"])
def test_learnable_preferences_reach_held_out_accuracy(surogate_bin, learnable, tmp_path, loss_type):
    out = tmp_path / "out"
    config = learnable_config(tmp_path / "dpo.yaml", learnable, out, learnable, "preference", loss_type, 20)
    result = run_surogate(surogate_bin, "dpo", config)
    assert result.returncode == 0, result.stdout + result.stderr
    evals = read_records(out, "eval")
    assert evals[-1]["eval_rewards/accuracies"] >= 0.9, evals
    assert evals[-1]["eval_pairs"] == 8
    # Learned, not found: the starting model prefers the rejected answers of the held-out pairs (dpo /
    # ipo: margin 0 and accuracy 0, the reference is the starting policy), and the margin grew.
    assert evals[0]["eval_rewards/accuracies"] < 0.5, evals
    assert evals[-1]["eval_rewards/margins"] > evals[0]["eval_rewards/margins"], evals
    if loss_type in ("dpo", "ipo"):
        assert evals[0]["eval_rewards/accuracies"] == 0.0 and abs(evals[0]["eval_rewards/margins"]) < 1e-6, evals



def test_resume_reads_the_stored_reference(surogate_bin, qwen3_model, tmp_path):
    """A resumed run reads the reference log-probabilities stored beside the token cache, and refuses
    to start without them (it cannot recompute them from trained weights)."""
    data = write_jsonl(tmp_path / "pairs.jsonl", TEXT_ROWS)
    out = tmp_path / "out"
    config = dpo_config(tmp_path / "dpo.yaml", qwen3_model, out, data,
                        "lora_dropout: 0\nper_device_train_batch_size: 1\ngradient_accumulation_steps: 1\n"
                        "max_steps: 2\nsave_steps: 2\n")
    first = run_surogate(surogate_bin, "dpo", config)
    assert first.returncode == 0 and "reference log-probabilities: computing" in first.stdout, first.stdout + first.stderr
    resumed = run_surogate(surogate_bin, "dpo", config, "--max_steps=4", "--resume_from_checkpoint=true")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "reference log-probabilities: read from" in resumed.stdout, resumed.stdout
    (out / "tokenized" / "reference_logps.json").unlink()
    missing = run_surogate(surogate_bin, "dpo", config, "--max_steps=5", "--resume_from_checkpoint=true")
    assert missing.returncode == 2 and "cannot recompute them from trained weights" in missing.stderr, missing.stderr
