"""models/vision_model.h against the live oracle: transformers' Qwen2_5_VLForConditionalGeneration
with random tiny configs (tower depth / heads / window / full-attention blocks, 1–2 text layers,
query / KV heads, head_dim and its M-RoPE sections) on random batches (one or two rows, zero to
two images of random grids per row, labels on each row's tail), random weights and pixel values.
The engine's side runs in tests/models/vision_model_tool (CPU backend, fp32): its M-RoPE
positions equal get_rope_index exactly, the loss equals transformers' to rel 1e-5 and every
weight's gradient (text and tower) to 1e-4 (max |ours − hf| / max |hf|), the tolerances of
tests/models/test_vision_model.cpp, which checks the committed fixture without Python. The
checkpoint is written under transformers 5's names (model.language_model.*, model.visual.*) or
the hub's (model.*, visual.*)."""
import json
import subprocess

import numpy as np
import pytest

from conftest import REPO_ROOT, build_binary, load_script
from test_vision_tower import scaled_error  # max |ours - hf| / max |hf|

torch = pytest.importorskip("torch")
pytest.importorskip("transformers.models.qwen2_5_vl.modeling_qwen2_5_vl")
safetensors_torch = pytest.importorskip("safetensors.torch")

fixtures = load_script("make_vision_model_fixtures")

LOSS_TOLERANCE = 1e-5
GRADIENT_TOLERANCE = 1e-4


def random_case(rng):
    heads, head_dim = int(rng.choice([1, 2])), int(rng.choice([4, 8]))
    depth = int(rng.integers(1, 3))
    patch, merge = int(rng.choice([2, 4])), 2
    text_heads = int(rng.choice([2, 4]))
    text_head_dim = int(rng.choice([8, 12, 16]))
    half = text_head_dim // 2
    t = int(rng.integers(0, half + 1))
    h = int(rng.integers(0, half - t + 1))
    hidden = text_heads * text_head_dim
    vision = dict(depth=depth, hidden_size=heads * head_dim, intermediate_size=int(rng.integers(4, 24)),
                  num_heads=heads, out_hidden_size=hidden, patch_size=patch,
                  window_size=patch * merge * int(rng.integers(1, 3)), spatial_merge_size=merge,
                  temporal_patch_size=int(rng.choice([1, 2])),
                  fullatt_block_indexes=[int(i) for i in range(depth) if rng.random() < 0.5])
    text = dict(fixtures.TEXT, hidden_size=hidden, head_dim=text_head_dim, num_attention_heads=text_heads,
                num_key_value_heads=int(rng.choice([1, text_heads])), intermediate_size=int(rng.integers(8, 40)),
                num_hidden_layers=int(rng.integers(1, 3)),
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [t, h, half - t - h]})
    rows, grids = [], []
    for _ in range(int(rng.integers(1, 3))):
        images = []
        for _ in range(int(rng.integers(0, 3))):
            images.append(len(grids))
            grids.append([1, merge * int(rng.integers(1, 4)), merge * int(rng.integers(1, 4))])
        rows.append(images)
    if not grids:  # the tower needs one image at least
        rows[0].append(0)
        grids.append([1, merge, 2 * merge])
    return vision, text, grids, rows


@pytest.mark.parametrize("seed", range(6))
def test_vision_model_matches_transformers(tmp_path, seed):
    rng = np.random.default_rng(seed)
    vision, text, grids, rows = random_case(rng)
    model = fixtures.random_model(fixtures.make_config(vision, text), seed)
    (tmp_path / "config.json").write_text(json.dumps(model.config.to_dict()))
    def saved(name):  # the hub's names for odd seeds; the tool's text gradients carry them
        return name.replace("model.language_model.", "model.").replace("model.visual.", "visual.") if seed % 2 else name
    state = {saved(name): t.detach().contiguous() for name, t in model.state_dict().items()}
    safetensors_torch.save_file(state, str(tmp_path / "model.safetensors"))
    names = [name for name, _ in model.named_parameters()]
    length = 12 + max(sum(grids[i][1] * grids[i][2] // 4 + 5 for i in images) for images in rows)
    expected = fixtures.run_model(model, grids, rows, length, seed + 100, names)
    safetensors_torch.save_file({key: expected[key].contiguous()
                                 for key in ("input_ids", "labels", "pixel_values", "grid_thw")},
                                str(tmp_path / "inputs.safetensors"))
    out = tmp_path / "out"
    out.mkdir()
    result = subprocess.run([str(build_binary("tests/models/vision_model_tool")), str(tmp_path),
                             str(tmp_path / "inputs.safetensors"), str(out)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    case = f"vision {vision}, text {text}, grids {grids}, rows {rows}"
    positions = np.fromfile(out / "position_ids.i32", dtype=np.int32)
    assert np.array_equal(positions, expected["position_ids"].numpy().reshape(-1)), case
    loss = float(np.fromfile(out / "loss.f32", dtype=np.float32)[0])
    hf_loss = float(expected["loss"][0])
    assert abs(loss - hf_loss) / abs(hf_loss) < LOSS_TOLERANCE, f"{loss} vs {hf_loss}: {case}"
    for name in names:
        if name == "model.language_model.embed_tokens.weight" and model.config.tie_word_embeddings:
            continue
        tool_name = name if name.startswith("model.visual.") else saved(name)
        ours = np.fromfile(out / f"grad.{tool_name}.f32", dtype=np.float32)
        assert scaled_error(ours, expected["grad." + name].numpy()) < GRADIENT_TOLERANCE, f"{name}: {case}"


def test_vision_model_tool_names_missing_text_weights(tmp_path):
    fixture = REPO_ROOT / "tests" / "fixtures" / "vision" / "vl"
    (tmp_path / "config.json").write_text((fixture / "config.json").read_text())
    state = safetensors_torch.load_file(str(fixture / "model.safetensors"))
    del state["model.language_model.layers.1.mlp.up_proj.weight"]
    safetensors_torch.save_file(state, str(tmp_path / "model.safetensors"))
    result = subprocess.run([str(build_binary("tests/models/vision_model_tool")), str(tmp_path),
                             str(fixture / "expected.safetensors"), str(tmp_path)], capture_output=True, text=True)
    assert result.returncode == 1
    assert "layers.1.mlp.up_proj.weight" in result.stderr
