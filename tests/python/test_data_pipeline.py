"""End-to-end data path through the CLI with the real Qwen3 tokenizer: `surogate tokenize` builds,
reuses and rebuilds the token cache; the assistant loss mask equals the chat template's
assistant spans (checked with transformers' own template rendering); `surogate preview` marks
loss tokens; bad data fails with file and line."""
import json
import pathlib

import pytest

from conftest import run_surogate

transformers = pytest.importorskip("transformers")


def write_config(tmp_path, tokenizers_dir, dataset, **extra):
    extra.setdefault("sequence_len", 64)
    lines = [f"model: {tokenizers_dir / 'qwen3'}", f"output_dir: {tmp_path / 'out'}", "datasets:"]
    first = True
    for key, value in dataset.items():
        lines.append(("  - " if first else "    ") + f"{key}: {json.dumps(value)}")
        first = False
    for key, value in extra.items():
        lines.append(f"{key}: {json.dumps(value)}")
    path = tmp_path / "config.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def chat_rows(count):
    return [{"messages": [{"role": "user", "content": f"What is {i} plus {i}?"},
                          {"role": "assistant", "content": f"It is {2 * i}."},
                          {"role": "user", "content": "Thanks"},
                          {"role": "assistant", "content": "You are welcome."}]} for i in range(count)]


def test_tokenize_builds_reuses_and_rebuilds_the_cache(tmp_path, surogate_bin, tokenizers_dir):
    data = tmp_path / "chat.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in chat_rows(40)))
    config = write_config(tmp_path, tokenizers_dir, {"path": str(data), "type": "conversation"})
    first = run_surogate(surogate_bin, "tokenize", config)
    assert first.returncode == 0, first.stderr
    assert "missing" in first.stderr
    assert "40 rows read" in first.stdout and "packing efficiency" in first.stdout
    cache = tmp_path / "out" / "tokenized" / "dataset.surotok"
    assert cache.exists()

    second = run_surogate(surogate_bin, "tokenize", config)
    assert second.returncode == 0 and "up to date" in second.stderr

    stale = run_surogate(surogate_bin, "tokenize", config, "--truncation_strategy=split")
    assert stale.returncode == 0 and "stale" in stale.stderr

    blob = bytearray(cache.read_bytes())
    blob[300] ^= 0xFF
    cache.write_bytes(bytes(blob))
    corrupt = run_surogate(surogate_bin, "tokenize", config, "--truncation_strategy=split")
    assert corrupt.returncode == 0 and "corrupt" in corrupt.stderr


def test_preview_loss_mask_matches_the_template_assistant_spans(tmp_path, surogate_bin, tokenizers_dir):
    rows = chat_rows(1)
    data = tmp_path / "chat.jsonl"
    data.write_text(json.dumps(rows[0]) + "\n")
    config = write_config(tmp_path, tokenizers_dir, {"path": str(data), "type": "conversation"}, sequence_len=256)
    result = run_surogate(surogate_bin, "preview", config, "-n", "1")
    assert result.returncode == 0, result.stderr
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tokenizers_dir / "qwen3"))
    full = tokenizer.apply_chat_template(rows[0]["messages"], tokenize=False)
    assert full in result.stdout
    ids_line = next(line for line in result.stdout.splitlines() if line.startswith("ids: "))
    ids = [int(x) for x in ids_line[5:].split()]
    assert ids == tokenizer(full, add_special_tokens=False)["input_ids"]
    marked = result.stdout.split("---\n")[-1]
    loss_runs = [part.split("⟧")[0] for part in marked.split("⟦")[1:]]
    # Qwen3's template renders the final assistant turn with an empty think block; it is part of
    # what the assistant says there, so it carries loss like the rest of the reply.
    assert loss_runs == ["It is 0.<|im_end|>\n", "<think>\n\n</think>\n\nYou are welcome.<|im_end|>\n"]


def test_instruction_and_text_types(tmp_path, surogate_bin, tokenizers_dir):
    data = tmp_path / "alpaca.json"
    data.write_text(json.dumps([{"instruction": "Add", "input": "1 1", "output": "2"}]))
    config = write_config(tmp_path, tokenizers_dir, {"path": str(data), "type": "instruction",
                                                  "instruction_field": "instruction", "input_field": "input",
                                                  "output_field": "output"}, use_chat_template=False)
    result = run_surogate(surogate_bin, "preview", config, "-n", "1")
    assert result.returncode == 0, result.stderr
    assert "### Instruction:\nAdd\n\n### Input:\n1 1\n\n### Response:\n2" in result.stdout
    assert "⟦2<|im_end|>⟧" in result.stdout or "⟦2<|endoftext|>⟧" in result.stdout

    text = tmp_path / "doc.txt"
    text.write_text("hello world " * 50)
    config = write_config(tmp_path, tokenizers_dir, {"path": str(text), "type": "text"}, truncation_strategy="split",
                          validation_split_ratio=0.0)
    result = run_surogate(surogate_bin, "tokenize", config)
    assert result.returncode == 0, result.stderr
    assert "1 split" in result.stdout


def test_bad_line_is_reported_with_file_and_line(tmp_path, surogate_bin, tokenizers_dir):
    data = tmp_path / "bad.jsonl"
    data.write_text(json.dumps(chat_rows(1)[0]) + "\n" + '{"messages": [{"role": "wizard", "content": "x"}]}\n')
    config = write_config(tmp_path, tokenizers_dir, {"path": str(data), "type": "conversation"})
    result = run_surogate(surogate_bin, "tokenize", config)
    assert result.returncode == 2
    assert f"{data}:2" in result.stderr and "wizard" in result.stderr
