"""Several `surogate sft` processes started with the launcher variables (RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR, MASTER_PORT, as torchrun sets them) train one run on CPU ranks.

Two processes give exactly the per-step losses, grad norms, final weights and checkpointed optimizer
state of one process with `gpus: 2` rank threads (fp32, bit for bit: the same gloo collectives run in
the same order, and the host-side sums — the window's loss weights, the ranks' losses and squared
norms — are taken in the same fixed order whichever process holds which rank), for LoRA and full
fine-tuning, ZeRO-1, ZeRO-2 and ZeRO-3 (each process keeps its shard of the weights, gathered per
layer across the processes), and for 2 processes x 2 rank threads against 4 threads. Only rank 0
writes (one log, the outputs, checkpoints). A checkpoint of two processes resumes exactly on two
processes or two threads, and on one rank within 5e-5 (the order of the fp32 additions differs).
A killed rank stops the other with a message naming the last complete checkpoint, a rank that
never starts is named after the timeout, and bad launcher variables are errors naming them."""
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import time

import numpy as np
import pytest

from conftest import make_quickstart_example, quickstart_sft_config, read_tensors, run_surogate
from test_data_parallel_cli import gpu_visible

pytestmark = pytest.mark.skipif(gpu_visible(), reason="a GPU is visible: these are the CPU ranks' tests")


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def launcher_env(rank, size, port, **extra):
    env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(size), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(size),
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    env.update({key: str(value) for key, value in extra.items()})
    return env


def start(binary, config, size, *overrides, **extra_env):
    """The processes of one run, started as torchrun would on one machine."""
    port = free_port()
    return [subprocess.Popen([str(binary), "sft", str(config), *overrides], env=launcher_env(rank, size, port, **extra_env),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in range(size)]


def finish(processes, timeout=300):
    results = []
    for process in processes:
        stdout, stderr = process.communicate(timeout=timeout)
        results.append((process.returncode, stdout, stderr))
    return results


def launch(binary, config, size, *overrides, **extra_env):
    results = finish(start(binary, config, size, *overrides, **extra_env))
    for rank, (code, stdout, stderr) in enumerate(results):
        assert code == 0, f"rank {rank}: {stderr}{stdout}"
    return results


def log_records(out):
    logs = list(out.glob("log-*.jsonl"))
    assert len(logs) == 1, logs  # rank 0 alone writes the log
    return [json.loads(line) for line in logs[0].read_text().splitlines()]


def steps(out):
    return [(r["loss"], r["grad_norm"], r["tokens"], r["loss_tokens"]) for r in log_records(out) if r["type"] == "step"]


def assert_same_tensors(first, second):
    a, b = read_tensors(first), read_tensors(second)
    assert a.keys() == b.keys()
    for name in a:
        assert np.array_equal(a[name], b[name]), name


def largest_difference(first, second):
    a, b = read_tensors(first), read_tensors(second)
    return max(float(np.max(np.abs(a[name].astype(np.float64) - b[name]))) for name in a)


@pytest.fixture
def example(tmp_path):
    return make_quickstart_example(tmp_path)


def write_config(tmp_path, example, name, lora, zero_level, **settings):
    extra = "lora: true\nlora_rank: 4\n" if lora else "lora: false\n"
    options = dict(gradient_accumulation_steps=2, max_steps=3, zero_level=zero_level)
    options.update(settings)
    return quickstart_sft_config(tmp_path / f"{name}.yaml", example / "model", tmp_path / name, example, extra, **options)


@pytest.mark.parametrize("lora,zero_level", [(True, 1), (True, 2), (True, 3), (False, 1), (False, 2), (False, 3)],
                         ids=["lora-zero1", "lora-zero2", "lora-zero3", "full-zero1", "full-zero2", "full-zero3"])
def test_two_processes_equal_one_process_with_two_rank_threads(surogate_bin, tmp_path, example, lora, zero_level):
    # LoRA keeps its dropout (0.05), whose masks are seeded by each micro-batch's place in the window.
    threads = write_config(tmp_path, example, "threads", lora, zero_level)
    result = run_surogate(surogate_bin, "sft", threads, "--gpus=2")
    assert result.returncode == 0, result.stderr + result.stdout
    processes = write_config(tmp_path, example, "processes", lora, zero_level)
    (rank0, stdout0, _), (_, stdout1, stderr1) = launch(surogate_bin, processes, 2)
    assert f"2 data-parallel ranks (2 processes × 1 rank), ZeRO-{zero_level}" in stdout0
    assert stdout1 == "" and stderr1 == ""  # the other rank prints nothing
    config_record = next(r for r in log_records(tmp_path / "processes") if r["type"] == "config")
    assert config_record["data_parallel_ranks"] == 2
    expected = steps(tmp_path / "threads")
    assert len(expected) == 3 and steps(tmp_path / "processes") == expected
    output = "adapter_model.safetensors" if lora else "model.safetensors"
    assert_same_tensors(tmp_path / "threads" / output, tmp_path / "processes" / output)
    for part in ("model.safetensors", "optimizer.safetensors"):  # rank 0 gathered rank 1's optimizer shard
        assert_same_tensors(tmp_path / "threads" / "checkpoint-3" / part, tmp_path / "processes" / "checkpoint-3" / part)


def test_two_processes_of_two_rank_threads_equal_four_threads(surogate_bin, tmp_path, example):
    threads = write_config(tmp_path, example, "threads", True, 2, gradient_accumulation_steps=1)
    assert run_surogate(surogate_bin, "sft", threads, "--gpus=4").returncode == 0
    processes = write_config(tmp_path, example, "processes", True, 2, gradient_accumulation_steps=1)
    (_, stdout0, _), _ = launch(surogate_bin, processes, 2, "--gpus=2")
    assert "4 data-parallel ranks (2 processes × 2 ranks), ZeRO-2" in stdout0
    assert steps(tmp_path / "processes") == steps(tmp_path / "threads")
    assert_same_tensors(tmp_path / "threads" / "adapter_model.safetensors",
                        tmp_path / "processes" / "adapter_model.safetensors")


def test_a_checkpoint_of_two_processes_resumes_on_any_world(surogate_bin, tmp_path, example):
    config = write_config(tmp_path, example, "run", False, 1, max_steps=4, save_steps=2)
    launch(surogate_bin, config, 2)
    whole = tmp_path / "run"
    reference = whole / "checkpoint-4" / "model.safetensors"

    def interrupted(name):
        folder = tmp_path / name
        shutil.copytree(whole, folder, ignore=shutil.ignore_patterns("checkpoint-4", "log-*"))
        return folder

    resume = ["--resume_from_checkpoint=true"]
    folder = interrupted("two_processes")
    (_, stdout, _), _ = launch(surogate_bin, config, 2, f"--output_dir={folder}", *resume)
    assert "resumed from" in stdout and "(step 2)" in stdout
    assert_same_tensors(folder / "checkpoint-4" / "model.safetensors", reference)
    assert_same_tensors(folder / "checkpoint-4" / "optimizer.safetensors", whole / "checkpoint-4" / "optimizer.safetensors")

    folder = interrupted("two_threads")
    result = run_surogate(surogate_bin, "sft", config, f"--output_dir={folder}", "--gpus=2", *resume)
    assert result.returncode == 0, result.stderr
    assert_same_tensors(folder / "checkpoint-4" / "model.safetensors", reference)

    # Another world size: one rank with twice the accumulation sums in another order.
    folder = interrupted("one_rank")
    result = run_surogate(surogate_bin, "sft", config, f"--output_dir={folder}", "--gradient_accumulation_steps=4",
                          *resume)
    assert result.returncode == 0, result.stderr
    assert "(step 2)" in result.stdout
    assert largest_difference(folder / "checkpoint-4" / "model.safetensors", reference) <= 5e-5


@pytest.mark.parametrize("victim", [1, 0])
def test_a_killed_rank_stops_the_other_with_a_clear_message(surogate_bin, tmp_path, example, victim):
    config = write_config(tmp_path, example, "run", True, 1, max_steps=100000, save_steps=2, eval_steps=100000)
    # The writer thread sleeps before each checkpoint's manifest, so a checkpoint is in flight when
    # the rank is killed: the one named must be the last on disk, the one a resume picks.
    processes = start(surogate_bin, config, 2, SUROGATE_TEST_FAULTS="checkpoint_write_delay_ms=1500")
    log = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # until rank 0 has logged 5 steps (checkpoints of steps 2 and 4 exist)
        logs = list((tmp_path / "run").glob("log-*.jsonl"))
        if logs and sum('"type":"step"' in line.replace(" ", "") for line in logs[0].read_text().splitlines()) >= 5:
            log = logs[0]
            break
        time.sleep(0.2)
    assert log is not None, "the run did not get going"
    processes[victim].send_signal(signal.SIGKILL)
    survivor = processes[1 - victim]
    killed_at = time.monotonic()
    _, stderr = survivor.communicate(timeout=120)
    assert time.monotonic() - killed_at < 60, "the survivor waited for the timeout instead of noticing at once"
    processes[victim].communicate()
    assert survivor.returncode == 2, stderr
    assert f"rank {1 - victim} of 2" in stderr or f"process {1 - victim} of 2" in stderr, stderr
    assert "stopped or is stuck" in stderr and "The run stopped; the last complete checkpoint is" in stderr, stderr
    checkpoint = stderr.split("the last complete checkpoint is ")[1].split(" (resume")[0]
    assert pathlib.Path(checkpoint).parent.resolve() == (tmp_path / "run").resolve()
    assert (pathlib.Path(checkpoint) / "complete.json").exists()
    # The checkpoint named is usable: the run continues from it (here on one process, two threads).
    step = int(pathlib.Path(checkpoint).name.split("-")[1])
    resumed = run_surogate(surogate_bin, "sft", config, "--gpus=2", "--resume_from_checkpoint=true",
                           f"--max_steps={step + 1}")
    assert resumed.returncode == 0, resumed.stderr
    assert f"resumed from {checkpoint} (step {step})" in resumed.stdout


def test_a_rank_that_never_starts_is_named_after_the_timeout(surogate_bin, tmp_path, example):
    config = write_config(tmp_path, example, "run", True, 1)
    port = free_port()
    result = subprocess.run([str(surogate_bin), "sft", str(config)], capture_output=True, text=True, timeout=120,
                            env=launcher_env(0, 3, port, SUROGATE_DISTRIBUTED_TIMEOUT=2))
    assert result.returncode == 2, result.stderr
    assert "process(es) 1, 2 did not join the run at 127.0.0.1" in result.stderr, result.stderr


@pytest.mark.parametrize("variables,expected", [
    ({"RANK": "first"}, "RANK='first' is not a whole number"),
    ({"RANK": "2"}, "RANK=2 is not below WORLD_SIZE=2"),
    ({"MASTER_ADDR": None}, "MASTER_ADDR is not set, but WORLD_SIZE=2 asks for 2 processes"),
    ({"MASTER_PORT": "99999"}, "MASTER_PORT=99999 is not a TCP port"),
    ({"WORLD_SIZE": None}, "RANK is set but WORLD_SIZE is not"),
    ({"SUROGATE_DISTRIBUTED_TIMEOUT": "never"}, "SUROGATE_DISTRIBUTED_TIMEOUT='never' must be a positive number"),
])
def test_bad_launcher_variables_are_errors_naming_them(surogate_bin, tmp_path, example, variables, expected):
    config = write_config(tmp_path, example, "run", True, 1)
    env = launcher_env(0, 2, free_port())
    for name, value in variables.items():
        if value is None:
            env.pop(name)
        else:
            env[name] = value
    result = subprocess.run([str(surogate_bin), "sft", str(config)], capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 2, result.stderr
    assert expected in result.stderr, result.stderr


def test_processes_that_disagree_are_errors_naming_what(surogate_bin, tmp_path, example):
    config = write_config(tmp_path, example, "run", True, 1)
    # A different number of rank threads per process (gpus).
    port = free_port()
    processes = [subprocess.Popen([str(surogate_bin), "sft", str(config), f"--gpus={rank + 1}"],
                                  env=launcher_env(rank, 2, port), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for rank in range(2)]
    for code, _, stderr in finish(processes, timeout=120):
        assert code == 2, stderr
        assert "disagree on the data-parallel ranks each process drives" in stderr, stderr
    # distributed.num_nodes says one process per node, and the launcher started another count.
    result = subprocess.run([str(surogate_bin), "sft", str(config), "--distributed.num_nodes=3"], capture_output=True,
                            text=True, timeout=60, env=launcher_env(0, 2, free_port()))
    assert result.returncode == 2, result.stderr
    assert "distributed.num_nodes: 3 runs one process per node, but the launcher started 2 processes" in result.stderr
