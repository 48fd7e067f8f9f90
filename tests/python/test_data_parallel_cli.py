"""`surogate sft config.yaml --gpus=2` on the CPU backend: two data-parallel ranks in one process.
The run says so, logs `data_parallel_ranks`, takes gradient_accumulation_steps micro-batches per
rank each step, and gives the per-step losses of `--gpus=1` with twice the accumulation (tolerance
2e-4 relative, from the order of fp32 additions only); `--zero_level=3` is still rejected by name."""
import json

import pytest

from conftest import REPO_ROOT, gpu_visible, make_quickstart_example, run_surogate


@pytest.mark.skipif(gpu_visible(), reason="a GPU is visible: gpus: 2 means two GPUs here (test_data_parallel_gpus_cli.py)")
def test_gpus_two_on_the_cpu_backend_matches_one_rank_with_twice_the_accumulation(surogate_bin, tmp_path):
    ex = make_quickstart_example(tmp_path)
    config = tmp_path / "dp.yaml"
    config.write_text(f"""model: {ex / 'model'}
sequence_len: 64
lora: true
lora_rank: 4
use_chat_template: false
optimizer: adamw
learning_rate: 1e-2
per_device_train_batch_size: 2
max_steps: 4
validation_split_ratio: 0.02
eval_steps: 1000
save_steps: 1000
datasets:
  - path: {ex / 'train.jsonl'}
    type: instruction
    instruction_field: instruction
    output_field: output
    prompt_format: "reverse: {{instruction}} = {{output}}"
""")

    def losses(name, *overrides):
        out = tmp_path / name
        result = run_surogate(surogate_bin, "sft", config, f"--output_dir={out}", *overrides)
        assert result.returncode == 0, result.stderr + result.stdout
        records = [json.loads(line) for line in next(out.glob("log-*.jsonl")).read_text().splitlines()]
        config_record = next(r for r in records if r["type"] == "config")
        return result.stdout, config_record, [r["loss"] for r in records if r["type"] == "step"]

    stdout, record, two = losses("two", "--gpus=2", "--gradient_accumulation_steps=1")
    assert "gpus: 2 runs 2 data-parallel ranks, ZeRO-1" in stdout
    assert record["data_parallel_ranks"] == 2 and record["gradient_accumulation_steps"] == 1
    assert (tmp_path / "two" / "adapter_model.safetensors").exists()
    _, record, one = losses("one", "--gradient_accumulation_steps=2")
    assert record["data_parallel_ranks"] == 1
    assert len(one) == len(two) == 4
    assert all(abs(a - b) <= 2e-4 * abs(a) for a, b in zip(one, two)), (one, two)


def test_zero_level_three_is_still_rejected_by_name(surogate_bin, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("model: m\ndatasets:\n  - path: d.jsonl\n    type: text\n")
    result = run_surogate(surogate_bin, "sft", config, "--gpus=2", "--zero_level=3", "--dry-run")
    assert result.returncode == 2
    assert "'zero_level' is valid but not implemented yet" in result.stderr + result.stdout


@pytest.mark.skipif(gpu_visible(), reason="a GPU is visible: gpus: 2 means two GPUs here (test_data_parallel_gpus_cli.py)")
def test_the_dry_run_predicts_memory_for_every_rank_thread(surogate_bin, tmp_path):
    ex = make_quickstart_example(tmp_path)
    config = REPO_ROOT / "examples/quickstart/config.yaml"
    paths = [f"--model={ex / 'model'}", f"--datasets.0.path={ex / 'train.jsonl'}",
             f"--validation_datasets.0.path={ex / 'valid.jsonl'}", f"--output_dir={tmp_path / 'out'}"]
    peaks = {}
    for ranks in (1, 2):
        result = run_surogate(surogate_bin, "sft", config, "--dry-run", *paths, f"--gpus={ranks}", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert ("2 data-parallel rank threads" in result.stdout) == (ranks == 2)
        line = next(l for l in result.stdout.splitlines() if "predicted peak" in l)
        peaks[ranks] = float(line.split()[3])
    # A second rank holds another backend but shares the optimizer state and the evaluator.
    assert peaks[1] < peaks[2] < 2 * peaks[1]
