"""Multi-node training through Ray, on a local cluster of two Ray nodes (Ray's own test utility,
ray.cluster_utils.Cluster: two raylets on this machine, so placement, actors and the driver's
connection are Ray's real ones). `surogate sft --distributed.num_nodes=2` hands itself to the Ray
driver, which runs one worker per node: the run equals two processes started with the launcher
variables and one process with two rank threads, bit for bit (the same gloo collectives in the same
order), each node keeps its token cache under worker_output_dir/node-<rank>/, and only rank 0 writes
output_dir. `ray_address: local` starts Ray here and gives the same run. A cluster too small for
num_nodes is a clear error, and so is a Python without Ray.

The cluster tests skip only when `ray` is not importable (scripts/install_deps.sh installs it)."""
import os
import stat
import sys

import pytest

from conftest import make_quickstart_example, quickstart_sft_config, run_surogate
from test_data_parallel_cli import gpu_visible
from test_distributed_processes import assert_same_tensors, log_records, steps

try:
    import ray  # noqa: F401
    from ray.cluster_utils import Cluster
    HAVE_RAY = True
except ImportError:
    HAVE_RAY = False

needs_ray = pytest.mark.skipif(not HAVE_RAY, reason="ray is not importable (scripts/install_deps.sh installs it)")
cpu_only = pytest.mark.skipif(gpu_visible(), reason="a GPU is visible: these are the CPU ranks' tests")


@pytest.fixture(scope="module")
def cluster():
    """Two Ray nodes of one CPU each (one worker per node fits each exactly)."""
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    yield cluster
    cluster.shutdown()


def lora_config(tmp_path, name):
    example = tmp_path / "ex"
    if not example.exists():
        make_quickstart_example(tmp_path)
    return quickstart_sft_config(tmp_path / f"{name}.yaml", example / "model", tmp_path / name, example,
                                 "lora: true\nlora_rank: 4\n", gradient_accumulation_steps=2, max_steps=3)


@needs_ray
@cpu_only
def test_two_ray_nodes_equal_two_rank_threads(surogate_bin, tmp_path, cluster):
    config = lora_config(tmp_path, "ray")
    result = run_surogate(surogate_bin, "sft", config, "--distributed.num_nodes=2",
                          f"--distributed.ray_address={cluster.address}",
                          f"--distributed.worker_output_dir={tmp_path / 'workers'}")
    assert result.returncode == 0, result.stderr + result.stdout
    assert "Ray: 2 nodes" in result.stdout
    assert "2 data-parallel ranks (2 processes × 1 rank), ZeRO-1" in result.stdout
    assert "step 3/3" in result.stdout  # rank 0's output reaches the driver
    # Each node tokenized into its own folder; output_dir holds no cache of its own.
    for node in (0, 1):
        assert (tmp_path / "workers" / f"node-{node}" / "tokenized" / "dataset.surotok").exists()
    assert not (tmp_path / "ray" / "tokenized").exists()
    config_record = next(r for r in log_records(tmp_path / "ray") if r["type"] == "config")
    assert config_record["data_parallel_ranks"] == 2

    threads = lora_config(tmp_path, "threads")
    assert run_surogate(surogate_bin, "sft", threads, "--gpus=2").returncode == 0
    assert steps(tmp_path / "ray") == steps(tmp_path / "threads")
    assert_same_tensors(tmp_path / "threads" / "adapter_model.safetensors", tmp_path / "ray" / "adapter_model.safetensors")
    assert_same_tensors(tmp_path / "threads" / "checkpoint-3" / "optimizer.safetensors",
                        tmp_path / "ray" / "checkpoint-3" / "optimizer.safetensors")


@needs_ray
@cpu_only
def test_ray_address_local_starts_ray_on_this_machine(surogate_bin, tmp_path):
    # Both "nodes" on this machine (SPREAD, not STRICT_SPREAD), each with its own cache folder.
    config = lora_config(tmp_path, "local")
    result = run_surogate(surogate_bin, "sft", config, "--distributed.num_nodes=2", "--distributed.ray_address=local",
                          f"--distributed.worker_output_dir={tmp_path / 'workers'}")
    assert result.returncode == 0, result.stderr + result.stdout
    assert "Ray: 2 nodes" in result.stdout
    assert (tmp_path / "workers" / "node-1" / "tokenized" / "dataset.surotok").exists()
    threads = lora_config(tmp_path, "threads")
    assert run_surogate(surogate_bin, "sft", threads, "--gpus=2").returncode == 0
    assert steps(tmp_path / "local") == steps(tmp_path / "threads")


@needs_ray
@cpu_only
def test_a_cluster_without_room_for_every_node_is_a_clear_error(surogate_bin, tmp_path, cluster):
    config = lora_config(tmp_path, "three")
    env = dict(os.environ, SUROGATE_RAY_PLACEMENT_TIMEOUT="3")
    result = run_surogate(surogate_bin, "sft", config, "--distributed.num_nodes=3",
                          f"--distributed.ray_address={cluster.address}", env=env)
    assert result.returncode == 2, result.stderr + result.stdout
    assert "distributed.num_nodes: 3: the Ray cluster cannot place one worker per node" in result.stderr, result.stderr


def test_a_python_without_ray_is_a_clear_error(surogate_bin, tmp_path):
    # -S leaves site-packages (where pip puts ray) off the path.
    python = tmp_path / "python-without-site"
    python.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    config = lora_config(tmp_path, "noray")
    result = run_surogate(surogate_bin, "sft", config, "--distributed.num_nodes=2",
                          env=dict(os.environ, SUROGATE_PYTHON=str(python)))
    assert result.returncode == 2, result.stderr + result.stdout
    assert "distributed.num_nodes: 2 trains through Ray, which" in result.stderr
    assert "pip install ray" in result.stderr
    missing = run_surogate(surogate_bin, "sft", config, "--distributed.num_nodes=2",
                           env=dict(os.environ, SUROGATE_PYTHON=str(tmp_path / "no-such-python")))
    assert missing.returncode == 2
    assert "cannot be started" in missing.stderr and "SUROGATE_PYTHON" in missing.stderr


@pytest.mark.parametrize("address", ["somewhere", "ray://", "host:port"])
def test_a_malformed_ray_address_is_a_config_error(surogate_bin, tmp_path, address):
    config = lora_config(tmp_path, "address")
    result = run_surogate(surogate_bin, "sft", config, "--distributed.num_nodes=2",
                          f"--distributed.ray_address={address}", "--dry-run")
    assert result.returncode == 2
    assert "distributed.ray_address" in result.stderr and f"(got '{address}')" in result.stderr, result.stderr
