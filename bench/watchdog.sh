# Sourced by the GPU-machine scripts: run a command with a time limit and, when it outlives the
# limit (a collective that never completes, say), write every host thread's backtrace to a file
# before killing it, so that a stall says where it stalled. The GPU image has no gdb, but
# cuda-gdb attaches to a running program as gdb does.
#   run_watched SECONDS DUMP_FILE COMMAND...   (the command's exit status, or 124 when it was killed)
run_watched() {
  local limit=$1 dump=$2
  shift 2
  "$@" &
  local pid=$! waited=0
  while kill -0 "$pid" 2>/dev/null; do
    if (( waited >= limit )); then
      { echo "# $* outlived ${limit} s: backtraces of every thread"
        timeout 90 cuda-gdb -p "$pid" -batch -ex "set pagination off" -ex "thread apply all bt 25" 2>&1 ||
          echo "(cuda-gdb could not attach)"; } >"$dump"
      kill -9 "$pid" 2>/dev/null
      wait "$pid" 2>/dev/null
      return 124
    fi
    sleep 1
    waited=$((waited + 1))
  done
  wait "$pid"
}
