"""Surogate's safetensors files against the Python `safetensors` package, both directions:
files written by our writer (tests/io/safetensors_tool) load with safetensors.numpy with equal
values, and files written by safetensors.numpy read back equal in C++ (single and sharded)."""
import json
import os
import pathlib
import struct
import subprocess

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from conftest import REPO_ROOT


@pytest.fixture(scope="session")
def tool():
    build = pathlib.Path(os.environ.get("SUROGATE_BIN", REPO_ROOT / "build" / "surogate")).parent
    path = build / "tests" / "io" / "safetensors_tool"
    if not path.exists():
        pytest.fail(f"{path} not found: build the safetensors_tool target first")
    return path


def run_tool(tool, *args):
    result = subprocess.run([str(tool), *map(str, args)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


EXPECTED_F32 = np.arange(24, dtype=np.float32) * 0.5 - 3.0


def read_bf16_raw(path, name):
    """numpy has no bfloat16: decode it from the file bytes (header parsed by hand)."""
    data = pathlib.Path(path).read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    entry = json.loads(data[8:8 + length])[name]
    begin, end = entry["data_offsets"]
    raw = np.frombuffer(data[8 + length + begin:8 + length + end], dtype=np.uint16)
    return (raw.astype(np.uint32) << 16).view(np.float32).reshape(entry["shape"])


def test_our_single_file_loads_in_python(tool, tmp_path):
    files = run_tool(tool, "write-sample", tmp_path, 10**9).split()
    assert [pathlib.Path(f).name for f in files] == ["model.safetensors"]
    path = tmp_path / "model.safetensors"
    header_length = struct.unpack("<Q", path.read_bytes()[:8])[0]
    assert header_length % 8 == 0
    tensors = {}
    from safetensors import safe_open
    with safe_open(str(path), framework="numpy") as handle:
        assert handle.metadata() == {"format": "pt"}
        for name in handle.keys():
            if name != "brain":
                tensors[name] = handle.get_tensor(name)
    np.testing.assert_array_equal(tensors["model.layers.0.weight"], EXPECTED_F32.reshape(4, 6))
    np.testing.assert_array_equal(tensors["half"], EXPECTED_F32.astype(np.float16).reshape(2, 3, 4))
    np.testing.assert_array_equal(read_bf16_raw(path, "brain"), EXPECTED_F32)  # exactly representable
    np.testing.assert_array_equal(tensors["wide"], np.array([1e-300, -2.5, 3.14159265358979]))
    np.testing.assert_array_equal(tensors["long"], np.array([-(1 << 40), 0, 7], dtype=np.int64))
    np.testing.assert_array_equal(tensors["int"], np.array([[-5], [6]], dtype=np.int32))
    np.testing.assert_array_equal(tensors["bytes"], np.array([0, 255, 17], dtype=np.uint8))
    np.testing.assert_array_equal(tensors["mask"], np.array([[True, False], [True, True]]))


def test_our_sharded_checkpoint_matches_its_index(tool, tmp_path):
    files = [pathlib.Path(f) for f in run_tool(tool, "write-sample", tmp_path, 100).split()]
    assert len(files) > 1
    assert files[0].name == f"model-00001-of-{len(files):05d}.safetensors"
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    seen = {}
    for shard in files:
        from safetensors import safe_open
        with safe_open(str(shard), framework="numpy") as handle:
            for name in handle.keys():
                seen[name] = shard.name
    assert index["weight_map"] == seen
    sizes = {"model.layers.0.weight": 96, "half": 48, "brain": 48, "wide": 24, "long": 24, "int": 8,
             "bytes": 3, "mask": 4}
    assert index["metadata"]["total_size"] == sum(sizes.values())
    dumped = json.loads(run_tool(tool, "dump", tmp_path))
    assert dumped["model.layers.0.weight"]["values"] == EXPECTED_F32.tolist()


def test_python_written_file_reads_equal_in_cpp(tool, tmp_path):
    rng = np.random.default_rng(0)
    tensors = {
        "f32": rng.standard_normal((3, 5)).astype(np.float32),
        "f16": rng.standard_normal((7,)).astype(np.float16),
        "f64": rng.standard_normal((2, 2)),
        "i64": rng.integers(-10**12, 10**12, size=(4,), dtype=np.int64),
        "i16": rng.integers(-1000, 1000, size=(2, 3), dtype=np.int16),
        "i8": rng.integers(-100, 100, size=(5,), dtype=np.int8),
        "u8": rng.integers(0, 255, size=(6,), dtype=np.uint8),
        "flags": np.array([True, False, True]),
        "scalar": np.array(2.5, dtype=np.float32),
        "empty": np.zeros((0, 3), dtype=np.float32),
    }
    save_file(tensors, str(tmp_path / "model.safetensors"), metadata={"format": "np"})
    dumped = json.loads(run_tool(tool, "dump", tmp_path / "model.safetensors"))
    assert set(dumped) == set(tensors)
    for name, array in tensors.items():
        assert dumped[name]["shape"] == list(array.shape), name
        values = np.array(dumped[name]["values"], dtype=np.float64).reshape(array.shape)
        np.testing.assert_array_equal(values, array.astype(np.float64), err_msg=name)


def test_python_written_shards_with_index_read_in_cpp(tool, tmp_path):
    first = {"a": np.full((4,), 1.5, dtype=np.float32)}
    second = {"b": np.arange(6, dtype=np.int32).reshape(2, 3)}
    save_file(first, str(tmp_path / "model-00001-of-00002.safetensors"))
    save_file(second, str(tmp_path / "model-00002-of-00002.safetensors"))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({
        "metadata": {"total_size": 40},
        "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}))
    dumped = json.loads(run_tool(tool, "dump", tmp_path))
    assert dumped["a"]["values"] == [1.5] * 4
    assert dumped["b"] == {"dtype": "I32", "shape": [2, 3], "values": list(range(6))}


def test_damaged_file_is_a_clear_error(tool, tmp_path):
    save_file({"a": np.ones((64,), dtype=np.float32)}, str(tmp_path / "model.safetensors"))
    data = (tmp_path / "model.safetensors").read_bytes()
    (tmp_path / "model.safetensors").write_bytes(data[:-10])
    result = subprocess.run([str(tool), "dump", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "model.safetensors" in result.stderr and "tensor 'a'" in result.stderr


CONFIGS = REPO_ROOT / "tests" / "io" / "data" / "configs"


@pytest.mark.parametrize("sample", sorted(p.name for p in CONFIGS.glob("*.json")))
def test_saved_config_loads_in_transformers(tool, tmp_path, sample):
    """The config.json half of a model folder Surogate writes: transformers reads the same model."""
    from transformers import AutoConfig
    source = tmp_path / "in"
    source.mkdir()
    (source / "config.json").write_text((CONFIGS / sample).read_text())
    run_tool(tool, "resave-config", source, tmp_path / "out")
    original = AutoConfig.from_pretrained(source)
    saved = AutoConfig.from_pretrained(tmp_path / "out")
    assert type(saved) is type(original)
    for key in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "rms_norm_eps", "tie_word_embeddings", "max_position_embeddings",
                "sliding_window", "bos_token_id", "eos_token_id"):
        assert getattr(saved, key, None) == getattr(original, key, None), key
    assert saved.head_dim == getattr(original, "head_dim", original.hidden_size // original.num_attention_heads)
    original_rope = dict(original.rope_parameters or {})
    saved_rope = dict(saved.rope_parameters or {})
    for key in ("rope_type", "rope_theta", "factor", "original_max_position_embeddings", "low_freq_factor",
                "high_freq_factor"):
        if key in original_rope:
            assert saved_rope.get(key) == pytest.approx(original_rope[key]), key
