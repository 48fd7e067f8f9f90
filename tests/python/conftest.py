"""Common fixtures for the Python oracle tests: the built binary and the real tokenizers."""
import os
import pathlib
import shutil
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


def gpu_visible():
    """Whether nvidia-smi lists a GPU (the CLI then trains, and predicts, on the CUDA backend)."""
    return shutil.which("nvidia-smi") is not None and subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0


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


def quickstart_sft_config(path, model, out, ex, extra="", **settings):
    """Writes a `surogate sft` YAML to `path` for the quickstart example's reverse-string data in
    `ex` (train and validation splits): adamw at 1e-2, seq 64, micro-batch 4, no chat template,
    max_steps 3, eval_steps 100, one micro-batch per step. `settings` replace or add top-level
    options (gradient_accumulation_steps=2, save_steps=3, ...); `extra` is appended as YAML."""
    options = {"sequence_len": 64, "use_chat_template": "false", "optimizer": "adamw", "learning_rate": "1e-2",
               "per_device_train_batch_size": 4, "gradient_accumulation_steps": 1, "max_steps": 3, "eval_steps": 100}
    options.update(settings)
    lines = "".join(f"{key}: {value}\n" for key, value in options.items())
    split = """  - path: {file}
    type: instruction
    instruction_field: instruction
    output_field: output
    prompt_format: "reverse: {{instruction}} = {{output}}"
"""
    path.write_text(f"model: {model}\noutput_dir: {out}\n{lines}datasets:\n{split.format(file=ex / 'train.jsonl')}"
                    f"validation_datasets:\n{split.format(file=ex / 'valid.jsonl')}{extra}")
    return path


def read_tensors(file):
    """Every tensor of a safetensors file as numpy arrays, by name."""
    from safetensors import safe_open
    with safe_open(str(file), framework="numpy") as f:
        return {name: f.get_tensor(name) for name in f.keys()}


@pytest.fixture(scope="session")
def surogate_package(tmp_path_factory):
    """The repository pip-installed into a fresh virtual environment (tests/python/python_package.py),
    once per session."""
    from python_package import install
    return install(tmp_path_factory)


def load_script(name: str):
    """scripts/<name>.py imported as a module (the fixture makers, the repo checks)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_binary(relative: str) -> pathlib.Path:
    """A program of the tests' build folder (SUROGATE_BUILD_DIR, else build/), e.g.
    "tests/generate/generate_sampling_probe"; the test fails when it is not built."""
    path = pathlib.Path(os.environ.get("SUROGATE_BUILD_DIR", REPO_ROOT / "build")) / relative
    if not path.exists():
        pytest.fail(f"{path} not built: build the {path.name} target first")
    return path


def self_signed_certificate(folder: pathlib.Path):
    """(certificate, key) files of a self-signed certificate for 127.0.0.1 made with the openssl
    command in `folder`; skips the test without the command."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make a test certificate")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key
