"""dataloader_num_workers: rows are formatted and tokenized on N threads, and the token cache is
byte-identical for every N (unset = the machine's threads, 0 = the calling thread only): an `auto`
conversation dataset with the real Qwen3 tokenizer and chat template (rows of many lengths, some
truncated, some dropped), an instruction dataset, a validation split. A bad row is reported with
the same file and line whatever N; samples: limits the rows read the same way."""
import json

import pytest

from conftest import run_surogate


def conversation(i):
    turns = [{"role": "user", "content": f"Question {i}: " + "why " * (i % 37)},
             {"role": "assistant", "content": f"Answer {i}. " + "because " * (i % 53)}]
    if i % 3 == 0:
        turns += [{"role": "user", "content": "Thanks"}, {"role": "assistant", "content": "You are welcome."}]
    if i % 11 == 0:
        turns = [{"role": "user", "content": "no answer"}]  # no assistant turn: dropped
    return {"messages": turns}


def write_config(tmp_path, tokenizers_dir, rows, **extra):
    chats = tmp_path / "chats.jsonl"
    chats.write_text("".join(json.dumps(row) + "\n" for row in rows))
    instructions = tmp_path / "instructions.jsonl"
    instructions.write_text("".join(json.dumps({"instruction": f"repeat {i}", "output": "ok " * (i % 9 + 1)}) + "\n"
                                    for i in range(700)))
    config = tmp_path / "config.yaml"
    config.write_text(f"""model: {tokenizers_dir / 'qwen3'}
output_dir: {tmp_path / 'out'}
sequence_len: 96
truncation_strategy: split
validation_split_ratio: 0.05
datasets:
  - path: {chats}
    type: auto
  - path: {instructions}
    type: instruction
    instruction_field: instruction
    output_field: output
""" + "".join(f"{key}: {value}\n" for key, value in extra.items()))
    return config, chats


def test_the_token_cache_is_identical_for_every_number_of_workers(tmp_path, surogate_bin, tokenizers_dir):
    config, _ = write_config(tmp_path, tokenizers_dir, [conversation(i) for i in range(2500)])
    caches = {}
    for workers in (None, 0, 1, 2, 5):
        cache = tmp_path / f"cache-{workers}.surotok"
        overrides = [] if workers is None else [f"--dataloader_num_workers={workers}"]
        result = run_surogate(surogate_bin, "tokenize", config, "--output", cache, *overrides)
        assert result.returncode == 0, result.stderr
        assert "2500 rows read" in result.stdout, result.stdout
        caches[workers] = cache.read_bytes()
    assert len(caches[1]) > 100_000
    for workers, blob in caches.items():
        assert blob == caches[1], f"dataloader_num_workers={workers} wrote another cache"


@pytest.mark.parametrize("workers", [1, 4])
def test_a_bad_row_is_reported_at_its_line_whatever_the_workers(tmp_path, surogate_bin, tokenizers_dir, workers):
    rows = [conversation(i) for i in range(1500)]
    rows[1234] = {"messages": [{"role": "wizard", "content": "x"}]}
    rows[1400] = {"messages": [{"role": "sorcerer", "content": "y"}]}
    config, chats = write_config(tmp_path, tokenizers_dir, rows)
    result = run_surogate(surogate_bin, "tokenize", config, f"--dataloader_num_workers={workers}")
    assert result.returncode == 2
    assert f"{chats}:1235" in result.stderr and "wizard" in result.stderr, result.stderr


def test_samples_limit_the_rows_read_with_workers(tmp_path, surogate_bin, tokenizers_dir):
    config, chats = write_config(tmp_path, tokenizers_dir, [conversation(i) for i in range(1500)])
    text = config.read_text().replace(f"  - path: {chats}\n    type: auto\n",
                                      f"  - path: {chats}\n    type: auto\n    samples: 777\n")
    config.write_text(text)
    blobs = []
    for workers in (1, 3):
        cache = tmp_path / f"limited-{workers}.surotok"
        result = run_surogate(surogate_bin, "tokenize", config, "--output", cache, f"--dataloader_num_workers={workers}")
        assert result.returncode == 0, result.stderr
        assert "777 rows read" in result.stdout, result.stdout
        blobs.append(cache.read_bytes())
    assert blobs[0] == blobs[1]
