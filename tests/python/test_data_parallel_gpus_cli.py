"""`surogate sft config.yaml --gpus=2` on two GPUs (CUDA backend, NCCL, threads of one process):
the run says so, logs `data_parallel_ranks: 2`, and gives the per-step losses of one GPU with twice
the gradient accumulation. Skipped unless 2 or more GPUs are visible (bench/run_multi_gpu.sh runs it
on a lent multi-GPU machine, with SUROGATE_BIN pointing at the carried binary).

Tolerance: the same micro-batches give the same bf16 gradients on either GPU; only the order of
their fp32 additions differs (two accumulators and NCCL's sum against one accumulator), which can
flip an isolated bf16 weight's rounding: every step within 0.01 nats, step 1 within 1e-5 (the
weights are still identical there). ZeRO-2 (reduce-scatter, the norm from the shards) with clipping
and ZeRO-3 (each GPU keeps its shard of the weights, gathered a layer at a time) are held to the
same tolerance; the outputs are the single-GPU files.

Two processes started with the launcher variables (one GPU each, picked by LOCAL_RANK; NCCL
joined through the unique id rank 0 broadcasts over the control channel) track the same run of
one process driving both GPUs within the same tolerance (the same NCCL sums, so usually exactly),
and when one of them is killed the other stops within a minute with the message naming the
last complete checkpoint: the host's polling wait sees NCCL's error or times out and aborts the
communicator instead of hanging in a collective."""
import json
import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

from conftest import make_quickstart_example, run_surogate


def visible_gpus():
    if shutil.which("nvidia-smi") is None:
        return 0
    listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return sum(line.startswith("GPU ") for line in listing.stdout.splitlines()) if listing.returncode == 0 else 0


pytestmark = pytest.mark.skipif(visible_gpus() < 2, reason=f"needs 2 GPUs, {visible_gpus()} visible")


# Full fine-tuning (lora defaults to true, as the reference), so the output is model.safetensors.
FULL_WITH_CLIPPING = "lora: false\nmax_grad_norm: 0.5\n"


def write_config(tmp_path, extra=""):
    ex = make_quickstart_example(tmp_path)
    config = tmp_path / "dp.yaml"
    config.write_text(f"""model: {ex / 'model'}
sequence_len: 64
use_chat_template: false
optimizer: adamw
learning_rate: 3e-3
warmup_steps: 3
per_device_train_batch_size: 4
max_steps: 12
validation_split_ratio: 0.02
eval_steps: 1000
save_steps: 1000
{extra}datasets:
  - path: {ex / 'train.jsonl'}
    type: instruction
    instruction_field: instruction
    output_field: output
    prompt_format: "reverse: {{instruction}} = {{output}}"
""")
    return config


def train(surogate_bin, config, out, *overrides):
    result = run_surogate(surogate_bin, "sft", config, f"--output_dir={out}", *overrides)
    assert result.returncode == 0, result.stderr + result.stdout
    records = [json.loads(line) for line in next(out.glob("log-*.jsonl")).read_text().splitlines()]
    config_record = next(r for r in records if r["type"] == "config")
    return result.stdout, config_record, [r["loss"] for r in records if r["type"] == "step"]


def expect_same_run(one, two):
    assert len(one) == len(two)
    assert abs(one[0] - two[0]) <= 1e-5, (one, two)
    assert all(abs(a - b) <= 0.01 for a, b in zip(one, two)), (one, two)
    assert two[-1] < two[0] - 0.3, two  # it trained


@pytest.mark.parametrize("zero", ["1", "2", "3"])
def test_two_gpus_match_one_gpu_with_twice_the_accumulation(surogate_bin, tmp_path, zero):
    config = write_config(tmp_path, FULL_WITH_CLIPPING)
    stdout, record, two = train(surogate_bin, config, tmp_path / "two", "--gpus=2", "--gradient_accumulation_steps=1",
                                f"--zero_level={zero}")
    assert f"gpus: 2 runs 2 data-parallel ranks, ZeRO-{zero}" in stdout and "NCCL" in stdout
    assert record["data_parallel_ranks"] == 2
    assert (tmp_path / "two" / "model.safetensors").exists()
    _, record, one = train(surogate_bin, config, tmp_path / "one", "--gpus=1", "--gradient_accumulation_steps=2")
    assert record["data_parallel_ranks"] == 1
    expect_same_run(one, two)


def test_two_gpus_lora_write_the_single_gpu_adapter(surogate_bin, tmp_path):
    config = write_config(tmp_path, "lora: true\nlora_rank: 8\nlora_alpha: 16\nlora_dropout: 0.0\n")
    _, _, two = train(surogate_bin, config, tmp_path / "two", "--gpus=2", "--gradient_accumulation_steps=1",
                      "--learning_rate=1e-2", "--max_steps=20")
    _, _, one = train(surogate_bin, config, tmp_path / "one", "--gpus=1", "--gradient_accumulation_steps=2",
                      "--learning_rate=1e-2", "--max_steps=20")
    expect_same_run(one, two)
    assert (tmp_path / "two" / "adapter_model.safetensors").exists()


def test_more_gpus_than_visible_is_an_error_naming_gpus(surogate_bin, tmp_path):
    config = write_config(tmp_path)
    result = run_surogate(surogate_bin, "sft", config, f"--output_dir={tmp_path / 'x'}", f"--gpus={visible_gpus() + 1}")
    assert result.returncode == 2
    assert "gpus:" in result.stderr and "visible" in result.stderr


def launcher_env(rank, port, **extra):
    env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    env.update({key: str(value) for key, value in extra.items()})
    return env


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_processes(surogate_bin, config, out, *overrides, **extra_env):
    port = free_port()
    return [subprocess.Popen([str(surogate_bin), "sft", str(config), f"--output_dir={out}", *overrides],
                             env=launcher_env(rank, port, **extra_env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True) for rank in range(2)]


def test_two_processes_of_one_gpu_track_one_process_with_two_gpus(surogate_bin, tmp_path):
    config = write_config(tmp_path, FULL_WITH_CLIPPING)
    _, _, threads = train(surogate_bin, config, tmp_path / "threads", "--gpus=2", "--gradient_accumulation_steps=1")
    processes = start_processes(surogate_bin, config, tmp_path / "processes", "--gradient_accumulation_steps=1")
    outputs = [process.communicate(timeout=600) for process in processes]
    for process, (stdout, stderr) in zip(processes, outputs):
        assert process.returncode == 0, stderr + stdout
    assert "2 data-parallel ranks (2 processes × 1 rank), ZeRO-1" in outputs[0][0] and "NCCL" in outputs[0][0]
    assert outputs[1][0] == ""  # rank 1 prints nothing
    records = [json.loads(line) for line in next((tmp_path / "processes").glob("log-*.jsonl")).read_text().splitlines()]
    assert next(r for r in records if r["type"] == "config")["data_parallel_ranks"] == 2
    expect_same_run(threads, [r["loss"] for r in records if r["type"] == "step"])
    assert (tmp_path / "processes" / "model.safetensors").exists()


def test_a_killed_gpu_process_stops_the_other_with_a_message(surogate_bin, tmp_path):
    config = write_config(tmp_path)
    out = tmp_path / "run"
    # A minute for any wait on the other process (NCCL may report nothing for a dead peer: then the
    # polling wait's timeout ends the survivor's collective).
    processes = start_processes(surogate_bin, config, out, "--max_steps=100000", "--save_steps=5",
                                "--gradient_accumulation_steps=1", SUROGATE_DISTRIBUTED_TIMEOUT=60)
    # Until rank 0 has logged 6 steps (so checkpoint-5 was taken). A tiny model trains hundreds of
    # steps a second on a GPU and save_total_limit rotates the old checkpoints away, so waiting for
    # one named folder can miss it; the log only grows.
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        logs = list(out.glob("log-*.jsonl"))
        if logs and sum('"type":"step"' in line.replace(" ", "") for line in logs[0].read_text().splitlines()) >= 6:
            break
        time.sleep(0.2)
    else:
        pytest.fail("the run did not get going")
    processes[1].send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    _, stderr = processes[0].communicate(timeout=300)
    processes[1].communicate()
    assert time.monotonic() - killed_at < 120, "rank 0 hung past the timeout"
    assert processes[0].returncode == 2, stderr
    assert "another rank stopped" in stderr or "another process of the run stopped" in stderr, stderr
    assert "the last complete checkpoint is" in stderr, stderr
