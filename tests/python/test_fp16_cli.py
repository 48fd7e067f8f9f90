"""fp16 training (torch_dtype: float16) through the CLI on the CPU backend, where it is the
emulation (values rounded to fp16 where the GPU keeps fp16, fp32 masters, dynamic loss scaling):
200 steps of the quickstart job (examples/quickstart/config.yaml: a 2-layer Llama from scratch,
16 × 64 tokens a step, AdamW 3e-3, cosine) track the fp32 run — tolerances below, set from the
measured gap with a margin — and a deliberately overflowing loss scale backs off without a
single non-finite weight."""
import json
import shutil
import subprocess
import sys

import numpy as np

from conftest import REPO_ROOT, read_tensors, run_surogate

STEPS = 200


def quickstart(tmp_path):
    """The quickstart example generated into tmp_path, and its config rewritten to point there."""
    generated = tmp_path / "generated"
    subprocess.run([sys.executable, str(REPO_ROOT / "examples/quickstart/make_example.py"), str(generated)],
                   check=True, capture_output=True)
    text = (REPO_ROOT / "examples/quickstart/config.yaml").read_text()
    text = text.replace("examples/quickstart/generated", str(generated))
    config = tmp_path / "quickstart.yaml"
    config.write_text(text)
    return config


def step_records(log_file):
    return [r for r in map(json.loads, log_file.read_text().splitlines()) if r["type"] == "step"]


def run(surogate_bin, config, out, *overrides):
    result = run_surogate(surogate_bin, "sft", config, f"--output_dir={out}", f"--log_file={out}/log.jsonl",
                          f"--max_steps={STEPS}", "--save_steps=1000", *overrides)
    assert result.returncode == 0, result.stderr + result.stdout
    return result, step_records(out / "log.jsonl")


def test_fp16_emulation_tracks_fp32_over_200_quickstart_steps(surogate_bin, tmp_path):
    config = quickstart(tmp_path)
    _, fp32 = run(surogate_bin, config, tmp_path / "fp32")
    result, fp16 = run(surogate_bin, config, tmp_path / "fp16", "--torch_dtype=float16")
    assert "fp16 emulated in fp32" in result.stdout, result.stdout
    assert len(fp16) == len(fp32) == STEPS
    a = np.array([r["loss"] for r in fp32])
    b = np.array([r["loss"] for r in fp16])
    window = np.abs(a.reshape(-1, 10).mean(axis=1) - b.reshape(-1, 10).mean(axis=1))
    eval32 = [r for r in map(json.loads, (tmp_path / "fp32/log.jsonl").read_text().splitlines()) if r["type"] == "eval"]
    eval16 = [r for r in map(json.loads, (tmp_path / "fp16/log.jsonl").read_text().splitlines()) if r["type"] == "eval"]
    print(f"fp16 vs fp32 over {STEPS} steps: steps 1-30 largest |gap| {np.abs(a - b)[:30].max():.4f} nats; "
          f"10-step means largest |gap| {window.max():.4f} (steps {10 * window.argmax() + 1}-); final eval loss "
          f"{eval32[-1]['eval_loss']:.4f} vs {eval16[-1]['eval_loss']:.4f}, accuracy {eval32[-1]['eval_accuracy']:.4f} "
          f"vs {eval16[-1]['eval_accuracy']:.4f}")
    assert not np.array_equal(a, b), "the fp16 run equals the fp32 run: nothing was rounded"
    assert all(r["loss_scale"] >= 1 for r in fp16)
    # The two runs are the same computation up to fp16 rounding, so they agree closely at first and
    # then drift apart step by step (each update differs a little) while learning the same task.
    # Measured (2026-11-25, 2-core CI-class machine): steps 1-30 within 0.011 nats of each other;
    # the 10-step mean losses at most 0.10 nats apart (steps 91-100: 0.26 vs 0.36, the fp16 run
    # learns the reversal a few steps later); final eval loss 0.0177 vs 0.0220, token accuracy
    # 99.82 % vs 99.73 %; one step skipped by the loss scaler (65536 -> 32768). Tolerances:
    assert np.abs(a - b)[:30].max() < 0.03
    assert window.max() < 0.15, window
    assert abs(eval32[-1]["eval_loss"] - eval16[-1]["eval_loss"]) < 0.015
    assert eval16[-1]["eval_accuracy"] > 0.99


def test_an_overflowing_loss_scale_backs_off_without_a_non_finite_weight(surogate_bin, tmp_path):
    config = quickstart(tmp_path)
    out = tmp_path / "overflow"
    result = run_surogate(surogate_bin, "sft", config, f"--output_dir={out}", f"--log_file={out}/log.jsonl",
                          "--max_steps=30", "--save_steps=1", "--save_total_limit=30", "--torch_dtype=float16",
                          "--fp16_loss_scale=1099511627776")
    assert result.returncode == 0, result.stderr + result.stdout
    steps = step_records(out / "log.jsonl")
    overflowed = [r for r in steps if r.get("loss_scale_overflow")]
    assert len(overflowed) >= 3, [r["loss_scale"] for r in steps]
    scales = [r["loss_scale"] for r in steps]
    for before, after, record in zip(scales, scales[1:], steps):
        assert after == (before / 2 if record.get("loss_scale_overflow") else before), scales
    assert "overflowed at loss scale 1099511627776" in result.stdout
    for checkpoint in sorted(out.glob("checkpoint-*")):
        for name, values in read_tensors(checkpoint / "model.safetensors").items():
            assert np.isfinite(values).all(), f"{checkpoint.name}/{name} holds a non-finite weight"
    for name, values in read_tensors(out / "model.safetensors").items():
        assert np.isfinite(values).all(), name
    trained = [r["loss"] for r in steps if not r.get("skipped")]
    assert trained[-1] < trained[0] - 0.3
