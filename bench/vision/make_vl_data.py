#!/usr/bin/env python3
"""A synthetic image–caption set for bench/run_vl_job.sh: ROWS chat rows in the HF processor's
content-part format (docs/vision.md, "Image rows"), one image each, paths relative to the file:

  {"messages": [{"role": "user", "content": [{"type": "image", "image": "images/00007.jpg"},
                                             {"type": "text", "text": "Describe the image."}]},
                {"role": "assistant", "content": "<a caption of 30-120 words>"}]}

  python3 bench/vision/make_vl_data.py OUTPUT_DIR ROWS [--scale S]

writes OUTPUT_DIR/rows.jsonl and OUTPUT_DIR/images/. Images of mixed sizes, from 224 × 224 to
1600 × 1200 (landscape, portrait, square), PNG and JPEG alternately: a smooth colour gradient with
a few filled shapes, so they compress as photos do. --scale multiplies every side (VL_TINY's
0.1 gives 22 × 22 to 160 × 120). Deterministic for a given ROWS and scale (seed 0).
"""
import argparse
import json
import pathlib
import random

SIZES = [(224, 224), (336, 336), (448, 448), (640, 480), (480, 640), (800, 600), (1024, 768), (768, 1024),
         (1280, 720), (720, 1280), (1024, 1024), (1600, 1200), (1200, 1600), (1600, 900)]
PROMPTS = ["Describe the image.", "What is in this picture?", "Write a caption for this image.",
           "Describe what you see in detail."]
WORDS = ("a the small large red blue green yellow dark bright square circle triangle shape stands next to above "
         "below near far corner edge of image picture soft gradient background colour light shadow bold thin "
         "line curve pattern shows with and in on under over left right top bottom middle field sky water stone "
         "wooden metal glass street house tree window door person cat dog bird car road hill river cloud").split()


def image(size, rng):
    import numpy as np
    from PIL import Image, ImageDraw
    width, height = size
    x = np.linspace(0.0, 1.0, width, dtype=np.float32)[None, :, None]
    y = np.linspace(0.0, 1.0, height, dtype=np.float32)[:, None, None]
    start, dx, dy = (np.array([rng.random() for _ in range(3)], dtype=np.float32) for _ in range(3))
    pixels = np.clip((start + (dx - 0.5) * x + (dy - 0.5) * y) * 255.0, 0, 255).astype(np.uint8)
    picture = Image.fromarray(pixels, "RGB")
    draw = ImageDraw.Draw(picture)
    for _ in range(rng.randint(2, 6)):
        x0, y0 = rng.randrange(width), rng.randrange(height)
        box = [x0, y0, min(width, x0 + rng.randint(4, max(5, width // 2))),
               min(height, y0 + rng.randint(4, max(5, height // 2)))]
        colour = tuple(rng.randrange(256) for _ in range(3))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)(box, fill=colour)
    return picture


def caption(rng):
    words = [rng.choice(WORDS) for _ in range(rng.randint(30, 120))]
    return " ".join(words).capitalize() + "."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output_dir", type=pathlib.Path)
    parser.add_argument("rows", type=int)
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    rng = random.Random(0)
    images = args.output_dir / "images"
    images.mkdir(parents=True, exist_ok=True)
    lines = []
    for row in range(args.rows):
        width, height = rng.choice(SIZES)
        size = (max(8, round(width * args.scale)), max(8, round(height * args.scale)))
        name = f"images/{row:05d}." + ("png" if row % 2 == 0 else "jpg")
        picture = image(size, rng)
        if name.endswith("png"):
            picture.save(args.output_dir / name, compress_level=1)
        else:
            picture.save(args.output_dir / name, quality=90)
        lines.append(json.dumps({"messages": [
            {"role": "user", "content": [{"type": "image", "image": name},
                                         {"type": "text", "text": rng.choice(PROMPTS)}]},
            {"role": "assistant", "content": caption(rng)}]}))
    (args.output_dir / "rows.jsonl").write_text("\n".join(lines) + "\n")
    print(f"{args.rows} rows -> {args.output_dir / 'rows.jsonl'}")


if __name__ == "__main__":
    main()
