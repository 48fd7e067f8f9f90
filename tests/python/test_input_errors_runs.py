"""Bad leftovers and data around a run: one clear outcome, never a crash after training or a lost
model. Each test failed before its fix: a stray checkpoint folder ended a finished run in an
internal error before the model was written, and a valid empty Parquet shard stopped a folder
dataset as a "truncated file"."""
import json

import pyarrow as pa
import pyarrow.parquet as pq

from conftest import run_surogate
from test_input_errors import write_text_run
from tiny_model import write_model


def test_stray_checkpoint_folder_with_a_huge_number_is_not_a_checkpoint(surogate_bin, tmp_path):
    """`mkdir OUT/checkpoint-9223372036854775808`: the run trained, wrote checkpoint-2, then exited 1
    with `internal error ...: stoll` and no model."""
    model = write_model(tmp_path / "model")
    out = tmp_path / "out"
    for name in ("checkpoint-9223372036854775808", "checkpoint-123456789012345678901234567890", "checkpoint-x"):
        (out / name).mkdir(parents=True)
    config = write_text_run(tmp_path, model, extra="save_steps: 1\nsave_total_limit: 1\n")
    config.write_text(config.read_text().replace("max_steps: 1", "max_steps: 2"))
    result = run_surogate(surogate_bin, "pt", config)
    assert result.returncode == 0, result.stderr
    assert (out / "model.safetensors").exists()
    assert (out / "checkpoint-2").is_dir() and not (out / "checkpoint-1").exists()
    assert (out / "checkpoint-9223372036854775808").is_dir()  # not this run's: left alone
    # Resuming looks past it too.
    config.write_text(config.read_text() + "resume_from_checkpoint: true\n")
    result = run_surogate(surogate_bin, "pt", config)
    assert result.returncode == 0, result.stderr
    assert "resumed from" in result.stdout + result.stderr


def test_an_empty_parquet_shard_contributes_no_rows(surogate_bin, tmp_path):
    """A valid empty shard (0 rows, written by pyarrow) was "column 'text' points outside the file"."""
    model = write_model(tmp_path / "model")
    folder = tmp_path / "shards"
    folder.mkdir()
    pq.write_table(pa.table({"text": pa.array([], type=pa.string())}), folder / "part-0.parquet")
    pq.write_table(pa.table({"text": ["abc cab bca"] * 20}), folder / "part-1.parquet")
    config = write_text_run(tmp_path, model)
    config.write_text(config.read_text().replace(f"path: {tmp_path / 'data.jsonl'}", f"path: {folder}"))
    result = run_surogate(surogate_bin, "tokenize", config)
    assert result.returncode == 0, result.stderr
    assert f"{folder} (text): 2 files, 20 rows read" in result.stdout, result.stdout
    result = run_surogate(surogate_bin, "pt", config)
    assert result.returncode == 0, result.stderr
    # A folder holding only the empty shard has no rows, and says so as for an empty JSONL file.
    (folder / "part-1.parquet").unlink()
    result = run_surogate(surogate_bin, "tokenize", config)
    assert result.returncode == 2 and "0 rows read (the dataset is empty)" in result.stderr, result.stderr
    assert "points outside the file" not in result.stderr
