"""Datasets by hub id (`path: org/name` with `subset`, `split`, `samples`) against the fake hub on
127.0.0.1 (tests/python/fake_hub_server.py): the layouts the `datasets` library reads (README
`configs`, subset folders and split file names, a single unsplit file, the refs/convert/parquet
branch), only the chosen files downloaded, the cache reused offline, and errors that list the
subsets / splits there are."""
import io
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import run_surogate
from fake_hub_server import FakeHub


def jsonl(texts):
    return "".join(json.dumps({"text": t}) + "\n" for t in texts).encode()


def parquet(texts):
    sink = io.BytesIO()
    pq.write_table(pa.table({"text": texts}), sink)
    return sink.getvalue()


def hub_env(tmp_path, hub_url, **extra):
    env = {key: value for key, value in os.environ.items() if not key.startswith(("HF_", "HUGGING"))}
    env.update(HOME=str(tmp_path / "home"), HF_HUB_CACHE=str(tmp_path / "cache"), HF_ENDPOINT=hub_url,
               HF_HUB_DOWNLOAD_TIMEOUT="10")
    env.update(extra)
    return env


def write_config(tmp_path, tokenizers_dir, dataset):
    config = tmp_path / "run.yaml"
    entry = "".join(f"    {key}: {value}\n" for key, value in dataset.items())
    config.write_text(f"model: {tokenizers_dir / 'qwen3'}\noutput_dir: {tmp_path / 'out'}\nsequence_len: 64\n"
                      f"validation_split_ratio: 0\ndatasets:\n  - type: text\n{entry}")
    return config


def preview(surogate_bin, config, env, rows=20):
    return run_surogate(surogate_bin, "preview", config, "-n", rows, env=env)


def fetched(hub):
    """Repo paths whose bytes were downloaded (resolve GETs and LFS storage GETs)."""
    names = set()
    with hub.lock:
        requests = list(hub.requests)
    files = hub.all_files()
    for method, path, _ in requests:
        if method != "GET":
            continue
        for name in files:
            if path.endswith("/" + name) or (hub.is_lfs(name) and path.endswith(hub.sha256(name))):
                names.add(name)
    return names


ULTRACHAT_README = b"""---
license: mit
configs:
- config_name: default
  data_files:
  - split: train_sft
    path: data/train_sft-*
  - split: test_sft
    path: data/test_sft-*
- config_name: small
  data_files: small/*.jsonl
---
# A chat dataset
"""


def test_readme_configs_choose_the_split_files_and_only_those_are_downloaded(surogate_bin, tmp_path, tokenizers_dir):
    files = {
        "README.md": ULTRACHAT_README,
        "data/train_sft-00000-of-00002.parquet": parquet(["alpha one", "alpha two"]),
        "data/train_sft-00001-of-00002.parquet": parquet(["alpha three"]),
        "data/test_sft-00000-of-00001.parquet": parquet(["omega test"]),
        "small/part.jsonl": jsonl(["small row"]),
    }
    with FakeHub(files, repo_id="org/chat", repo_type="datasets") as hub:
        env = hub_env(tmp_path, hub.url)
        config = write_config(tmp_path, tokenizers_dir, {"path": "org/chat", "split": "train_sft"})
        result = preview(surogate_bin, config, env)
        assert result.returncode == 0, result.stderr
        assert "alpha one" in result.stdout and "alpha three" in result.stdout
        assert "omega" not in result.stdout and "small row" not in result.stdout
        assert fetched(hub) == {"README.md", "data/train_sft-00000-of-00002.parquet",
                                "data/train_sft-00001-of-00002.parquet"}

        small = write_config(tmp_path, tokenizers_dir, {"path": "org/chat", "subset": "small"})
        result = preview(surogate_bin, small, env)
        assert result.returncode == 0, result.stderr
        assert "small row" in result.stdout and "alpha" not in result.stdout  # data_files without splits: train

        missing_split = write_config(tmp_path, tokenizers_dir, {"path": "org/chat"})  # split: train
        result = preview(surogate_bin, missing_split, env)
        assert result.returncode == 2
        assert "has no split 'train'" in result.stderr and "test_sft, train_sft" in result.stderr
        missing_subset = write_config(tmp_path, tokenizers_dir, {"path": "org/chat", "subset": "large"})
        result = preview(surogate_bin, missing_subset, env)
        assert result.returncode == 2
        assert "subset 'large'" in result.stderr and "default, small" in result.stderr

        # Offline, the cached snapshot serves the same split.
        hub.stop()
        config = write_config(tmp_path, tokenizers_dir, {"path": "org/chat", "split": "train_sft"})
        offline = preview(surogate_bin, config, dict(env, HF_HUB_OFFLINE="1"))
        assert offline.returncode == 0, offline.stderr
        assert "alpha one" in offline.stdout and "omega" not in offline.stdout


def test_subset_folders_and_split_file_names_without_configs(surogate_bin, tmp_path, tokenizers_dir):
    files = {
        "README.md": b"# no YAML header\n",
        "en/train.jsonl": jsonl(["english train"]),
        "en/test.jsonl": jsonl(["english test"]),
        "fr/train-00000-of-00001.jsonl": jsonl(["french train"]),
        "fr/validation.jsonl": jsonl(["french validation"]),
    }
    with FakeHub(files, repo_id="org/multi", repo_type="datasets") as hub:
        env = hub_env(tmp_path, hub.url)
        result = preview(surogate_bin, write_config(tmp_path, tokenizers_dir,
                                                    {"path": "org/multi", "subset": "fr", "split": "validation"}), env)
        assert result.returncode == 0, result.stderr
        assert "french validation" in result.stdout and "train" not in result.stdout.replace("split", "")
        assert fetched(hub) == {"README.md", "fr/validation.jsonl"}
        result = preview(surogate_bin, write_config(tmp_path, tokenizers_dir, {"path": "org/multi", "subset": "de"}),
                         env)
        assert result.returncode == 2
        assert "subset 'de'" in result.stderr and "en, fr" in result.stderr
        result = preview(surogate_bin, write_config(tmp_path, tokenizers_dir,
                                                    {"path": "org/multi", "subset": "en", "split": "dev"}), env)
        assert result.returncode == 2
        assert "split 'dev'" in result.stderr and "test, train" in result.stderr


def test_an_unsplit_single_file_dataset_with_samples(surogate_bin, tmp_path, tokenizers_dir):
    # The layout of yahma/alpaca-cleaned: one JSON file, no split in its name.
    rows = [{"text": f"row {i}"} for i in range(10)]
    files = {"alpaca_data_cleaned.json": json.dumps(rows).encode(), "README.md": b"---\nlicense: cc-by-4.0\n---\n"}
    with FakeHub(files, repo_id="yahma/alpaca-cleaned", repo_type="datasets") as hub:
        env = hub_env(tmp_path, hub.url)
        config = write_config(tmp_path, tokenizers_dir, {"path": "yahma/alpaca-cleaned", "samples": 4})
        result = run_surogate(surogate_bin, "tokenize", config, env=env)
        assert result.returncode == 0, result.stderr
        assert "yahma/alpaca-cleaned (text): 1 files, 4 rows read" in result.stdout  # samples: the first 4 rows
        assert fetched(hub) == {"README.md", "alpaca_data_cleaned.json"}
        result = preview(surogate_bin, config, env)
        assert result.returncode == 0, result.stderr
        assert "row 0" in result.stdout and "row 9" in result.stdout  # preview reads the file itself


def test_the_parquet_conversion_branch_when_main_has_no_readable_file(surogate_bin, tmp_path, tokenizers_dir):
    files = {"README.md": b"# csv only\n", "data.csv": b"text\nfrom csv\n"}
    with FakeHub(files, repo_id="org/csv", repo_type="datasets") as hub:
        env = hub_env(tmp_path, hub.url)
        config = write_config(tmp_path, tokenizers_dir, {"path": "org/csv"})
        result = preview(surogate_bin, config, env)
        assert result.returncode == 2
        assert "no file Surogate reads" in result.stderr and ".csv" in result.stderr
        assert "refs/convert/parquet" in result.stderr
        hub.add_revision("refs/convert/parquet", {
            "default/train/0000.parquet": parquet(["converted train"]),
            "default/test/0000.parquet": parquet(["converted test"]),
        })
        result = preview(surogate_bin, config, env)
        assert result.returncode == 0, result.stderr
        assert "converted train" in result.stdout and "converted test" not in result.stdout
        assert "default/test/0000.parquet" not in fetched(hub)
        result = preview(surogate_bin, write_config(tmp_path, tokenizers_dir, {"path": "org/csv", "split": "dev"}), env)
        assert result.returncode == 2
        assert "split 'dev'" in result.stderr and "test, train" in result.stderr
