"""The Python package as a user gets it: `pip install <repo>` into a fresh virtual environment.

The install reuses the engine the test build compiled: its own build folder (build-python beside
build, so ccache finds every object the main build compiled with the same flags: same depth under
the checkout, same CUDA architectures) instead of compiling the engine a second time.
SUROGATE_PYTHON_BUILD_DIR names another folder.
"""
import os
import pathlib
import subprocess
import sys

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]


class Package:
    """The virtual environment with surogate installed: its python, its `surogate` CLI, and the
    module imported into this test process (same interpreter version)."""

    def __init__(self, venv: pathlib.Path):
        self.venv = venv
        self.python = venv / "bin" / "python"
        self.cli = venv / "bin" / "surogate"
        site = subprocess.run([str(self.python), "-c", "import surogate, os; print(os.path.dirname(os.path.dirname("
                               "surogate.__file__)))"], capture_output=True, text=True, check=True).stdout.strip()
        if site not in sys.path:
            sys.path.append(site)
        import surogate  # noqa: E402  (from the venv's site-packages)

        self.module = surogate

    def run_python(self, script: str, **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.python), "-c", script], capture_output=True, text=True, **kwargs)


# What decides the compile commands: the compilers (pip's environment may pick g++ where CMake alone
# picks c++, which ccache counts as another compiler), CUDA on or off, the CUDA architectures.
BUILD_SETTINGS = ("CMAKE_C_COMPILER", "CMAKE_CXX_COMPILER", "CMAKE_CUDA_COMPILER", "SUROGATE_CUDA",
                  "CMAKE_CUDA_ARCHITECTURES")


def main_build_settings() -> dict:
    """The settings of the tests' build (SUROGATE_BUILD_DIR, else build/) that change compile flags,
    so the package's build compiles with the same ones and ccache serves every object."""
    cache = pathlib.Path(os.environ.get("SUROGATE_BUILD_DIR", REPO_ROOT / "build")) / "CMakeCache.txt"
    settings = {"CMAKE_CUDA_ARCHITECTURES": os.environ.get("SUROGATE_CUDA_ARCHS", "90a")}
    if cache.exists():
        for line in cache.read_text().splitlines():
            key, _, value = line.partition("=")
            name = key.split(":")[0]
            if name in BUILD_SETTINGS and value:
                settings[name] = value
    return settings


def install(tmp_path_factory) -> Package:
    if os.environ.get("SUROGATE_PREINSTALLED"):  # a venv that already has it (scripts/python_gpu_check.sh)
        return Package(pathlib.Path(os.environ["SUROGATE_PREINSTALLED"]))
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    build_dir = pathlib.Path(os.environ.get("SUROGATE_PYTHON_BUILD_DIR", REPO_ROOT / "build-python"))
    env = dict(os.environ, CCACHE_BASEDIR=os.environ.get("CCACHE_BASEDIR", str(REPO_ROOT)))
    command = [str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check", "-q", str(REPO_ROOT),
               "-C", f"build-dir={build_dir}"]
    for key, value in main_build_settings().items():
        command += ["-C", f"cmake.define.{key}={value}"]
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        pytest.fail(f"pip install of the repository failed:\n{result.stdout[-4000:]}\n{result.stderr[-8000:]}")
    return Package(venv)
