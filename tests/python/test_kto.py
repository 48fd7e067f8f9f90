"""`surogate dpo` with `loss.type: kto` against TRL's KTOTrainer (1.16, the oracle), on the CPU
backend in fp32, with the tiny random Qwen3 model and the real Qwen3 tokenizer of
test_preference_tuning.py:

- token ids: `surogate preview` of text and conversational kto rows shows exactly TRL's
  prompt_ids + completion_ids cut to max_length, loss on the completion only;
- the KL sequences: the reference log-probabilities Surogate stores for every row and its
  mismatched KL completion (rotated by one within each chunk of per_device_train_batch_size rows)
  equal TRL's `compute_ref_log_probs` over its collator's batches (input_ids and KL_input_ids);
- the KTO loss, its gradient (the global gradient norm of full fine-tuning) and the metrics: two rows
  per step at a learning rate too small to move an fp32 weight (1e-12), with the stored reference
  log-probabilities shifted (so that the log-ratios and the KL reference point are far from 0), equal
  TRL's own `KTOTrainer._compute_loss` given the same reference log-probabilities (its
  precompute_ref_log_probs path) and torch's autograd; relative tolerance 1e-5;
- bad rows are refused naming file and line;
- a learnable unpaired set (" yes." desirable, " no." undesirable after every prompt): a short LoRA
  run drives the held-out eval_rewards/accuracies (the fraction of rows whose reward lies on their
  label's side of the KL reference point; docs/preference-tuning.md) to at least 0.9.
"""
import copy
import json
import math

import pytest

from conftest import run_surogate
from test_preference_tuning import (CPU_ONLY, MAX_LENGTH, RELATIVE, WORDS, assert_bad_rows_refused,  # noqa: F401
                                    learnable, learnable_config, qwen3_model, read_records, write_jsonl)

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
trl = pytest.importorskip("trl")

DESIRABLE_WEIGHT, UNDESIRABLE_WEIGHT = 1.5, 0.7
TEXT_ROWS = [
    {"prompt": "The sky is", "completion": " blue.", "label": True},
    {"prompt": "Two plus two is", "completion": " five, or maybe six.", "label": False},
    {"prompt": "Name a fruit:", "completion": " an apple", "label": True},
    {"prompt": "Water boils at", "completion": " 50 degrees, or 100 degrees Celsius at sea level, which is 212 "
                                               "degrees Fahrenheit.", "label": False},
    {"prompt": "Say hi", "completion": " hi<|im_end|>", "label": True},
    {"prompt": "A long prompt that takes most of the room before its answer comes", "completion": " a chair",
     "label": False},
]
CHAT_ROWS = [
    {"prompt": [{"role": "user", "content": "What colour is grass?"}],
     "completion": [{"role": "assistant", "content": "Green."}], "label": True},
    {"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Capital of France?"}],
     "completion": [{"role": "assistant", "content": "Lyon."}], "label": False},
]


def kto_config(path, model, out, data, extra="", log="log.jsonl"):
    path.write_text(f"""model: {model}
output_dir: {out}
log_file: {out}/{log}
sequence_len: 64
max_length: {MAX_LENGTH}
datasets:
  - path: {data}
    type: kto
validation_split_ratio: 0
loss:
  type: kto
  desirable_weight: {DESIRABLE_WEIGHT}
  undesirable_weight: {UNDESIRABLE_WEIGHT}
{extra}""")
    return path


def kto_trainer(model_folder, out, rows):
    from datasets import Dataset
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_folder)
    model = transformers.AutoModelForCausalLM.from_pretrained(model_folder, dtype=torch.float32)
    args = trl.KTOConfig(output_dir=str(out), report_to=[], use_cpu=True, bf16=False, max_length=MAX_LENGTH,
                         per_device_train_batch_size=2, beta=0.1, desirable_weight=DESIRABLE_WEIGHT,
                         undesirable_weight=UNDESIRABLE_WEIGHT)
    trainer = trl.KTOTrainer(model=model, ref_model=copy.deepcopy(model), args=args,
                             train_dataset=Dataset.from_list(rows), processing_class=tokenizer)
    trainer.model.train()
    return trainer


@pytest.fixture(scope="module")
def trl_kto(qwen3_model, tmp_path_factory):  # noqa: F811
    return kto_trainer(qwen3_model, tmp_path_factory.mktemp("trl_kto"), TEXT_ROWS)


@pytest.mark.parametrize("rows", ["text", "chat"])
def test_token_ids_are_trls(surogate_bin, qwen3_model, tmp_path, rows):  # noqa: F811
    data_rows = TEXT_ROWS if rows == "text" else CHAT_ROWS
    data = write_jsonl(tmp_path / "rows.jsonl", data_rows)
    config = kto_config(tmp_path / "kto.yaml", qwen3_model, tmp_path / "out", data)
    result = run_surogate(surogate_bin, "preview", config, "-n", "10")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    ids = [[int(t) for t in line.split(":", 1)[1].split()] for line in lines
           if line.startswith("desirable ids:") or line.startswith("undesirable ids:")]
    labels = [line.startswith("desirable") for line in lines
              if line.startswith("desirable ids:") or line.startswith("undesirable ids:")]
    losses = [int(line.split("loss on ")[1].split()[0]) for line in lines if " loss on " in line]
    trainer = kto_trainer(qwen3_model, tmp_path / "trl", data_rows)
    expected = [((e["prompt_ids"] + e["completion_ids"])[:MAX_LENGTH], len(e["prompt_ids"]))
                for e in trainer.train_dataset]
    assert ids == [full for full, _ in expected]
    assert labels == [row["label"] for row in data_rows]
    assert losses == [len(full) - prompt for full, prompt in expected]
    assert any(len(full) == MAX_LENGTH for full, _ in expected) or rows == "chat"  # truncation exercised


def trl_batches(trainer):
    """TRL's collated batches of two rows (with their KL_input_ids), in order."""
    dataset = trainer.train_dataset
    return [trainer.data_collator([dataset[i] for i in range(start, min(start + 2, len(dataset)))])
            for start in range(0, len(dataset), 2)]


def test_loss_kl_and_gradients_are_trls(surogate_bin, qwen3_model, trl_kto, tmp_path):  # noqa: F811
    data = write_jsonl(tmp_path / "rows.jsonl", TEXT_ROWS)
    out = tmp_path / "out"
    extra = ("lora: false\nlearning_rate: 1e-12\nweight_decay: 0\nmax_grad_norm: 0\n"
             "per_device_train_batch_size: 2\ngradient_accumulation_steps: 1\nmax_steps: 3\n")
    first = run_surogate(surogate_bin, "dpo", kto_config(tmp_path / "kto.yaml", qwen3_model, out, data, extra),
                         env=CPU_ONLY)
    assert first.returncode == 0, first.stdout + first.stderr
    # The stored reference: [row, its KL sequence] per row, in file order (KTO keeps the order).
    reference_file = out / "tokenized" / "reference_logps.json"
    stored = json.loads(reference_file.read_text())
    batches = trl_batches(trl_kto)
    trl_rows, trl_kl = [], []
    for batch in batches:
        logps, kl_logps = trl_kto.compute_ref_log_probs(trl_kto.ref_model, batch)
        trl_rows += [float(v) for v in logps]
        trl_kl += [float(v) for v in kl_logps]
    assert stored["train"][0::2] == pytest.approx(trl_rows, rel=RELATIVE)
    assert stored["train"][1::2] == pytest.approx(trl_kl, rel=RELATIVE)

    # Shift the reference: log-ratios of ±0.4..2 and a KL reference point of about 3 (clamped at 0 never).
    shifts = [2.0, -1.5, 0.4, 1.0, -0.8, 0.6]
    shifted_rows = [value - shift for value, shift in zip(trl_rows, shifts)]
    shifted_kl = [value - 3.0 + 0.5 * i for i, value in enumerate(trl_kl)]
    stored["train"] = [v for pair in zip(shifted_rows, shifted_kl) for v in pair]
    reference_file.write_text(json.dumps(stored))
    second = run_surogate(surogate_bin, "dpo",
                          kto_config(tmp_path / "kto2.yaml", qwen3_model, out, data, extra, log="log2.jsonl"),
                          env=CPU_ONLY)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "reference log-probabilities: read from" in second.stdout, second.stdout
    steps = [json.loads(line) for line in (out / "log2.jsonl").read_text().splitlines()
             if json.loads(line).get("type") == "step"]
    assert len(steps) == 3
    model = trl_kto.model
    for index, (step, batch) in enumerate(zip(steps, batches)):
        model.zero_grad()
        trl_kto.precompute_ref_logps = True
        batch = dict(batch)
        batch["ref_logps"] = torch.tensor(shifted_rows[2 * index:2 * index + 2])
        batch["ref_KL_logps"] = torch.tensor(shifted_kl[2 * index:2 * index + 2])
        trl_kto._metrics["train"].clear()
        loss = trl_kto._compute_loss(model, batch, False)
        loss.backward()
        norm = math.sqrt(sum(float((p.grad.double() ** 2).sum()) for p in model.parameters() if p.grad is not None))
        expected = {"loss": float(loss.detach()), "grad_norm": norm}
        for name, values in trl_kto._metrics["train"].items():
            if name.split("/")[0] in ("kl", "rewards", "logps", "logits"):
                expected[name] = values[-1]
        assert {"kl", "rewards/chosen", "rewards/rejected", "rewards/margins", "logps/chosen", "logps/rejected",
                "logits/chosen", "logits/rejected"} <= set(expected), expected
        assert expected["kl"] > 0.5  # the reference point is exercised
        for name, value in expected.items():
            assert step[name] == pytest.approx(value, rel=RELATIVE), (name, step, expected)


def test_bad_rows_name_file_and_line(surogate_bin, qwen3_model, tmp_path):  # noqa: F811
    cases = {
        "no_label": ({"prompt": "a", "completion": "b"}, "the kto row has no 'label'"),
        "text_label": ({"prompt": "a", "completion": "b", "label": "yes"}, "'label' (label_field) must be true"),
        "empty": ({"prompt": "a", "completion": "", "label": True}, "'completion' (completion_field) is empty"),
        "long_prompt": ({"prompt": "word " * 40, "completion": "x", "label": False}, "fills max_length"),
    }
    assert_bad_rows_refused(surogate_bin, tmp_path, TEXT_ROWS[0], cases,
                            lambda path, out, data: kto_config(path, qwen3_model, out, data))


def test_kto_refuses_one_row_per_batch_and_preference_data(surogate_bin, qwen3_model, tmp_path):  # noqa: F811
    data = write_jsonl(tmp_path / "rows.jsonl", TEXT_ROWS)
    config = kto_config(tmp_path / "kto.yaml", qwen3_model, tmp_path / "out", data, "per_device_train_batch_size: 1\n")
    result = run_surogate(surogate_bin, "dpo", config, env=CPU_ONLY)
    assert result.returncode == 2 and "must be at least 2 for loss.type kto" in result.stderr, result.stderr
    pairs = write_jsonl(tmp_path / "pairs.jsonl", [{"prompt": "a", "chosen": "b", "rejected": "c"}])
    config = kto_config(tmp_path / "pairs.yaml", qwen3_model, tmp_path / "out_pairs", pairs)
    config.write_text(config.read_text().replace("type: kto\nvalidation", "type: preference\nvalidation"))
    result = run_surogate(surogate_bin, "dpo", config, env=CPU_ONLY)
    assert result.returncode == 2 and "must all be type: kto" in result.stderr, result.stderr


def test_learnable_kto_reaches_held_out_accuracy(surogate_bin, learnable, tmp_path):  # noqa: F811
    def unpaired(words):
        """A desirable and an undesirable row per word, ordered so that no row follows a row of its
        own prompt (a row's KL completion is its predecessor's)."""
        rows = []
        for i, word in enumerate(words):
            rows.append({"prompt": f"{word} =", "completion": " yes.", "label": True})
            rows.append({"prompt": f"{words[len(words) - 1 - i]} =", "completion": " no.", "label": False})
        return rows

    write_jsonl(tmp_path / "train.jsonl", unpaired(WORDS[:16]))
    write_jsonl(tmp_path / "valid.jsonl", unpaired(WORDS[16:24]))  # prompts the training never saw
    out = tmp_path / "out"
    config = learnable_config(tmp_path / "kto.yaml", learnable, out, tmp_path, "kto", "kto", 40)
    result = run_surogate(surogate_bin, "dpo", config)
    assert result.returncode == 0, result.stdout + result.stderr
    evals = read_records(out, "eval")
    assert evals[-1]["eval_rewards/accuracies"] >= 0.9, evals
    assert evals[-1]["eval_pairs"] == 16
    # Learned, not found: at the start the policy is the reference (every reward 0: at most the
    # undesirable half can lie below a reference point z ≥ 0).
    assert evals[0]["eval_rewards/accuracies"] <= 0.5 and abs(evals[0]["eval_rewards/margins"]) < 1e-6, evals
    assert evals[-1]["eval_rewards/margins"] > 0.0, evals
