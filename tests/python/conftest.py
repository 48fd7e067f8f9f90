"""Shared fixtures for the Python oracle tests: where the built binary and shared data live."""
import os
import pathlib
import subprocess

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED_DIR = REPO_ROOT.parent / "shared"


@pytest.fixture(scope="session")
def surogate_bin() -> pathlib.Path:
    path = pathlib.Path(os.environ.get("SUROGATE_BIN", REPO_ROOT / "build" / "surogate"))
    if not path.exists():
        pytest.fail(f"surogate binary not found at {path}: build first (scripts/test.sh does)")
    return path


@pytest.fixture(scope="session")
def shared_dir() -> pathlib.Path:
    if not SHARED_DIR.exists():
        pytest.fail(f"shared data folder not found at {SHARED_DIR}")
    return SHARED_DIR


def run_surogate(binary, *args, input_text=None, check=False, cwd=None, env=None):
    """Runs the CLI and returns the CompletedProcess (text mode)."""
    return subprocess.run([str(binary), *map(str, args)], input=input_text, capture_output=True,
                          text=True, check=check, cwd=cwd, env=env)
