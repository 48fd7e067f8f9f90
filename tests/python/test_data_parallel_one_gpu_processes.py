"""Two `surogate sft` processes sharing ONE GPU train as a two-rank NCCL world, so the CUDA
data-parallel path between ranks — the bucketed gradient reduction, ZeRO-1's bf16 publish of the
weights and the fp32 masters gathered before the outputs are written, ZeRO-2's reduce-scatter and
fp32 publish — runs on a machine with a single GPU (the 2-GPU tests skip there).

NCCL refuses two ranks on one GPU of one host ("Duplicate GPU detected"); each process gets its
own NCCL_HOSTID, so NCCL takes them for two hosts with one GPU each and joins them over sockets on
the loopback (NCCL_SOCKET_IFNAME=lo). The launcher variables say one process per machine
(LOCAL_RANK 0), so both train on GPU 0.

Full fine-tuning under ZeRO-1, 2 and 3 and LoRA under ZeRO-1, against one process with twice the
gradient accumulation, with the same tolerance as the 2-GPU tests (test_data_parallel_gpus_cli.py:
the order of the fp32 additions differs, which can flip an isolated bf16 weight): step 1 within
1e-5, every step within 0.01 nats. The written weights agree too: in the last checkpoint (fp32
masters) every tensor's mean |two − one| is under a tenth of its mean change over the last half of
the steps, and in the outputs under a tenth of the smallest such change
(measured on an H200, 2026-12-01: ZeRO-1 0.00 %, full and LoRA; ZeRO-2 and ZeRO-3 0.90 %); a weight whose
fp32 master another rank stepped but the writing rank never gathered differs by about its whole
change (with ZeRO-1's gather before the download removed, final_norm.weight differed by 4x it)."""
import json
import os
import subprocess

import numpy as np
import pytest

from conftest import read_tensors, run_surogate
from test_data_parallel_gpus_cli import free_port, visible_gpus, write_config

pytestmark = pytest.mark.skipif(visible_gpus() < 1, reason="needs a GPU")


def one_gpu_rank_env(rank, port):
    """Rank `rank` of a world of two processes, each alone on its "machine" as NCCL sees it."""
    return dict(os.environ, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
                MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), NCCL_HOSTID=f"surogate-test-host-{rank}",
                NCCL_SOCKET_IFNAME="lo", NCCL_IB_DISABLE="1")


def step_losses(out):
    records = [json.loads(line) for line in next(out.glob("log-*.jsonl")).read_text().splitlines()]
    return [r for r in records if r["type"] == "config"][0], [r["loss"] for r in records if r["type"] == "step"]


# Full fine-tuning with clipping writes model.safetensors; LoRA (its adapters the ranks' units)
# adapter_model.safetensors. Each saves halfway and at the end.
FULL = ("lora: false\nmax_grad_norm: 0.5\n", [], 12, "model.safetensors")
LORA = ("lora: true\nlora_rank: 8\nlora_alpha: 16\nlora_dropout: 0.0\n", ["--learning_rate=1e-2"], 20,
        "adapter_model.safetensors")


@pytest.mark.parametrize("mode,zero", [("full", "1"), ("full", "2"), ("full", "3"), ("lora", "1")])
def test_two_processes_on_one_gpu_match_one_process_and_write_its_weights(surogate_bin, tmp_path, mode, zero):
    extra, overrides, steps, output = FULL if mode == "full" else LORA
    config = write_config(tmp_path, extra)
    overrides = [*overrides, "--gpus=1", f"--max_steps={steps}", f"--save_steps={steps // 2}"]
    one_out, two_out = tmp_path / "one", tmp_path / "two"
    result = run_surogate(surogate_bin, "sft", config, f"--output_dir={one_out}", "--gradient_accumulation_steps=2",
                          *overrides)
    assert result.returncode == 0, result.stderr + result.stdout

    port = free_port()
    processes = [subprocess.Popen([str(surogate_bin), "sft", str(config), f"--output_dir={two_out}",
                                   "--gradient_accumulation_steps=1", f"--zero_level={zero}", *overrides],
                                  env=one_gpu_rank_env(rank, port), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for rank in range(2)]
    outputs = [process.communicate(timeout=600) for process in processes]
    for process, (stdout, stderr) in zip(processes, outputs):
        assert process.returncode == 0, stderr + stdout
    assert f"2 data-parallel ranks (2 processes × 1 rank), ZeRO-{zero}" in outputs[0][0], outputs[0][0]
    assert "NCCL" in outputs[0][0]

    record, two = step_losses(two_out)
    assert record["data_parallel_ranks"] == 2
    _, one = step_losses(one_out)
    assert len(one) == len(two) == steps
    assert abs(one[0] - two[0]) <= 1e-5, (one, two)
    assert all(abs(a - b) <= 0.01 for a, b in zip(one, two)), (one, two)
    assert two[-1] < two[0] - 0.3, two  # it trained

    # The model starts from random weights (LoRA's B from zeros); the one process's halfway checkpoint
    # is the start the last half of the steps moved every trained weight from. The checkpoints hold
    # the fp32 masters (the ones the rank writing them gathered), the outputs the weights as
    # transformers (PEFT) reads them.
    halfway = read_tensors(one_out / f"checkpoint-{steps // 2}" / "model.safetensors")
    one_end, two_end = (read_tensors(out / f"checkpoint-{steps}" / "model.safetensors") for out in (one_out, two_out))
    assert one_end.keys() == two_end.keys() == halfway.keys()
    changes, worst = {}, 0.0
    for name, trained in one_end.items():
        changes[name] = mean_abs(trained, halfway[name])
        assert changes[name] > 0, name
        disagreement = mean_abs(two_end[name], trained)
        worst = max(worst, disagreement / changes[name])
        assert disagreement < 0.1 * changes[name], f"{name}: ranks differ by {disagreement:.3g}, training moved it {changes[name]:.3g}"
    print(f"{mode}, ZeRO-{zero}: the ranks' masters differ by at most {worst:.2%} of the last half's change")
    one_output, two_output = read_tensors(one_out / output), read_tensors(two_out / output)
    assert one_output.keys() == two_output.keys()
    for name, weight in one_output.items():
        assert mean_abs(two_output[name], weight) < 0.1 * min(changes.values()), name


def mean_abs(a, b):
    return float(np.abs(a.astype(np.float64) - b.astype(np.float64)).mean())
