"""bench/run_vl_job.sh end to end on the CPU (VL_TINY=1): `surogate sft` and transformers + PEFT
(bench/vision/hf_vl_peft_bench.py) on tiny random folders of both families (bench/vision/
make_vl_model.py's qwen2.5-vl-tiny and qwen3-vl-tiny: the real tokenizer, the VL chat template,
patch 4) and 4 synthetic image–caption rows (bench/vision/make_vl_data.py at a tenth of the size,
one scaled down under max_pixels 16384), 2 steps of one micro-batch on each side. The peer's 2
steps of 2 rows read every row once, so both sides' tokens per image row are means over the same
rows: they agree when both sides
formatted the same tokens (the chat template, one <|image_pad|> per merged patch under the same
max_pixels). Checks the records the GPU run reads and the ratio fields and table. Skipped without
torch, transformers, PEFT or Pillow."""
import json
import os
import subprocess

import pytest

from conftest import REPO_ROOT


def test_the_vl_bench_runs_both_sides_on_the_cpu(surogate_bin, tmp_path):
    for module in ("torch", "transformers", "peft", "PIL", "safetensors"):
        pytest.importorskip(module)
    env = dict(os.environ, VL_TINY="1", SUROGATE_BIN=str(surogate_bin), VL_ROWS="4", VL_STEPS="2",
               VL_WARMUP="1", VL_ACCUM="1", VL_PEER_MICRO="2", VL_PEER_ACCUM="1", VL_PEER_STEPS="1",
               OUT=str(tmp_path / "out"), VL_WORK=str(tmp_path / "work"), CUDA_VISIBLE_DEVICES="")
    result = subprocess.run(["bash", str(REPO_ROOT / "bench/run_vl_job.sh")], env=env, capture_output=True,
                            text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    ours = [json.loads(line) for line in (tmp_path / "out/vl.jsonl").read_text().splitlines()]
    peers = [json.loads(line) for line in (tmp_path / "out/peers.jsonl").read_text().splitlines()]
    assert [r["model"] for r in ours] == ["qwen2.5-vl-tiny", "qwen3-vl-tiny"]
    assert [r["model"] for r in peers] == ["qwen2.5-vl-tiny", "qwen3-vl-tiny"]
    for record, peer in zip(ours, peers):
        assert "error" not in record and "error" not in peer, (record, peer)
        assert record["engine"] == "surogate CLI" and peer["engine"] == "hf+peft"
        assert record["steps"] == 2 and len(record["losses"]) == 2 and record["train_documents"] == 4
        assert record["max_pixels"] == peer["max_pixels"] == 16384 and record["sequence_len"] == 512
        # images/s is tokens/s over the split's tokens per image row.
        assert record["images_per_s"] == pytest.approx(record["tokens_per_s"] / record["tokens_per_image_row"],
                                                       rel=1e-2)
        # The peer's images/s and tokens/s count the timed step's 2 images and their real tokens.
        assert peer["images_per_s"] == pytest.approx(2 / peer["step_s"], rel=1e-2)
        assert peer["timed_images"] == 2
        assert peer["tokens_per_s"] == pytest.approx(peer["timed_tokens"] / peer["step_s"], rel=1e-2)
        assert 0 < peer["padding_efficiency"] <= 1
        # Both sides read the same 4 rows: the same tokens per row (the means, rounded to 0.1).
        assert record["tokens_per_image_row"] == pytest.approx(peer["tokens_per_image_row"], abs=0.06)
        assert record["tokens_per_s_ratio"] == pytest.approx(record["tokens_per_s"] / peer["tokens_per_s"], rel=1e-3)
        assert record["images_per_s_ratio"] == pytest.approx(record["images_per_s"] / peer["images_per_s"], rel=1e-3)
    assert "| qwen2.5-vl-tiny |" in result.stdout and "| qwen3-vl-tiny |" in result.stdout
