"""src/vision/ against the live oracle: transformers' slow Qwen-VL image processor
(Qwen2VLImageProcessorPil) and Pillow, on images of random sizes, modes and formats made here,
for a Qwen2.5-VL-like and a Qwen3-VL-like preprocessor config. The decoded RGB, the resized uint8
image and pixel_values must be equal byte for byte, the grid and <|image_pad|> count equal.
tests/vision/vision_process_tool runs the engine's side; tests/vision/ checks the committed
fixtures (scripts/make_vision_fixtures.py) without Python."""
import io
import json
import subprocess

import numpy as np
import pytest

from conftest import REPO_ROOT, build_binary

PIL = pytest.importorskip("PIL")
# transformers 5's Pillow backend of the Qwen2-VL processor (4.x named it differently).
pil_qwen2_vl = pytest.importorskip("transformers.models.qwen2_vl.image_processing_pil_qwen2_vl")
import PIL.Image  # noqa: E402
import PIL.ImageOps  # noqa: E402
from transformers.image_utils import load_image  # noqa: E402

Qwen2VLImageProcessorPil = pil_qwen2_vl.Qwen2VLImageProcessorPil
smart_resize = pil_qwen2_vl.smart_resize

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "vision"
CONFIGS = ("qwen2_5_vl", "qwen3_vl")
# Pillow 13 changed the order of the two resampling passes (src/vision/bicubic_resize.h).
PILLOW_ORDER = "pillow13" if int(PIL.__version__.split(".")[0]) >= 13 else "pillow12"


def random_image(rng, index):
    """An image of random size and mode, with structure (gradients) and noise."""
    height, width = (int(v) for v in rng.integers(5, 260, size=2))
    y, x = np.mgrid[0:height, 0:width]
    base = np.sin(x / rng.uniform(2, 9) + y / rng.uniform(2, 9))[..., None] * 90 + 128
    data = np.clip(base + rng.normal(0, 40, size=(height, width, 4)), 0, 255).astype(np.uint8)
    mode = ["RGB", "RGBA", "L", "LA", "P"][index % 5]
    if mode == "P":
        return PIL.Image.fromarray(data[..., :3], "RGB").quantize(colors=int(rng.integers(2, 200)))
    channels = {"RGB": 3, "RGBA": 4, "L": 1, "LA": 2}[mode]
    return PIL.Image.fromarray(data[..., :channels].squeeze(-1) if channels == 1 else data[..., :channels], mode)


def encode(image, index, rng):
    """PNG, JPEG (random quality and subsampling) or WebP (lossy or lossless) bytes and suffix."""
    kind = index % 3
    buffer = io.BytesIO()
    if kind == 1 and image.mode in ("RGB", "L"):
        image.save(buffer, "JPEG", quality=int(rng.integers(40, 98)), subsampling=int(rng.integers(0, 3)))
        return buffer.getvalue(), ".jpg"
    if kind == 2 and image.mode in ("RGB", "RGBA"):
        image.save(buffer, "WEBP", lossless=bool(rng.integers(0, 2)), quality=int(rng.integers(40, 98)))
        return buffer.getvalue(), ".webp"
    image.save(buffer, "PNG")
    return buffer.getvalue(), ".png"


def hf_side(path, config_dir, alpha):
    """What transformers makes of the file: load_image's RGB (alpha dropped) for paths, the
    processor's convert_to_rgb (alpha over white) for PIL images a dataset hands over."""
    config = json.loads((config_dir / "preprocessor_config.json").read_text())
    config.pop("image_processor_type", None)
    processor = Qwen2VLImageProcessorPil(**config)
    if alpha == "drop":
        rgb = np.asarray(load_image(str(path)))
    else:
        rgb = processor.convert_to_rgb(PIL.ImageOps.exif_transpose(PIL.Image.open(path)))
    batch = processor(images=[PIL.Image.fromarray(rgb)], return_tensors="np")
    size = config.get("size", {})
    factor = config["patch_size"] * config["merge_size"]
    h, w = smart_resize(rgb.shape[0], rgb.shape[1], factor, config.get("min_pixels", size.get("shortest_edge")),
                        config.get("max_pixels", size.get("longest_edge")))
    resized = np.asarray(PIL.Image.fromarray(rgb).resize((w, h), PIL.Image.BICUBIC))
    return rgb, resized, batch["pixel_values"].astype("<f4"), batch["image_grid_thw"][0].tolist()


def engine_side(tool, path, config_dir, alpha, out):
    result = subprocess.run([str(tool), str(config_dir), str(path), alpha, PILLOW_ORDER, str(out)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    decoded = np.fromfile(f"{out}.decoded", np.uint8).reshape(*info["decoded"], 3)
    resized = np.fromfile(f"{out}.resized", np.uint8).reshape(*info["resized"], 3)
    pixels = np.fromfile(f"{out}.pixels", "<f4").reshape(-1, info["patch_dim"])
    return decoded, resized, pixels, info


def assert_same(tool, path, config_name, alpha, tmp_path):
    config_dir = FIXTURES / config_name
    rgb, resized, pixels, grid = hf_side(path, config_dir, alpha)
    e_rgb, e_resized, e_pixels, info = engine_side(tool, path, config_dir, alpha, tmp_path / "out")
    label = f"{path.name} {config_name} {alpha}"
    np.testing.assert_array_equal(e_rgb, rgb, err_msg=f"decoded RGB, {label}")
    np.testing.assert_array_equal(e_resized, resized, err_msg=f"resized uint8, {label}")
    assert e_pixels.shape == pixels.shape, label
    assert e_pixels.tobytes() == pixels.tobytes(), f"pixel_values differ bitwise, {label}"
    assert info["grid_thw"] == grid, label
    assert info["tokens"] == grid[1] * grid[2] // 4, label


@pytest.fixture(scope="module")
def tool():
    return build_binary("tests/vision/vision_process_tool")


@pytest.mark.parametrize("config_name", CONFIGS)
def test_random_images_equal_transformers_bit_for_bit(tool, tmp_path, config_name):
    rng = np.random.default_rng(41 if config_name == "qwen3_vl" else 7)
    for index in range(24):
        image = random_image(rng, index)
        data, suffix = encode(image, index, rng)
        path = tmp_path / f"img{index}{suffix}"
        path.write_bytes(data)
        has_alpha = image.mode in ("RGBA", "LA")
        for alpha in ("drop", "composite_on_white") if has_alpha else ("drop",):
            assert_same(tool, path, config_name, alpha, tmp_path)


@pytest.mark.parametrize("config_name", CONFIGS)
def test_fixture_images_equal_transformers_bit_for_bit(tool, tmp_path, config_name):
    for path in sorted(FIXTURES.glob("*.*")):
        if path.suffix not in (".png", ".jpg", ".webp"):
            continue
        for alpha in ("drop", "composite_on_white"):
            assert_same(tool, path, config_name, alpha, tmp_path)


def test_exif_orientations_match_load_image(tool, tmp_path):
    """JPEG's APP1, PNG's eXIf and WebP's EXIF chunk, each orientation 1..8."""
    rng = np.random.default_rng(3)
    image = PIL.Image.fromarray(rng.integers(0, 256, size=(37, 58, 3), dtype=np.uint8))
    for orientation in range(1, 9):
        exif = PIL.Image.Exif()
        exif[0x0112] = orientation
        path = tmp_path / f"o{orientation}.jpg"
        image.save(path, "JPEG", quality=95, exif=exif.tobytes())
        assert_same(tool, path, "qwen3_vl", "drop", tmp_path)
        png = tmp_path / f"o{orientation}.png"
        image.save(png, "PNG", exif=exif.tobytes())
        assert_same(tool, png, "qwen2_5_vl", "drop", tmp_path)
        webp = tmp_path / f"o{orientation}.webp"
        image.save(webp, "WEBP", lossless=True, exif=exif.tobytes())
        assert_same(tool, webp, "qwen3_vl", "drop", tmp_path)


def test_truncated_image_is_one_error_naming_the_file(tool, tmp_path):
    data = (FIXTURES / "photo.jpg").read_bytes()
    path = tmp_path / "cut.jpg"
    path.write_bytes(data[: len(data) // 3])
    result = subprocess.run([str(tool), str(FIXTURES / "qwen3_vl"), str(path), "drop", PILLOW_ORDER,
                             str(tmp_path / "o")], capture_output=True, text=True)
    assert result.returncode == 2
    assert f"image {path}: not a readable JPEG: the file ends early (truncated)" in result.stderr
    with pytest.raises(OSError):  # Pillow refuses it too
        PIL.Image.open(path).load()
