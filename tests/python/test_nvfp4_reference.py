"""The NVFP4 oracle (nvfp4_reference.py) and the fixture the C++ quantizer is checked against.

* tests/fixtures/nvfp4/nvfp4_reference.safetensors is exactly what scripts/make_nvfp4_fixtures.py
  writes from the oracle now (so tests/quant/test_nvfp4.cpp compares against the oracle, not a
  stale copy).
* The oracle itself on hand-worked cases: E2M1 ties to even, saturation, signed zero, NaN; NVIDIA's
  two-level scale (amax on 6 · 448); Four Over Six choosing 4 where the block's values sit at 0.85
  of its largest and keeping 6 on a tie.
"""
import importlib.util
import pathlib

import numpy as np
from safetensors.numpy import load_file

import nvfp4_reference as ref

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_the_committed_fixture_is_what_the_oracle_writes():
    spec = importlib.util.spec_from_file_location("make_nvfp4_fixtures", REPO / "scripts" / "make_nvfp4_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    expected = module.tensors()
    committed = load_file(str(REPO / "tests" / "fixtures" / "nvfp4" / "nvfp4_reference.safetensors"))
    assert committed.keys() == expected.keys()
    for name, value in expected.items():
        assert committed[name].dtype == value.dtype and committed[name].shape == value.shape, name
        assert committed[name].tobytes() == value.tobytes(), name


def test_e2m1_rounds_to_nearest_even_and_saturates():
    x = np.array([0.25, 0.26, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 5.01, 7.0, np.inf, -0.1, -0.0, np.nan], np.float32)
    #             0     0.5   1.0   1.0   2.0   2.0  4.0  4.0  6.0   6.0  6.0     -0    -0    +6
    assert ref.e2m1_codes(x).tolist() == [0, 1, 2, 2, 4, 4, 6, 6, 7, 7, 7, 8, 8, 7]


def test_two_level_scale_and_four_over_six():
    weight = np.zeros((1, 32), np.float32)
    weight[0, 0] = 1.0
    weight[0, 1:16] = 0.85
    weight[0, 16:] = 0.5
    packed, scales, decode, values = ref.quantize(weight, four_over_six=False)
    assert decode == np.float32(1) / np.float32(6 * 448)
    assert ref.e4m3_value(scales[0, 0]) == 448  # the tensor's largest block on the largest scale
    assert values[0, 1] == 1.0                   # 0.85 · 6 = 5.1 -> 6
    packed, scales, decode, values = ref.quantize(weight, four_over_six=True)
    assert decode == np.float32(1) / np.float32(6 * 256)
    assert ref.e4m3_value(scales[0, 0]) == 384   # scaled to 4: 256 · 1.5
    assert values[0, 1] == 0.75                  # 0.85 · 4 = 3.4 -> 3
    assert ref.e4m3_value(scales[0, 1]) == 128 and values[0, 16] == 0.5  # exact either way: 6 kept
