#!/usr/bin/env bash
# Runs `surogate export`'s GGUF files in llama.cpp itself: installs llama-cpp-python (PyPI; it
# compiles llama.cpp from source, 10+ minutes on 2 cores, which is why CI does not) and runs
# tests/python/test_gguf_llama_cpp.py: for Llama (llama3 RoPE), Mistral, Qwen2, Qwen3, Qwen2-MoE,
# Qwen3-MoE and Mixtral, the f16 export's next-token logits within 1e-2 of the engine's forward
# (surogate.load, CPU) and 16 greedy tokens equal; `--type q4_k_m` byte for byte with
# llama-quantize's Q4_K_M of the f16 export. Run before landing a change to src/gguf/.
#   bash scripts/check_gguf_llama_cpp.sh [pytest arguments]
# Needs the built CLI (SUROGATE_BIN, default build/surogate); the test installs the Python package
# into a virtual environment as tests/python/test_python_api.py does.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --disable-pip-version-check "llama-cpp-python>=0.3.16" "gguf"
export SUROGATE_BIN="${SUROGATE_BIN:-$PWD/build/surogate}"
python3 -m pytest -q tests/python/test_gguf_llama_cpp.py "$@"
