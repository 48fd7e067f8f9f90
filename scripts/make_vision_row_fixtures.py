#!/usr/bin/env python3
"""Writes tests/fixtures/vision/rows/: conversation rows with images (HF processor content parts,
ms-swift <image> placeholders with an images column, a multi-turn row, a text-only row), the
Qwen2-VL chat template, and expected.json with what transformers makes of each row:
Qwen2VLProcessor's rendered text, input_ids (<|image_pad|> expanded), image_grid_thw, and
Qwen2VLModel.get_rope_index's M-RoPE position ids and deltas; and mrope.json, the multimodal
rotary embedding applied by transformers at one row's positions (forward and gradient); and
vision_rope.json, the vision tower's patch positions, attention segments and rotary tables. tests/data/test_image_rows.cpp
asserts the engine (data/image_rows.h) gives the same.

The tokenizer is the Qwen3 one of tests/fixtures/tokenizers/qwen3 (its vocabulary and special
tokens, <|vision_start|> 151652 .. <|image_pad|> 151655, are Qwen2-VL's); the image processor
is the Qwen2.5-VL-like config of tests/fixtures/vision/qwen2_5_vl (small max_pixels, so images
are scaled both up and down); the images are the fixtures of tests/fixtures/vision/.

Run from the repository root: python3 scripts/make_vision_row_fixtures.py (transformers 5,
torch, Pillow, numpy). No network.
"""
import json
import pathlib
import tarfile
import tempfile

import numpy as np
import torch
from transformers import AutoTokenizer, Qwen2VLConfig
from transformers.image_utils import load_image
from transformers.vision_utils import get_vision_cu_seqlens, get_vision_position_ids
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLModel, apply_rotary_pos_emb
from transformers.models.qwen2_vl.processing_qwen2_vl import Qwen2VLProcessor

ROOT = pathlib.Path(__file__).resolve().parent.parent
VISION = ROOT / "tests" / "fixtures" / "vision"
OUT = VISION / "rows"

# Qwen2-VL-7B-Instruct's chat_template.json (also Qwen2.5-VL's).
TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}Picture {{ image_count.value }}: "
    "{% endif %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

ROWS = [
    {"messages": [
        {"role": "user", "content": [{"type": "image", "image": "../photo.jpg"},
                                     {"type": "text", "text": "Describe this image."}]},
        {"role": "assistant", "content": "A smooth gradient with noise."}]},
    {"messages": [
        {"role": "user", "content": "<image>What differs between this and <image>?"},
        {"role": "assistant", "content": "The second one is grey."}],
     "images": ["../rgb_small.png", "../gray.jpg"]},
    {"messages": [
        {"role": "system", "content": "You look at pictures."},
        {"role": "user", "content": [{"type": "text", "text": "First: "}, {"type": "image"}]},
        {"role": "assistant", "content": "A picture with transparency."},
        {"role": "user", "content": "And now?"},
        {"role": "assistant", "content": [{"type": "text", "text": "Look: "}, {"type": "image", "image": "../rotated.jpg"}]}],
     "images": ["../rgba.png"]},
    {"messages": [
        {"role": "user", "content": "No image here."},
        {"role": "assistant", "content": "Then only text."}]},
]


class ImageOnlyProcessor(Qwen2VLProcessor):
    """Qwen2VLProcessor without a video processor (whose module needs torchvision): only the
    class check of the absent video processor is skipped; images take the processor's own path."""

    def check_argument_for_proper_class(self, argument_name, argument):
        if argument is None and argument_name == "video_processor":
            return None
        return super().check_argument_for_proper_class(argument_name, argument)


def hf_messages(row):
    """The row in the HF processor's form and its image paths, in order (what the engine reads)."""
    column = list(row.get("images", []))
    paths, messages = [], []
    for message in row["messages"]:
        content = message["content"]
        if isinstance(content, str) and "<image>" in content:
            pieces = content.split("<image>")
            parts = []
            for index, piece in enumerate(pieces):
                if piece:
                    parts.append({"type": "text", "text": piece})
                if index + 1 < len(pieces):
                    parts.append({"type": "image"})
                    paths.append(column.pop(0))
            content = parts
        elif isinstance(content, list):
            parts = []
            for part in content:
                if part["type"] == "image":
                    paths.append(part["image"] if "image" in part else column.pop(0))
                    parts.append({"type": "image"})
                else:
                    parts.append(part)
            content = parts
        messages.append({"role": message["role"], "content": content})
    assert not column
    return messages, paths


def write_mrope_fixture(model, position_ids):
    """mrope.json: M-RoPE applied by transformers (Qwen2VLRotaryEmbedding of the tiny text model,
    head_dim 16, mrope_section [2, 3, 3], theta 10000, then apply_rotary_pos_emb) to a random q
    [tokens, heads, head_dim] at the positions of rows.jsonl's row 2, and the gradient of
    sum(out * upstream) with respect to q (autograd), all float32."""
    generator = torch.Generator().manual_seed(1)
    positions = torch.tensor(position_ids)[:, None, :]  # [3, batch 1, tokens]
    tokens, heads, head_dim = positions.shape[-1], 2, 16
    q = torch.randn(1, heads, tokens, head_dim, generator=generator, requires_grad=True)
    upstream = torch.randn(1, heads, tokens, head_dim, generator=generator)
    cos, sin = model.language_model.rotary_emb(q, positions)
    out, _ = apply_rotary_pos_emb(q, q, cos, sin)
    (out * upstream).sum().backward()
    as_tokens = lambda t: t[0].transpose(0, 1).reshape(-1).tolist()  # [tokens, heads, head_dim]
    fixture = {"heads": heads, "head_dim": head_dim, "theta": 10000.0, "mrope_section": [2, 3, 3],
               "position_ids": position_ids, "q": as_tokens(q.detach()), "upstream": as_tokens(upstream),
               "out": as_tokens(out.detach()), "d_q": as_tokens(q.grad)}
    (OUT / "mrope.json").write_text(json.dumps(fixture) + "\n")


def write_vision_rope_fixture(model):
    """vision_rope.json: the vision tower's patch positions and attention segments
    (get_vision_position_ids, get_vision_cu_seqlens) for image grids of the rows and a
    two-frame grid, and its rotary tables (Qwen2VLVisionRotaryEmbedding of the tiny model,
    head_dim 16: cos / sin [patches, 16], whose first half is the table the engine keeps)."""
    grids = [[1, 6, 8], [1, 4, 6], [2, 4, 4]]
    grid_thw = torch.tensor(grids)
    positions = get_vision_position_ids(grid_thw, 2)
    cu_seqlens = get_vision_cu_seqlens(grid_thw)
    visual = model.visual
    cos, sin = visual.rotary_pos_emb(torch.zeros(1), positions)
    half = cos.shape[-1] // 2
    fixture = {"grid_thw": grids, "merge_size": 2, "head_dim": cos.shape[-1],
               "theta": visual.config.rope_parameters["rope_theta"],
               "position_ids": positions.tolist(), "cu_seqlens": cu_seqlens.tolist(),
               "cos": cos[:, :half].reshape(-1).tolist(), "sin": sin[:, :half].reshape(-1).tolist()}
    (OUT / "vision_rope.json").write_text(json.dumps(fixture) + "\n")


def make_processor(preprocessor_dir):
    """Qwen2VLProcessor (no video processor) of the Qwen3 tokenizer fixture, the Qwen2-VL
    template and the preprocessor_config.json of `preprocessor_dir`."""
    config = json.loads((pathlib.Path(preprocessor_dir) / "preprocessor_config.json").read_text())
    config.pop("image_processor_type")
    image_processor = Qwen2VLImageProcessorPil(**config)
    with tempfile.TemporaryDirectory() as folder:
        with tarfile.open(ROOT / "tests" / "fixtures" / "tokenizers" / "qwen3" / "tokenizer.tar.xz") as archive:
            archive.extractall(folder, filter="data")
        tokenizer = AutoTokenizer.from_pretrained(folder)
    return ImageOnlyProcessor(image_processor=image_processor, tokenizer=tokenizer, chat_template=TEMPLATE)


def make_model():
    """A tiny Qwen2VLModel: get_rope_index and the rotary embeddings read only its config."""
    model_config = Qwen2VLConfig(
        text_config={"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
                     "intermediate_size": 64, "vocab_size": 151936,
                     "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]}},
        vision_config={"depth": 1, "embed_dim": 32, "hidden_size": 32, "num_heads": 2, "patch_size": 14,
                       "spatial_merge_size": 2, "temporal_patch_size": 2})
    return Qwen2VLModel(model_config).eval()


def transformers_row(processor, model, row, base_dir):
    """What transformers makes of one row: the rendered text, input_ids, image_grid_thw and the
    M-RoPE position ids [3][tokens] (1-D positions for a text-only row) with their delta."""
    messages, paths = hf_messages(row)
    text = processor.apply_chat_template(messages, tokenize=False)
    images = [load_image(str((pathlib.Path(base_dir) / path).resolve())) for path in paths]
    batch = processor(text=[text], images=images or None, return_tensors="pt")
    entry = {"text": text, "input_ids": batch["input_ids"][0].tolist(),
             "image_grid_thw": batch["image_grid_thw"].tolist() if images else []}
    if images:
        positions, deltas = model.get_rope_index(batch["input_ids"], batch["mm_token_type_ids"],
                                                 image_grid_thw=batch["image_grid_thw"])
        entry["position_ids"] = positions[:, 0].tolist()
        entry["delta"] = int(deltas[0, 0])
    else:
        length = batch["input_ids"].shape[1]
        entry["position_ids"] = [list(range(length))] * 3  # text only: transformers' 1-D positions
        entry["delta"] = 0
    return entry


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "chat_template.jinja").write_text(TEMPLATE)
    with open(OUT / "rows.jsonl", "w") as handle:
        for row in ROWS:
            handle.write(json.dumps(row) + "\n")
    processor = make_processor(VISION / "qwen2_5_vl")
    model = make_model()
    expected = []
    for row in ROWS:
        expected.append(transformers_row(processor, model, row, OUT))
    (OUT / "expected.json").write_text(json.dumps(expected) + "\n")
    write_mrope_fixture(model, expected[1]["position_ids"])
    write_vision_rope_fixture(model)
    print("wrote", OUT, [len(e["input_ids"]) for e in expected])


if __name__ == "__main__":
    torch.manual_seed(0)
    np.random.seed(0)
    main()
