"""models/vision_tower.h against the live oracle: transformers' Qwen2_5_VisionTransformerPretrainedModel
with random tiny configs (depth, heads, head_dim, window size, full-attention blocks) on random
image grids (one to three images, some with two frames), random weights and pixel values. The
engine's side runs in tests/models/vision_tower_tool (CPU backend, fp32): the merged features
must equal transformers' to 1e-5 and the gradients of every weight for the loss
sum(features · random projection) to 1e-4 (max |ours − hf| / max |hf| over each tensor, the
tolerances of tests/models/test_vision_tower.cpp, which checks the committed fixture without
Python)."""
import json
import subprocess

import numpy as np
import pytest

from conftest import build_binary, load_script

torch = pytest.importorskip("torch")
pytest.importorskip("transformers.models.qwen2_5_vl.modeling_qwen2_5_vl")
safetensors_torch = pytest.importorskip("safetensors.torch")
from transformers import Qwen2_5_VLConfig  # noqa: E402

fixtures = load_script("make_vision_tower_fixtures")

FEATURE_TOLERANCE = 1e-5
GRADIENT_TOLERANCE = 1e-4


def scaled_error(ours, hf):
    hf = hf.reshape(-1).astype(np.float64)
    return float(np.max(np.abs(ours.astype(np.float64) - hf)) / max(np.max(np.abs(hf)), 1e-30))


def random_case(rng):
    heads = int(rng.choice([1, 2, 3]))
    head_dim = int(rng.choice([4, 8, 12]))
    depth = int(rng.integers(1, 5))
    patch = int(rng.choice([2, 4]))
    merge = 2
    vision = dict(depth=depth, hidden_size=heads * head_dim, intermediate_size=int(rng.integers(4, 40)),
                  num_heads=heads, out_hidden_size=int(rng.integers(4, 30)), patch_size=patch,
                  window_size=patch * merge * int(rng.integers(1, 4)), spatial_merge_size=merge,
                  temporal_patch_size=int(rng.choice([1, 2])),
                  fullatt_block_indexes=sorted(int(i) for i in rng.choice(depth, size=int(rng.integers(0, depth + 1)),
                                                                          replace=False)))
    grids = [[int(rng.choice([1, 1, 2])), merge * int(rng.integers(1, 7)), merge * int(rng.integers(1, 7))]
             for _ in range(int(rng.integers(1, 4)))]
    return vision, grids


@pytest.mark.parametrize("seed", range(6))
def test_vision_tower_matches_transformers(tmp_path, seed):
    rng = np.random.default_rng(seed)
    vision, grids = random_case(rng)
    config = Qwen2_5_VLConfig(vision_config=vision, text_config=fixtures.TEXT)
    model = fixtures.random_tower(config.vision_config, seed)
    (tmp_path / "config.json").write_text(json.dumps(config.to_dict()))
    # transformers 5 saves the tower as model.visual.*, the hub's checkpoints as visual.*: both load.
    prefix = "model.visual." if seed % 2 else "visual."
    safetensors_torch.save_file({prefix + name: t.detach().contiguous() for name, t in model.state_dict().items()},
                                str(tmp_path / "model.safetensors"))
    names = [name for name, _ in model.named_parameters()]
    expected = fixtures.run_tower(model, grids, seed + 100, names)
    safetensors_torch.save_file({key: expected[key].contiguous() for key in ("pixel_values", "grid_thw", "projection")},
                                str(tmp_path / "inputs.safetensors"))
    out = tmp_path / "out"
    out.mkdir()
    result = subprocess.run([str(build_binary("tests/models/vision_tower_tool")), str(tmp_path),
                             str(tmp_path / "inputs.safetensors"), str(out)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    case = f"vision {vision}, grids {grids}"
    features = np.fromfile(out / "features.f32", dtype=np.float32)
    assert scaled_error(features, expected["features"].numpy()) < FEATURE_TOLERANCE, case
    for name in names:
        ours = np.fromfile(out / f"grad.visual.{name}.f32", dtype=np.float32)
        assert scaled_error(ours, expected["grad.visual." + name].numpy()) < GRADIENT_TOLERANCE, f"{name}: {case}"


def test_vision_tower_tool_names_missing_weights(tmp_path):
    config = Qwen2_5_VLConfig(vision_config=fixtures.VISION, text_config=fixtures.TEXT)
    (tmp_path / "config.json").write_text(json.dumps(config.to_dict()))
    safetensors_torch.save_file({"visual.patch_embed.proj.weight": torch.zeros(16, 96)}, str(tmp_path / "model.safetensors"))
    safetensors_torch.save_file({"pixel_values": torch.zeros(16, 96), "grid_thw": torch.tensor([[1, 4, 4]], dtype=torch.int32),
                                 "projection": torch.zeros(4, 24)}, str(tmp_path / "inputs.safetensors"))
    result = subprocess.run([str(build_binary("tests/models/vision_tower_tool")), str(tmp_path),
                             str(tmp_path / "inputs.safetensors"), str(tmp_path)], capture_output=True, text=True)
    assert result.returncode == 1
    assert "visual.blocks.0.norm1.weight" in result.stderr
