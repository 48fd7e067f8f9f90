"""Common fixtures for the Python oracle tests: the built binary and the real tokenizers."""
import os
import pathlib
import subprocess
import sys
import tarfile

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
TOKENIZER_ARCHIVES = REPO_ROOT / "tests" / "fixtures" / "tokenizers"


@pytest.fixture(scope="session")
def surogate_bin() -> pathlib.Path:
    path = pathlib.Path(os.environ.get("SUROGATE_BIN", REPO_ROOT / "build" / "surogate"))
    if not path.exists():
        pytest.fail(f"surogate binary not found at {path}: build first (scripts/test.sh does)")
    return path


@pytest.fixture(scope="session")
def tokenizers_dir(tmp_path_factory) -> pathlib.Path:
    """A folder with qwen3/, llama3/ and llama2/ (tokenizer.json, tokenizer_config.json), unpacked
    once per session from the archives committed under tests/fixtures/tokenizers/."""
    archives = sorted(TOKENIZER_ARCHIVES.glob("*/tokenizer.tar.xz"))
    if len(archives) < 3:
        pytest.fail(f"tokenizer archives missing under {TOKENIZER_ARCHIVES}")
    root = tmp_path_factory.mktemp("tokenizers")
    # The "data" filter where this Python has it (3.11.4+): plain files only, nothing outside root.
    safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
    for archive in archives:
        with tarfile.open(archive, "r:xz") as tar:
            tar.extractall(root / archive.parent.name, **safe)
    return root


def run_surogate(binary, *args, input_text=None, check=False, cwd=None, env=None):
    """Runs the CLI and returns the CompletedProcess (text mode)."""
    return subprocess.run([str(binary), *map(str, args)], input=input_text, capture_output=True,
                          text=True, check=check, cwd=cwd, env=env)


def make_quickstart_example(tmp_path):
    """The embedded example (model config, character tokenizer, train / valid JSONL) written by
    examples/quickstart/make_example.py into tmp_path/ex; returns that folder."""
    subprocess.run([sys.executable, str(REPO_ROOT / "examples/quickstart/make_example.py"), str(tmp_path / "ex")],
                   check=True, capture_output=True)
    return tmp_path / "ex"


def read_tensors(file):
    """Every tensor of a safetensors file as numpy arrays, by name."""
    from safetensors import safe_open
    with safe_open(str(file), framework="numpy") as f:
        return {name: f.get_tensor(name) for name in f.keys()}
