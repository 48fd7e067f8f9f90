"""Runs that never lose work, through the CLI on the CPU backend (the quickstart job, full
fine-tuning): a checkpoint is written by a writer thread while training goes on, and kill -9
during that write leaves the previous checkpoint usable and the half-written one ignored — the
resumed run has the uninterrupted run's per-step losses and final weights; a truncated newest
checkpoint is skipped with a warning; with max_restarts a run that crashes, fails with an internal
error or diverges restarts itself from its latest good checkpoint and ends with the uninterrupted
run's weights, each restart in the JSONL log and the report; restarts are bounded.

Failures are injected with SUROGATE_TEST_FAULTS (a test hook of `surogate sft|pt`, see
docs/training.md, "Recovery")."""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import make_quickstart_example, quickstart_sft_config, run_surogate

STEPS = 12


def write_config(tmp_path, name, ex, **settings):
    options = {"lora": "false", "max_steps": STEPS, "save_steps": 4, "learning_rate": "3e-3",
               "log_file": tmp_path / name / "log.jsonl"}
    options.update(settings)
    return quickstart_sft_config(tmp_path / f"{name}.yaml", ex / "model", tmp_path / name, ex, **options)


def records(log_file, kind=None):
    lines = [json.loads(line) for line in log_file.read_text().splitlines()]
    return [r for r in lines if kind is None or r["type"] == kind]


def step_losses(log_file):
    """The loss of every step, the last record of each step winning (a resumed run logs its steps again)."""
    losses = {}
    for record in records(log_file, "step"):
        losses[record["step"]] = record["loss"]
    return [losses[step] for step in sorted(losses)]


def environment(**faults):
    env = dict(os.environ)
    env["SUROGATE_TEST_FAULTS"] = ",".join(f"{key}={value}" for key, value in faults.items())
    return env


@pytest.fixture(scope="module")
def uninterrupted(surogate_bin, tmp_path_factory):
    """The example and the run every other one must reproduce."""
    tmp_path = tmp_path_factory.mktemp("recovery")
    ex = make_quickstart_example(tmp_path)
    config = write_config(tmp_path, "straight", ex)
    result = run_surogate(surogate_bin, "sft", config)
    assert result.returncode == 0, result.stderr + result.stdout
    out = tmp_path / "straight"
    return {"ex": ex, "losses": step_losses(out / "log.jsonl"), "weights": (out / "model.safetensors").read_bytes()}


def test_kill_during_an_asynchronous_write_keeps_the_previous_checkpoint_and_resume_matches(
        surogate_bin, tmp_path, uninterrupted):
    config = write_config(tmp_path, "killed", uninterrupted["ex"])
    out = tmp_path / "killed"
    # Each checkpoint's writer waits 3 s before its manifest: kill -9 once checkpoint-8 is being
    # written and training has gone on past it (step 9 logged).
    process = subprocess.Popen([str(surogate_bin), "sft", str(config)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env=environment(checkpoint_write_delay_ms=3000))
    deadline = time.monotonic() + 120
    def ready():
        if not (out / "checkpoint-8.partial").exists() or not (out / "log.jsonl").exists():
            return False
        return any(r["step"] >= 9 for r in records(out / "log.jsonl", "step"))
    while not ready() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert process.poll() is None, "the run ended before it could be killed mid-write"
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert (out / "checkpoint-8.partial").exists() and not (out / "checkpoint-8").exists()
    assert (out / "checkpoint-4" / "complete.json").exists()
    # Training went on while checkpoint-8 was written: steps after 8 are in the log, its record is not.
    assert [r["step"] for r in records(out / "log.jsonl", "checkpoint")] == [4]

    result = run_surogate(surogate_bin, "sft", config, "--resume_from_checkpoint=true")
    assert result.returncode == 0, result.stderr + result.stdout
    assert "resumed from" in result.stdout and "checkpoint-4" in result.stdout, result.stdout
    assert step_losses(out / "log.jsonl") == uninterrupted["losses"]
    assert (out / "model.safetensors").read_bytes() == uninterrupted["weights"]
    assert not list(out.glob("*.partial"))


def test_a_truncated_newest_checkpoint_is_skipped_with_a_warning(surogate_bin, tmp_path, uninterrupted):
    config = write_config(tmp_path, "truncated", uninterrupted["ex"])
    out = tmp_path / "truncated"
    # The first run stops with an internal error after step 9; checkpoint-8 was complete by then.
    first = run_surogate(surogate_bin, "sft", config, env=environment(error_after_step=9))
    assert first.returncode == 1, first.stderr
    newest = out / "checkpoint-8" / "model.safetensors"
    newest.write_bytes(newest.read_bytes()[:-64])
    result = run_surogate(surogate_bin, "sft", config, "--resume_from_checkpoint=true")
    assert result.returncode == 0, result.stderr + result.stdout
    assert f"checkpoint {out / 'checkpoint-8'} is skipped" in result.stdout, result.stdout
    assert "resumed from" in result.stdout and "(step 4)" in result.stdout, result.stdout
    assert step_losses(out / "log.jsonl") == uninterrupted["losses"]
    assert (out / "model.safetensors").read_bytes() == uninterrupted["weights"]


@pytest.mark.parametrize("fault, reason", [
    ({"crash_after_step": 6}, "killed by signal 9"),
    ({"error_after_step": 7}, "exit code 1"),
    ({"nonfinite_loss_from_step": 10}, "exit code 3"),
])
def test_a_failed_run_restarts_itself_and_ends_with_the_uninterrupted_weights(
        surogate_bin, tmp_path, uninterrupted, fault, reason):
    config = write_config(tmp_path, "restarted", uninterrupted["ex"], max_restarts=2)
    out = tmp_path / "restarted"
    result = run_surogate(surogate_bin, "sft", config, env=environment(**fault))
    assert result.returncode == 0, result.stderr + result.stdout
    restarts = records(out / "log.jsonl", "restart")
    assert len(restarts) == 1 and restarts[0]["attempt"] == 1 and reason in restarts[0]["reason"], restarts
    assert "restart 1 of 2" in result.stderr, result.stderr
    assert step_losses(out / "log.jsonl") == uninterrupted["losses"]
    assert (out / "model.safetensors").read_bytes() == uninterrupted["weights"]
    summary = records(out / "log.jsonl", "summary")[-1]
    assert summary["restarts"].startswith("1 — 1: ") and reason in summary["restarts"], summary
    assert "restarts" in (out / "report-restarted.html").read_text()


def test_restarts_are_bounded(surogate_bin, tmp_path, uninterrupted):
    config = write_config(tmp_path, "bounded", uninterrupted["ex"], max_restarts=1)
    out = tmp_path / "bounded"
    result = run_surogate(surogate_bin, "sft", config, env=environment(error_after_step=3, every_attempt=1))
    assert result.returncode == 1, result.stderr
    assert "max_restarts: 1 restart; giving up" in result.stderr, result.stderr
    assert len(records(out / "log.jsonl", "restart")) == 1


def test_a_user_error_is_not_restarted_and_divergence_exits_3(surogate_bin, tmp_path, uninterrupted):
    config = write_config(tmp_path, "diverged", uninterrupted["ex"])
    result = run_surogate(surogate_bin, "sft", config, env=environment(nonfinite_loss_from_step=5))
    assert result.returncode == 3, result.stderr
    assert "training diverged at step 6" in result.stderr and "checkpoint-4" in result.stderr, result.stderr
    # A mistake the child finds (a LoRA checkpoint for a full fine-tuning run) would fail the same
    # way again: exit code 2, no restart.
    lora = write_config(tmp_path, "mismatch", uninterrupted["ex"], lora="true", max_steps=4)
    assert run_surogate(surogate_bin, "sft", lora).returncode == 0
    config = write_config(tmp_path, "mismatch", uninterrupted["ex"], max_restarts=3, resume_from_checkpoint="true")
    result = run_surogate(surogate_bin, "sft", config)
    assert result.returncode == 2 and "checkpoint has no tensor" in result.stderr, result.stderr
    assert "restart" not in result.stderr and not records(tmp_path / "mismatch" / "log.jsonl", "restart")
