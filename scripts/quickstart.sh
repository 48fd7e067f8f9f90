#!/usr/bin/env bash
# Builds Surogate and runs the embedded default example.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)"
./build/surogate info
