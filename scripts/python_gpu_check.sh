#!/usr/bin/env bash
# The Python package on the GPU machine (docs/python.md): bf16 weights on the GPU read by torch in
# place through DLPack (scripts/python_gpu_check.py), PEFT loading an adapter trained from Python,
# and the Python API's tokens/s next to the CLI's on the same job.
#
#   scripts/python_gpu_check.sh --prepare   (here) build a CUDA wheel for the GPU image's Python
#                                           (PYTHON, default python3.12: /opt/torch/.venv there) and
#                                           collect it with the non-CUDA libraries it needs into
#                                           carry/python.tar.xz (pass it as `carry`)
#   scripts/python_gpu_check.sh             (on the GPU machine) install it into a venv over torch's
#                                           and run the checks; JOB=config.yaml also trains that job
#                                           once from the CLI and once from Python and prints both tokens/s
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
carry="$root/carry/python"

if [[ "${1:-}" == "--prepare" ]]; then
  python="${PYTHON:-python3.12}"  # here: PYTHON=/root/.pyenv/versions/3.12.1/bin/python3.12
  rm -rf "$carry" && mkdir -p "$carry/lib"
  # build-python-gpu sits beside build-cuda (scripts/gpu_check.sh): same depth and flags, so ccache
  # has every object gpu_check.sh --prepare compiled.
  # The compilers build-cuda used (pip's environment may otherwise pick g++ for c++: another
  # compiler to ccache).
  defines=(-C cmake.define.CMAKE_CUDA_ARCHITECTURES=90a)
  for key in CMAKE_C_COMPILER CMAKE_CXX_COMPILER CMAKE_CUDA_COMPILER; do
    value=$(grep -s "^$key:" "$root/build-cuda/CMakeCache.txt" | cut -d= -f2-)
    [[ -n "$value" ]] && defines+=(-C "cmake.define.$key=$value")
  done
  CCACHE_BASEDIR="$root" "$python" -m pip wheel --no-deps -w "$carry" "$root" -C build-dir="$root/build-python-gpu" \
    "${defines[@]}" || exit 1
  mkdir -p "$carry/unpacked" && (cd "$carry/unpacked" && "$python" -m zipfile -e "$carry"/surogate-*.whl .)
  for binary in "$carry"/unpacked/surogate/_engine*.so "$carry"/unpacked/surogate-*.data/scripts/surogate; do ldd "$binary"; done |
    awk '/=> \// {print $3}' | sort -u | while read -r lib; do
      case "$(basename "$lib")" in
        libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libstdc++*|libgcc_s*|libcuda*|libcublas*|libnccl*|libpython*) ;;
        *) cp -L "$lib" "$carry/lib/" ;;
      esac
    done
  rm -rf "$carry/unpacked"
  tar -cf - -C "$root/carry" python | xz -T2 -6 >"$root/carry/python.tar.xz" || exit 1
  du -sh "$carry" "$root/carry/python.tar.xz"
  exit 0
fi

[[ -d "$carry" ]] || tar -xJf "$root/carry/python.tar.xz" -C "$root/carry" || exit 1
base="${TORCH_PYTHON:-/opt/torch/.venv/bin/python}"
venv=/tmp/surogate-venv
# The base is itself a venv: --system-site-packages would reach the interpreter's packages, not
# the torch venv's, so a .pth file in the new venv adds the torch venv's site-packages (torch, PEFT,
# numpy, pytest) behind its own.
"$base" -m venv "$venv" || exit 1
site_of() { "$1" -c "import sysconfig; print(sysconfig.get_paths()['$2'])"; }
for kind in purelib platlib; do site_of "$base" "$kind"; done | sort -u >"$(site_of "$venv/bin/python" purelib)/torch-venv.pth"
"$venv/bin/pip" install -q --no-deps "$carry"/surogate-*.whl || exit 1
export LD_LIBRARY_PATH="$carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
status=0
echo "=== DLPack on the GPU (tests/fixtures/llama_gqa_llama3)"
"$venv/bin/python" "$root/scripts/python_gpu_check.py" "$root/tests/fixtures/llama_gqa_llama3" || status=1
echo "=== torch / PEFT checks of tests/python/test_python_api.py (CPU)"
SUROGATE_PREINSTALLED="$venv" SUROGATE_BIN="$venv/bin/surogate" "$venv/bin/python" -m pytest -q -p no:cacheprovider \
  "$root/tests/python/test_python_api.py" -k "torch or lora" || status=1
if [[ -n "${JOB:-}" ]]; then
  echo "=== $JOB: CLI vs Python tokens/s"
  "$venv/bin/surogate" sft "$JOB" --output_dir=/tmp/job-cli | tail -5
  "$venv/bin/python" - "$JOB" <<'PY'
import statistics, sys, surogate
rates = []
summary = surogate.train(sys.argv[1], lambda m: rates.append(m["tokens_per_second"]) if m["type"] == "step" else None,
                         overrides={"output_dir": "/tmp/job-python"})
print(f"python: median tokens/s over steps 2..: {statistics.median(rates[1:]):.0f} ({summary['steps']} steps)")
PY
  for log in /tmp/job-cli/log-*.jsonl; do
    python3 -c "import json,statistics,sys; r=[json.loads(l) for l in open(sys.argv[1])]; s=[x['tokens_per_second'] for x in r if x['type']=='step'][1:]; print(f'cli: median tokens/s over steps 2..: {statistics.median(s):.0f}')" "$log"
  done
fi
exit $status
