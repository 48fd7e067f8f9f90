"""Two runs in one output folder: the second is refused at once (exit 2, naming the folder and the
running process), with real processes. Before the lock both exited 0, shared one log file (71 of
120 step records kept in one repeat), save_total_limit deleted the other run's checkpoints and the
last to finish overwrote model.safetensors. A lock left by a killed run (kill -9) is no lock."""
import json
import os
import signal
import socket
import subprocess
import time

from conftest import run_surogate
from test_input_errors import user_error, write_text_run
from tiny_model import write_model


def start_long_run(surogate_bin, config):
    """A run that trains until it is stopped; returns it once it holds output_dir's lock."""
    process = subprocess.Popen([str(surogate_bin), "pt", str(config)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    lock = config.parent / "out" / ".surogate.lock"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if lock.exists() and lock.read_text().strip():
            record = json.loads(lock.read_text())
            if record["pid"] == process.pid:
                # Training has started once the log has a step record.
                logs = list((config.parent / "out").glob("log-*.jsonl"))
                if logs and '"type":"step"' in logs[0].read_text().replace(" ", ""):
                    return process
        assert process.poll() is None, process.stderr.read()
        time.sleep(0.1)
    process.kill()
    raise AssertionError("the first run never took the lock")


def test_a_second_run_in_the_same_output_dir_is_refused(surogate_bin, tmp_path):
    model = write_model(tmp_path / "model")
    config = write_text_run(tmp_path, model, extra="save_steps: 5\nsave_total_limit: 1\n")
    config.write_text(config.read_text().replace("max_steps: 1", "max_steps: 100000000"))
    out = tmp_path / "out"
    first = start_long_run(surogate_bin, config)
    try:
        second = tmp_path / "second.yaml"
        second.write_text(config.read_text().replace("max_steps: 100000000", "max_steps: 2"))
        stderr = user_error(run_surogate(surogate_bin, "pt", second))
        assert f"output_dir '{out}' is in use by another Surogate run: pid {first.pid} on {socket.gethostname()}" in stderr
        assert f"{surogate_bin} pt {config}" in stderr  # the holder's command line
        assert "choose another output_dir" in stderr
        # The same with a restart supervisor (max_restarts), and for `tokenize` (its cache is in output_dir).
        stderr = user_error(run_surogate(surogate_bin, "pt", second, "--max_restarts=2"))
        assert f"output_dir '{out}' is in use" in stderr
        stderr = user_error(run_surogate(surogate_bin, "tokenize", second))
        assert f"output_dir '{out}' is in use" in stderr
        # checkpoint_dir is locked too when it is another folder.
        elsewhere = tmp_path / "elsewhere"
        stderr = user_error(run_surogate(surogate_bin, "pt", second, f"--output_dir={elsewhere}",
                                         f"--checkpoint_dir={out}"))
        assert f"checkpoint_dir '{out}' is in use" in stderr
        # Another folder but the same log file: the log is held too, so two runs never interleave in it.
        log = next(out.glob("log-*.jsonl"))
        stderr = user_error(run_surogate(surogate_bin, "pt", second, f"--output_dir={elsewhere}", f"--log_file={log}"))
        assert f"log_file '{log}' is being written by another process" in stderr
        # Nothing of the first run was touched: its log holds only its own records.
        assert all(json.loads(line)["type"] != "summary" for line in log.read_text().splitlines())
        assert not (out / "model.safetensors").exists()
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    # kill -9 released the lock: the next run in the folder trains and finishes.
    result = run_surogate(surogate_bin, "pt", second)
    assert result.returncode == 0, result.stderr
    assert (out / "model.safetensors").exists()
    record = json.loads((out / ".surogate.lock").read_text())
    assert record["host"] == socket.gethostname() and record["pid"] != first.pid


def test_a_supervised_run_holds_the_lock_across_its_attempts(surogate_bin, tmp_path):
    """With max_restarts the supervisor holds the folders; its child (the same command) must not
    be refused by its own parent's lock."""
    model = write_model(tmp_path / "model")
    config = write_text_run(tmp_path, model, extra="max_restarts: 1\n")
    result = run_surogate(surogate_bin, "pt", config)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "model.safetensors").exists()
