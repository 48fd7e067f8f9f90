#!/usr/bin/env bash
# Installs everything the build and the tests need on a fresh Debian 12 machine.
# Idempotent: packages already present are skipped by apt and pip.
# The CUDA toolkit (nvcc, cuBLASLt, cuDNN, NCCL) comes with the machine image.
set -euo pipefail

apt_packages=(
  build-essential cmake ninja-build pkg-config ccache
  libyaml-cpp-dev nlohmann-json3-dev libfmt-dev libcli11-dev
  libgtest-dev libgmock-dev libopenblas-dev
  libcurl4-openssl-dev libssl-dev libpcre2-dev libzstd-dev libxxhash-dev libsnappy-dev zlib1g-dev libicu-dev
  clang libclang-rt-14-dev
  libgloo-dev
  libcpp-httplib-dev  # surogate serve's HTTP server (and the image-download tests' local server)
  libpng-dev libjpeg62-turbo-dev libwebp-dev  # src/vision/'s image decoders
  python3-venv
)
python_packages=(
  "tokenizers>=0.19" "transformers>=4.45" jinja2 safetensors numpy pytest pyarrow pyyaml
  gguf  # llama.cpp's gguf-py: reads back what `surogate export` writes (tests/python/test_gguf_export.py)
  "ray>=2.9"  # optional at run time: multi-node training (distributed.num_nodes > 1); the Ray tests need it
  # report_to's trackers (optional at run time; tested offline / with a local repository)
  wandb aim
  # local emulators for the s3:// and gs:// tests
  "moto[server]" gcp-storage-emulator
  # The Python package's build (pyproject.toml; `pip install .` fetches its own copies too).
  "nanobind>=2.4" "scikit-build-core>=0.10"
  # Oracles of the Python package's tests (DLPack round trip with torch on the CPU, PEFT loading an
  # adapter trained from Python); already there on machines that have them.
  torch peft
  # The benchmark page's charts (bench/plot_benchmarks.py), drawn by tests/python/test_benchmark_page.py.
  matplotlib
  pillow  # the oracle of src/vision/'s image decoding and resizing (scripts/make_vision_fixtures.py, tests/python/test_vision_processor.py)
  openai  # the real client tests/python/test_serve.py talks to `surogate serve` with
  # The oracle of `surogate dpo` and GRPO's loss (tests/python/test_preference_tuning.py: TRL's
  # tokenization and losses; tests/python/test_grpo_trl.py calls GRPOTrainer._compute_loss, a private
  # method, hence the exact pin). 1.16 runs with transformers 5.x and torch 2.x.
  "trl==1.16.0" datasets
)

missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

python3 -m pip install -q --disable-pip-version-check "${python_packages[@]}"
# CUTLASS's C++ headers for the CUDA build's grouped expert GEMMs (src/cuda/kernels/grouped_gemm.cu); the
# package's Python tools are not used, so not their dependencies either.
python3 -m pip install -q --disable-pip-version-check --no-deps "nvidia-cutlass==4.2.0.0"
# cuDNN's frontend C++ headers for the fused attention (src/cuda/cudnn_attention.cpp); only the
# headers are used (libcudnn itself comes with the CUDA toolkit or the nvidia-cudnn-cu13 wheel).
python3 -m pip install -q --disable-pip-version-check --no-deps "nvidia-cudnn-frontend==1.32.0"
