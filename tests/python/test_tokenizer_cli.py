"""`surogate tokenizer` error handling: malformed input lines name the line and exit 2; a bad
tokenizer folder is a user error naming the file."""
import json

from conftest import run_surogate


def tokenizer_dir(root, name="qwen3"):
    return root / name


def test_encode_writes_one_line_per_input(surogate_bin, tokenizers_dir):
    result = run_surogate(surogate_bin, "tokenizer", "encode", "--tokenizer", tokenizer_dir(tokenizers_dir),
                          input_text='{"text": "Hello world"}\n{"text": ""}\n')
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert rows == [{"ids": [9707, 1879]}, {"ids": []}]


def test_malformed_json_line_names_the_line(surogate_bin, tokenizers_dir):
    result = run_surogate(surogate_bin, "tokenizer", "encode", "--tokenizer", tokenizer_dir(tokenizers_dir),
                          input_text='{"text": "ok"}\n{"text": \n')
    assert result.returncode == 2
    assert "line 2" in result.stderr


def test_missing_text_key_names_the_line(surogate_bin, tokenizers_dir):
    result = run_surogate(surogate_bin, "tokenizer", "encode", "--tokenizer", tokenizer_dir(tokenizers_dir),
                          input_text='{"text": "a"}\n{"text": "b"}\n{"txt": "c"}\n')
    assert result.returncode == 2
    assert "line 3" in result.stderr and '"text"' in result.stderr


def test_decode_rejects_non_integer_ids(surogate_bin, tokenizers_dir):
    result = run_surogate(surogate_bin, "tokenizer", "decode", "--tokenizer", tokenizer_dir(tokenizers_dir),
                          input_text='{"ids": [1, "x"]}\n')
    assert result.returncode == 2
    assert "line 1" in result.stderr


def test_decode_rejects_negative_ids(surogate_bin, tokenizers_dir):
    """A negative id printed "" (Hugging Face's decode raises)."""
    result = run_surogate(surogate_bin, "tokenizer", "decode", "--tokenizer", tokenizer_dir(tokenizers_dir),
                          input_text='{"ids": [1, 2]}\n{"ids": [5, -1]}\n')
    assert result.returncode == 2, result.stdout
    assert "stdin line 2: id -1 is negative; token ids are 0 to " in result.stderr, result.stderr


def test_missing_tokenizer_folder_is_a_user_error(surogate_bin, tmp_path):
    result = run_surogate(surogate_bin, "tokenizer", "encode", "--tokenizer", tmp_path, input_text="")
    assert result.returncode == 2
    assert "tokenizer.json" in result.stderr


def test_unsupported_component_is_named(surogate_bin, tmp_path):
    (tmp_path / "tokenizer.json").write_text(json.dumps({
        "model": {"type": "WordPiece", "vocab": {"a": 0}},
        "pre_tokenizer": None, "normalizer": None, "decoder": None, "post_processor": None, "added_tokens": []}))
    result = run_surogate(surogate_bin, "tokenizer", "encode", "--tokenizer", tmp_path, input_text="")
    assert result.returncode == 2
    assert "WordPiece" in result.stderr and "model.type" in result.stderr
