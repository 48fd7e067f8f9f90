# Sourced by the bench scripts that run on the GPU machine: the binaries that
# `scripts/gpu_check.sh --prepare` built here travel as CARRY_DIR.tar.xz (the device call's
# `carry`); this unpacks them when the folder lacks BINARY and puts their libraries first on
# LD_LIBRARY_PATH.
#   use_carry DEFAULT_FOLDER BINARY   (CARRY_DIR, when set, wins over $root/carry/DEFAULT_FOLDER)
use_carry() {
  export CARRY_DIR="${CARRY_DIR:-$root/carry/$1}"
  if [[ ! -x "$CARRY_DIR/$2" && -f "$CARRY_DIR.tar.xz" ]]; then
    tar -xJf "$CARRY_DIR.tar.xz" -C "$(dirname "$CARRY_DIR")" || return 1
  fi
  export LD_LIBRARY_PATH="$(carry_library_path "$CARRY_DIR"):${LD_LIBRARY_PATH:-}"
}

# The library folders a carried binary folder runs with: its lib/, cuDNN (a carry stripped of it,
# for its size, takes the one PyTorch's wheels put on the machine) and the CUDA toolkit's.
#   carry_library_path FOLDER
carry_library_path() {
  local cudnn=""
  if [[ ! -f "$1/lib/libcudnn.so.9" ]]; then
    cudnn=$(python3 -c 'import glob, os, site
print(next((os.path.dirname(p) for r in site.getsitepackages()
            for p in glob.glob(os.path.join(r, "nvidia", "**", "libcudnn.so.9"), recursive=True)), ""))' 2>/dev/null)
  fi
  echo "$1/lib${cudnn:+:$cudnn}:/usr/local/cuda/lib64"
}

# The peers' wheels carried in $root/carry/wheels (trl and the dependencies the machine lacks),
# installed without their dependencies into FOLDER, which goes first on PYTHONPATH; nothing when
# no trl wheel was carried.
#   install_peer_wheels FOLDER
install_peer_wheels() {
  ls "$root"/carry/wheels/trl-*.whl >/dev/null 2>&1 || return 0
  rm -rf "$1"
  python3 -m pip install -q --no-deps --target "$1" "$root"/carry/wheels/*.whl 2>&1 | tail -2
  export PYTHONPATH="$1:${PYTHONPATH:-}"
}
