"""The embedded default example (examples/quickstart/): make_example.py writes the same
well-formed task every time, config.yaml renders it the way evaluate.py decodes it, and
evaluate.py's verdict (the last line of scripts/quickstart.sh) says "learned" only when the
thresholds are met; its answers are `surogate generate`'s (checked against a numpy Llama on a
briefly trained model). scripts/quickstart.sh is the end-to-end run."""
import json
import pathlib
import subprocess
import sys

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
QUICKSTART = REPO_ROOT / "examples" / "quickstart"
sys.path.insert(0, str(QUICKSTART))
import evaluate  # noqa: E402
import make_example  # noqa: E402


def generate(folder):
    result = subprocess.run([sys.executable, str(QUICKSTART / "make_example.py"), str(folder)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return folder


def rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_make_example_is_deterministic(tmp_path):
    first, second = generate(tmp_path / "a"), generate(tmp_path / "b")
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert [str(f) for f in files] == ["model/config.json", "model/tokenizer.json", "model/tokenizer_config.json",
                                       "train.jsonl", "valid.jsonl"]
    for name in files:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_rows_are_reversals_of_short_words_and_valid_is_held_out(tmp_path):
    ex = generate(tmp_path / "ex")
    train, valid = rows(ex / "train.jsonl"), rows(ex / "valid.jsonl")
    assert (len(train), len(valid)) == (make_example.TRAIN_ROWS, make_example.VALID_ROWS)
    for row in train + valid:
        assert row.keys() == {"instruction", "output"}
        word = row["instruction"]
        assert make_example.MIN_LETTERS <= len(word) <= make_example.MAX_LETTERS
        assert set(word) <= set(make_example.ALPHABET)
        assert row["output"] == word[::-1]
    train_words, valid_words = [r["instruction"] for r in train], [r["instruction"] for r in valid]
    assert len(set(train_words)) == len(train_words) and len(set(valid_words)) == len(valid_words)
    assert not set(train_words) & set(valid_words)
    lengths = [len(w) for w in train_words]
    assert set(lengths) == set(range(make_example.MIN_LETTERS, make_example.MAX_LETTERS + 1))


def test_tokenizer_and_model_config_fit_the_prompts(tmp_path):
    ex = generate(tmp_path / "ex")
    tokenizer = json.loads((ex / "model" / "tokenizer.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    assert sorted(vocab.values()) == list(range(len(vocab)))
    config = json.loads((ex / "model" / "config.json").read_text())
    assert config["vocab_size"] == len(vocab) == 35  # tests/train asserts the embedding shape
    assert config["num_attention_heads"] % config["num_key_value_heads"] == 0
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        assert config[key] == vocab[{"bos_token_id": "<s>", "eos_token_id": "</s>", "pad_token_id": "<pad>"}[key]]
    # Every character of the quickstart prompt and of the tests' "reverse: ..." prompt is a token.
    word = make_example.ALPHABET
    for text in (make_example.PROMPT_FORMAT.format(instruction=word, output=word[::-1]),
                 f"reverse: {word} = {word[::-1]}"):
        assert all(c in vocab for c in text), text
    longest = 1 + len(make_example.PROMPT_FORMAT.format(instruction="x" * make_example.MAX_LETTERS,
                                                        output="x" * make_example.MAX_LETTERS)) + 1
    assert longest <= config["max_position_embeddings"]


def test_config_yaml_renders_rows_as_evaluate_prompts_them():
    yaml = pytest.importorskip("yaml")
    config = yaml.safe_load((QUICKSTART / "config.yaml").read_text())
    assert config["model"] == "examples/quickstart/generated/model"
    datasets = config["datasets"] + config["validation_datasets"]
    assert [d["path"] for d in datasets] == ["examples/quickstart/generated/train.jsonl",
                                             "examples/quickstart/generated/valid.jsonl"]
    for dataset in datasets:
        assert dataset["type"] == "instruction"  # loss on the answer and </s> only
        assert dataset["prompt_format"] == make_example.PROMPT_FORMAT
    assert evaluate.prompt_of("abc") + "cba" == make_example.PROMPT_FORMAT.format(instruction="abc", output="cba")
    assert config["max_steps"] * config["per_device_train_batch_size"] * config["sequence_len"] <= 400 * 16 * 64


def write_log(folder, losses, accuracy):
    records = [{"type": "config"}] + [{"type": "eval", "step": 50 * i, "eval_loss": loss, "eval_accuracy": accuracy}
                                      for i, loss in enumerate(losses)] + [{"type": "summary"}]
    (folder / "log-config-20260101-000000.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_verdict_says_learned_only_when_both_thresholds_are_met(tmp_path):
    write_log(tmp_path, [3.6, 1.0, 0.02], 0.99)
    logged = evaluate.logged_eval(tmp_path)
    assert (logged["loss_before"], logged["loss_after"], logged["steps"]) == (3.6, 0.02, 100)

    learned, line = evaluate.verdict({"exact": 199, "exact_match": 0.995}, logged, 200, 0.9, 0.6)
    assert learned
    assert line == ("quickstart: learned — held-out exact match 99.5% (199/200), "
                    "held-out answer loss 3.600 -> 0.020 (-99.4%)")

    learned, line = evaluate.verdict({"exact": 20, "exact_match": 0.1}, logged, 200, 0.9, 0.6)
    assert not learned and line.startswith("quickstart: NOT learned") and "need >= 90%" in line

    write_log(tmp_path, [3.6, 2.0], 0.99)
    learned, line = evaluate.verdict({"exact": 200, "exact_match": 1.0}, evaluate.logged_eval(tmp_path), 200, 0.9, 0.6)
    assert not learned and "need a fall of >= 60%" in line

    # Without numpy / safetensors (no greedy scores) the log's answer token accuracy stands in.
    write_log(tmp_path, [3.6, 0.02], 0.97)
    learned, line = evaluate.verdict({}, evaluate.logged_eval(tmp_path), 200, 0.9, 0.6)
    assert learned and "exact match skipped" in line

    learned, line = evaluate.verdict({"exact": 200, "exact_match": 1.0}, evaluate.logged_eval(tmp_path / "none"),
                                     200, 0.9, 0.6)
    assert not learned and "no eval records" in line


def test_greedy_scores_decode_with_surogate_generate(surogate_bin, tmp_path):
    """evaluate.py's answers come from `surogate generate`: on a briefly trained model they are the
    independent numpy Llama's greedy answers (rows whose greedy path passes a near-tie skipped)."""
    np = pytest.importorskip("numpy")
    pytest.importorskip("safetensors")
    import numpy_llama
    from conftest import make_quickstart_example, quickstart_sft_config, run_surogate

    ex = make_quickstart_example(tmp_path)
    out = tmp_path / "trained"
    config = quickstart_sft_config(tmp_path / "q.yaml", ex / "model", out, ex, max_steps=30,
                                   extra="lora: false\ninit_projections_to_zero: false\n")
    config.write_text(config.read_text().replace('prompt_format: "reverse: {instruction} = {output}"',
                                                 f'prompt_format: "{make_example.PROMPT_FORMAT}"'))
    assert run_surogate(surogate_bin, "sft", config).returncode == 0
    model_config, weights, vocab = numpy_llama.load_model(out)
    inverse = {index: token for token, index in vocab.items()}
    rows = [json.loads(line) for line in (ex / "valid.jsonl").read_text().splitlines()[:24]]
    expected, clear = [], []
    for row in rows:
        ids = [vocab["<s>"]] + [vocab[c] for c in evaluate.prompt_of(row["instruction"])]
        answer, margin = "", np.inf
        for _ in range(len(row["instruction"]) + 1):
            logits = numpy_llama.logits_of(model_config, weights, np.array(ids))[-1]
            token = int(np.argmax(logits))
            top2 = np.sort(logits)[-2:]
            margin = min(margin, top2[1] - top2[0])
            if token == vocab["</s>"]:
                break
            answer += inverse[token]
            ids.append(token)
        expected.append(answer)
        clear.append(margin > 1e-4)
    kept = [row for row, ok in zip(rows, clear) if ok]
    assert len(kept) >= 16, "too many near-ties"
    scores = evaluate.greedy_scores(out, kept, str(surogate_bin))
    pairs = [(answer, row["output"]) for answer, row, ok in zip(expected, rows, clear) if ok]
    assert scores["exact"] == sum(answer == target for answer, target in pairs)
    right = sum(a == b for answer, target in pairs for a, b in zip(answer[:len(target) + 1], target))
    assert scores["char_accuracy"] == pytest.approx(right / sum(len(target) for _, target in pairs), abs=1e-12)
    assert 0 < right  # the model learned something: the letters compared are not all wrong
    assert evaluate.greedy_scores(out, kept, None) == {}
