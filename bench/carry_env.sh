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
  export LD_LIBRARY_PATH="$CARRY_DIR/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
}
