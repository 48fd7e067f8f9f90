#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (+ address / undefined-behaviour sanitizers) and runs
# one of them for a while, starting from its checked-in seed corpus.
#   scripts/fuzz.sh [SECONDS] [TARGET]      defaults: 60 seconds, fuzz_safetensors_header
#                                           targets: fuzz_safetensors_header, fuzz_model_config,
#                                           fuzz_training_config, fuzz_chat_template, fuzz_dataset_row,
#                                           fuzz_tokenizer_json
#   SUROGATE_FUZZ_BUILD_DIR                 build folder (default: build-fuzz)
# Needs clang and its libFuzzer runtime (Debian: clang, libclang-rt-14-dev; scripts/install_deps.sh
# installs both). New interesting inputs go to <build>/corpus/<target>/ (the checked-in seeds are
# not modified); a crash leaves crash-* / leak-* / timeout-* files in <build>/artifacts/ and the
# script exits non-zero. Add a minimised reproducer to fuzz/corpus/<name>/ as bad-<what> so CI
# (tests/io/test_safetensors_corpus.cpp, tests/*/test_*_corpus.cpp) keeps checking it.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
target=${2:-fuzz_safetensors_header}
case $target in
  fuzz_safetensors_header | fuzz_model_config | fuzz_training_config | fuzz_chat_template | fuzz_dataset_row | \
    fuzz_tokenizer_json) ;;
  *) echo "scripts/fuzz.sh: unknown target '$target'" >&2; exit 2 ;;
esac
build_dir=${SUROGATE_FUZZ_BUILD_DIR:-build-fuzz}
seed_dirs=("fuzz/corpus/${target#fuzz_}")
# The config.json samples of the io tests are good seeds too.
[[ $target == fuzz_model_config ]] && seed_dirs+=(tests/io/data/configs)
work_corpus="$build_dir/corpus/$target"

cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DSUROGATE_FUZZ=ON -DSUROGATE_TESTS=OFF -DSUROGATE_CUDA=OFF >/dev/null
cmake --build "$build_dir" --target "$target"

mkdir -p "$work_corpus" "$build_dir/artifacts"
"$build_dir/fuzz/$target" -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$build_dir/artifacts/" -print_final_stats=1 "$work_corpus" "${seed_dirs[@]}"
