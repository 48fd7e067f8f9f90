#!/usr/bin/env python3
"""Writes tests/fixtures/vision/: small images of odd sizes in every format and mode src/vision/
decodes, two preprocessor configs (Qwen2.5-VL-like: patch 14, CLIP mean/std; Qwen3-VL-like:
patch 16, mean = std = 0.5) and expected.json, what transformers' slow image processor
(Qwen2VLImageProcessorPil) and Pillow make of each image: the decoded RGB, the resized uint8
image and pixel_values (shapes, SHA-256 of the raw little-endian bytes, a few values), the grid
and the <|image_pad|> count. tests/vision/ asserts the engine gives the same bytes.

Two RGB conversions are recorded, as transformers has two: `load_image` (chat rows' image paths
and data URIs: exif_transpose, then Pillow's convert("RGB"), alpha dropped) and the processor's
own convert_to_rgb on a PIL image (Parquet image structs via HF datasets: exif_transpose, then
transparency composited onto white).

Run from the repository root: python3 scripts/make_vision_fixtures.py (needs transformers, Pillow
and numpy). Deterministic: the images come from a fixed seed.
"""
import hashlib
import io
import json
import pathlib
import struct
import zlib

import numpy as np
import PIL.Image
import PIL.ImageOps
from transformers.image_utils import load_image
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil, smart_resize

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "vision"

CONFIGS = {
    "qwen2_5_vl": {
        "image_processor_type": "Qwen2VLImageProcessor",
        "do_resize": True, "resample": 3, "do_rescale": True, "rescale_factor": 0.00392156862745098,
        "do_normalize": True, "do_convert_rgb": True,
        "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711],
        # small max_pixels so that the larger images are scaled down and the fixture stays small
        "min_pixels": 3136, "max_pixels": 12544,
        "patch_size": 14, "temporal_patch_size": 2, "merge_size": 2,
    },
    "qwen3_vl": {
        "image_processor_type": "Qwen2VLImageProcessorFast",
        "do_resize": True, "resample": 3, "do_rescale": True, "rescale_factor": 0.00392156862745098,
        "do_normalize": True, "do_convert_rgb": True,
        "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
        "size": {"shortest_edge": 4096, "longest_edge": 16384},
        "patch_size": 16, "temporal_patch_size": 2, "merge_size": 2,
    },
}


def pattern(height, width, channels, seed, maximum=255):
    """A smooth gradient plus noise: edges and texture, so that resampling errors show."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    planes = []
    for c in range(channels):
        wave = np.sin(x / (3.0 + c) + y / (5.0 + 2 * c)) * 0.35 + (x + 2 * y) / (width + 2 * height) * 0.4
        planes.append(wave + rng.uniform(0, 0.25, size=(height, width)))
    data = np.stack(planes, axis=-1)
    data = (data - data.min()) / (data.max() - data.min())
    return np.round(data * maximum).astype(np.uint16 if maximum > 255 else np.uint8)


def png_bytes(width, height, color_type, bit_depth, rows, chunks=()):
    """A minimal PNG writer (Pillow cannot write 16-bit RGB or 2-bit grey): filter 0 rows."""
    def chunk(kind, payload):
        return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))
    header = struct.pack(">IIBBBBB", width, height, bit_depth, color_type, 0, 0, 0)
    raw = b"".join(b"\x00" + row for row in rows)
    body = chunk(b"IHDR", header) + b"".join(chunk(k, p) for k, p in chunks) + chunk(b"IDAT", zlib.compress(raw))
    return b"\x89PNG\r\n\x1a\n" + body + chunk(b"IEND", b"")


def exif_with_orientation(orientation):
    exif = PIL.Image.Exif()
    exif[0x0112] = orientation
    return exif.tobytes()


def make_images():
    images = {}
    images["rgb_small.png"] = PIL.Image.fromarray(pattern(23, 37, 3, 1))
    rgba = np.concatenate([pattern(45, 61, 3, 2), pattern(45, 61, 1, 3)], axis=-1)
    rgba[:8, :8, 3] = 0
    images["rgba.png"] = PIL.Image.fromarray(rgba, "RGBA")
    palette = PIL.Image.fromarray(pattern(33, 50, 3, 4)).quantize(colors=16)
    palette.info["transparency"] = bytes([0, 128] + [255] * 14)
    images["palette_trns.png"] = palette
    images["gray16.png"] = PIL.Image.fromarray(pattern(29, 40, 1, 5, maximum=700)[..., 0])
    images["photo.jpg"] = PIL.Image.fromarray(pattern(157, 211, 3, 6))
    images["gray.jpg"] = PIL.Image.fromarray(pattern(70, 45, 1, 7)[..., 0])
    images["rotated.jpg"] = PIL.Image.fromarray(pattern(40, 64, 3, 8))
    images["lossy.webp"] = PIL.Image.fromarray(pattern(67, 90, 3, 9))
    images["alpha.webp"] = PIL.Image.fromarray(np.concatenate([pattern(41, 30, 3, 10), pattern(41, 30, 1, 11)], -1), "RGBA")
    files = {}
    for name, image in images.items():
        buffer = io.BytesIO()
        if name == "rotated.jpg":
            image.save(buffer, "JPEG", quality=90, exif=exif_with_orientation(6))
        elif name.endswith(".jpg"):
            image.save(buffer, "JPEG", quality=90)
        elif name == "alpha.webp":
            image.save(buffer, "WEBP", lossless=True)
        elif name.endswith(".webp"):
            image.save(buffer, "WEBP", quality=80)
        else:
            image.save(buffer, "PNG", **({"transparency": image.info["transparency"]} if name == "palette_trns.png" else {}))
        files[name] = buffer.getvalue()
    rgb16 = pattern(31, 26, 3, 12, maximum=65535).astype(">u2")
    files["rgb16.png"] = png_bytes(26, 31, 2, 16, [row.tobytes() for row in rgb16])
    gray2 = pattern(19, 33, 1, 13, maximum=3)[..., 0].astype(np.uint8)
    packed = [np.packbits(np.unpackbits(row[:, None], axis=1)[:, 6:].reshape(-1)).tobytes() for row in gray2]
    files["gray2.png"] = png_bytes(33, 19, 0, 2, packed)
    la16 = pattern(27, 22, 2, 14, maximum=65535).astype(">u2")
    files["gray_alpha16.png"] = png_bytes(22, 27, 4, 16, [row.tobytes() for row in la16])
    rgb_trns = pattern(21, 24, 3, 15)
    key = rgb_trns[3, 5].tolist()
    files["rgb_trns.png"] = png_bytes(24, 21, 2, 8, [row.tobytes() for row in rgb_trns],
                                      [(b"tRNS", struct.pack(">HHH", *key))])
    return files


def digest(array):
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def rgb_of(path, alpha):
    """The RGB image transformers makes of the file, for each of its two conversions."""
    if alpha == "drop":
        return load_image(str(path))
    image = PIL.ImageOps.exif_transpose(PIL.Image.open(path))
    processor = Qwen2VLImageProcessorPil()
    return processor.convert_to_rgb(image)


def expected_for(path, config):
    processor = Qwen2VLImageProcessorPil(**{k: v for k, v in config.items() if k != "image_processor_type"})
    out = {}
    has_alpha = PIL.Image.open(path).mode in ("RGBA", "LA", "PA") or "transparency" in PIL.Image.open(path).info
    for alpha in ("drop", "composite_on_white") if has_alpha else ("drop",):
        rgb = rgb_of(path, alpha)
        rgb = np.asarray(rgb)  # HWC uint8
        height, width = rgb.shape[:2]
        size = config.get("size", {})
        resized_h, resized_w = smart_resize(height, width, config["patch_size"] * config["merge_size"],
                                            config.get("min_pixels", size.get("shortest_edge")),
                                            config.get("max_pixels", size.get("longest_edge")))
        resized = np.asarray(PIL.Image.fromarray(rgb).resize((resized_w, resized_h), PIL.Image.BICUBIC))
        # The processor, fed the PIL image of this conversion, does its own (no-op) convert_to_rgb.
        batch = processor(images=[PIL.Image.fromarray(rgb)], return_tensors="np")
        pixel_values = batch["pixel_values"].astype("<f4")
        grid = batch["image_grid_thw"][0].tolist()
        out[alpha] = {
            "decoded_shape": list(rgb.shape), "decoded_sha256": digest(rgb),
            "resized_shape": list(resized.shape), "resized_sha256": digest(resized),
            "pixel_values_shape": list(pixel_values.shape), "pixel_values_sha256": digest(pixel_values),
            "pixel_values_first": pixel_values[0, :8].tolist(), "pixel_values_last": pixel_values[-1, -8:].tolist(),
            "grid_thw": grid, "tokens": grid[1] * grid[2] // config["merge_size"] ** 2,
        }
    return out


def main():
    # expected.json records Pillow 13's resampling pass order, the engine's default.
    assert int(PIL.__version__.split(".")[0]) >= 13, f"Pillow >= 13 needed, found {PIL.__version__}"
    OUT.mkdir(parents=True, exist_ok=True)
    for name, data in make_images().items():
        (OUT / name).write_bytes(data)
    expected = {}
    for config_name, config in CONFIGS.items():
        folder = OUT / config_name
        folder.mkdir(exist_ok=True)
        (folder / "preprocessor_config.json").write_text(json.dumps(config, indent=2) + "\n")
        expected[config_name] = {p.name: expected_for(p, config) for p in sorted(OUT.iterdir()) if p.is_file()
                                 and p.suffix in (".png", ".jpg", ".webp")}
    (OUT / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
