"""`surogate sft` with sequence and pipeline parallelism on CPU ranks, as a user runs it: the run
says which layout it trains (and the pipeline's stages and bubble), logs the data-parallel ranks,
and gives the per-step losses of one rank with the same global batch (tolerance 2e-4 relative, from
the order of fp32 additions only; tests/train/test_model_parallel.cpp checks the weights); the dry
run predicts every layout of the ranks (data × sequence × pipeline, the three composing) and names the one the engine would pick; a layout the model
cannot split is an error naming the option (exit 2)."""
import json
import shutil
import subprocess

import pytest

from conftest import make_quickstart_example, quickstart_sft_config, run_surogate


def gpu_visible():
    return shutil.which("nvidia-smi") is not None and subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0


pytestmark = pytest.mark.skipif(gpu_visible(), reason="a GPU is visible: gpus: N means GPUs here")


def train(surogate_bin, tmp_path, ex, name, *overrides, **settings):
    config = quickstart_sft_config(tmp_path / f"{name}.yaml", ex / "model", tmp_path / name, ex, lora="false",
                                   max_steps=4, adamw_epsilon="1e-6", **settings)
    result = run_surogate(surogate_bin, "sft", config, *overrides)
    assert result.returncode == 0, result.stderr + result.stdout
    records = [json.loads(line) for line in next((tmp_path / name).glob("log-*.jsonl")).read_text().splitlines()]
    config_record = next(r for r in records if r["type"] == "config")
    return result.stdout, config_record, [r["loss"] for r in records if r["type"] == "step"]


def test_sequence_and_pipeline_ranks_train_as_one_rank(surogate_bin, tmp_path):
    ex = make_quickstart_example(tmp_path)
    _, _, one = train(surogate_bin, tmp_path, ex, "one", gradient_accumulation_steps=4)
    stdout, record, sequence = train(surogate_bin, tmp_path, ex, "sequence", "--gpus=4", "--sequence_parallel_size=2",
                                     gradient_accumulation_steps=2)
    assert "4 ranks (2 data-parallel × 2 sequence-parallel), ZeRO-1" in stdout
    assert record["data_parallel_ranks"] == 2
    stdout, record, pipeline = train(surogate_bin, tmp_path, ex, "pipeline", "--gpus=2", "--pipeline_parallel_size=2",
                                     gradient_accumulation_steps=4)
    assert "pipeline: 2 stages (layers 0 | 1), 1F1B over 4 micro-batches per step: bubble 20% of a step" in stdout
    assert record["data_parallel_ranks"] == 1
    # 3D: each stage's graph split over a sequence group of 2.
    stdout, record, both = train(surogate_bin, tmp_path, ex, "both", "--gpus=4", "--sequence_parallel_size=2",
                                 "--pipeline_parallel_size=2", gradient_accumulation_steps=4)
    assert "4 ranks (2 sequence-parallel × 2 pipeline stages), ZeRO-1" in stdout
    assert "pipeline: 2 stages (layers 0 | 1), 1F1B over 4 micro-batches per step" in stdout
    assert record["data_parallel_ranks"] == 1
    assert len(one) == len(sequence) == len(pipeline) == len(both) == 4
    for other in (sequence, pipeline, both):
        assert all(abs(a - b) <= 2e-4 * abs(a) for a, b in zip(one, other)), (one, other)


def test_the_dry_run_predicts_every_layout_and_names_the_pick(surogate_bin, tmp_path):
    ex = make_quickstart_example(tmp_path)
    config = quickstart_sft_config(tmp_path / "c.yaml", ex / "model", tmp_path / "out", ex, lora="false", gpus=4,
                                   sequence_parallel_size=2)
    result = run_surogate(surogate_bin, "sft", config, "--dry-run")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("#   ")]
    assert any(line.split()[1:4] == ["2", "×", "2"] and "fits" in line and "<- configured" in line for line in lines), lines
    assert any("1 × 4 × 1" in line and "cannot: sequence_parallel_size: 4 gives each rank" in line for line in lines), lines
    assert any("1 × 1 × 4" in line and "needs at least one layer per stage, but the model has 2 layers" in line
               for line in lines), lines
    assert any("1 × 2 × 2" in line and "fits" in line for line in lines), lines  # 3D parallelism on CPU ranks
    assert "# the engine would pick 4 × 1 × 1 (data parallelism alone: only gradients travel)" in result.stdout


def test_the_dry_run_for_gpus_predicts_sequence_times_pipeline(surogate_bin, tmp_path):
    # 3D parallelism runs on GPUs too: the GPU table predicts its memory like any other layout.
    ex = make_quickstart_example(tmp_path)
    config = quickstart_sft_config(tmp_path / "c.yaml", ex / "model", tmp_path / "out", ex, lora="false", gpus=4,
                                   sequence_parallel_size=2, pipeline_parallel_size=2)
    result = run_surogate(surogate_bin, "sft", config, "--dry-run", "--gpu-memory", "80GiB")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("#   ")]
    both = [line for line in lines if "1 × 2 × 2" in line]
    assert both and "fits" in both[0] and "cannot:" not in both[0] and "<- configured" in both[0], lines


def test_the_dry_run_lists_a_layout_the_options_refuse_with_the_reason(surogate_bin, tmp_path):
    # Pipelines gather no weights yet, so with zero_level: 3 every pipeline layout is refused by the
    # options' rules: the table says so rather than "fits", and never picks one.
    ex = make_quickstart_example(tmp_path)
    config = quickstart_sft_config(tmp_path / "c.yaml", ex / "model", tmp_path / "out", ex, lora="false", gpus=4,
                                   zero_level=3)
    result = run_surogate(surogate_bin, "sft", config, "--dry-run")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("#   ")]
    for layout in ("2 × 1 × 2", "1 × 2 × 2"):
        pipeline = [line for line in lines if layout in line]
        assert pipeline and "cannot:" in pipeline[0] and "zero_level: 3" in pipeline[0], lines
    assert any("2 × 2 × 1" in line and "fits" in line for line in lines), lines  # sequence parallelism composes


def test_a_layout_the_model_cannot_split_names_the_option(surogate_bin, tmp_path):
    ex = make_quickstart_example(tmp_path)
    config = quickstart_sft_config(tmp_path / "c.yaml", ex / "model", tmp_path / "out", ex, lora="false")
    result = run_surogate(surogate_bin, "sft", config, "--gpus=4", "--sequence_parallel_size=4")
    assert result.returncode == 2
    assert "sequence_parallel_size: 4 gives each rank of a sequence group 1/4 of the attention heads" in result.stderr
    result = run_surogate(surogate_bin, "sft", config, "--gpus=3", "--sequence_parallel_size=2")
    assert result.returncode == 2
    assert "sequence_parallel_size: 2 needs the ranks to be a multiple of 2, but this run has 3 ranks" in result.stderr


def test_sequence_ranks_with_zero_three_train_as_one_rank_in_threads_and_processes(surogate_bin, tmp_path):
    """zero_level: 3 with sequence_parallel_size: 2 on 4 CPU ranks: the run says so, its losses are
    one rank's with the same global batch (2e-4 relative), and 4 processes of one rank each (each
    sequence group spanning two) give exactly the numbers of 4 rank threads."""
    from test_distributed_processes import launch, steps, assert_same_tensors
    ex = make_quickstart_example(tmp_path)
    _, _, one = train(surogate_bin, tmp_path, ex, "one", gradient_accumulation_steps=2, save_steps=4)
    stdout, record, threads = train(surogate_bin, tmp_path, ex, "threads", "--gpus=4", "--sequence_parallel_size=2",
                                    "--zero_level=3", save_steps=4)
    assert "4 ranks (2 data-parallel × 2 sequence-parallel), ZeRO-3" in stdout
    assert record["data_parallel_ranks"] == 2
    assert len(one) == len(threads) == 4
    assert all(abs(a - b) <= 2e-4 * abs(a) for a, b in zip(one, threads)), (one, threads)
    config = quickstart_sft_config(tmp_path / "processes.yaml", ex / "model", tmp_path / "processes", ex, lora="false",
                                   max_steps=4, save_steps=4, adamw_epsilon="1e-6", sequence_parallel_size=2,
                                   zero_level=3)
    (_, stdout0, _), *_ = launch(surogate_bin, config, 4)
    assert "4 ranks (2 data-parallel × 2 sequence-parallel) (4 processes × 1 rank), ZeRO-3" in stdout0
    assert steps(tmp_path / "processes") == steps(tmp_path / "threads")
    for part in ("model.safetensors", "optimizer.safetensors"):
        assert_same_tensors(tmp_path / "threads" / "checkpoint-4" / part, tmp_path / "processes" / "checkpoint-4" / part)


def test_sequence_groups_spread_over_processes_equal_threads(surogate_bin, tmp_path):
    """4 processes of one rank each (launcher variables), each sequence group spanning two of them,
    give exactly the numbers of one process with 4 rank threads: the same gloo collectives and
    exchanges in the same order, host sums in a fixed order."""
    from test_distributed_processes import finish, launch, start, steps, assert_same_tensors
    ex = make_quickstart_example(tmp_path)

    def write(name):
        return quickstart_sft_config(tmp_path / f"{name}.yaml", ex / "model", tmp_path / name, ex, lora="false",
                                     max_steps=3, save_steps=3, sequence_parallel_size=2)

    result = run_surogate(surogate_bin, "sft", write("threads"), "--gpus=4")
    assert result.returncode == 0, result.stderr + result.stdout
    (_, stdout0, _), *_ = launch(surogate_bin, write("processes"), 4)
    assert "4 ranks (2 data-parallel × 2 sequence-parallel) (4 processes × 1 rank), ZeRO-1" in stdout0
    assert len(steps(tmp_path / "threads")) == 3 and steps(tmp_path / "processes") == steps(tmp_path / "threads")
    for part in ("model.safetensors", "optimizer.safetensors"):
        assert_same_tensors(tmp_path / "threads" / "checkpoint-3" / part, tmp_path / "processes" / "checkpoint-3" / part)
    # A pipeline's stages are rank threads of one process in this version.
    results = finish(start(surogate_bin, write("pipeline"), 2, "--sequence_parallel_size=1", "--pipeline_parallel_size=2"))
    assert all(code == 2 for code, _, _ in results), results
    assert "pipeline_parallel_size: 2 runs its stages as rank threads of one process" in results[0][2]
