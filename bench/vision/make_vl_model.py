#!/usr/bin/env python3
"""Writes a vision-language model folder for bench/run_vl_job.sh: transformers' own config class at
a real model's shapes, random bf16 weights saved by `save_pretrained`, the real Qwen tokenizer
(tests/fixtures/tokenizers/qwen3) with the Qwen2-VL chat template that has the vision tokens (the
one tests/python's VL fixtures use, tests/fixtures/vision/rows/chat_template.jinja), and the
real folder's preprocessor_config.json (min / max pixels, patch 14 or 16, merge 2).

  python3 bench/vision/make_vl_model.py MODEL OUTPUT_DIR      (MODEL: a name of SHAPES below)

qwen2.5-vl-7b: Qwen/Qwen2.5-VL-7B-Instruct's shapes (text 3584, 28 layers, 28 / 4 heads, 18944,
vocabulary 152064, M-RoPE sections [16, 24, 24]; tower depth 32, hidden 1280, 16 heads, patch 14,
windows of 112 px with blocks 7, 15, 23, 31 fully attending). qwen3-vl-8b: Qwen/Qwen3-VL-8B-
Instruct's (Qwen3-8B text: 4096, 36 layers, 32 / 8 heads, head_dim 128, 12288, interleaved sections
[24, 20, 20]; tower depth 27, hidden 1152, 16 heads, patch 16, a 48 × 48 position table, DeepStack
after blocks 8, 16, 24). The -tiny shapes (VL_TINY=1, the CPU smoke test) keep each family's
structure at test size (tests/python/test_vision_sft.py, test_qwen3_vl_sft.py) with patch 4.

Weights: transformers' own initialisation (normal, std 0.02; norms 1), built on the GPU when there
is one, in bf16 (fp32 for the tiny shapes, which run on the CPU).
"""
import json
import pathlib
import sys
import tarfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOKENS = dict(image_token_id=151655, video_token_id=151656, vision_start_token_id=151652, vision_end_token_id=151653)
CLIP = dict(image_mean=[0.48145466, 0.4578275, 0.40821073], image_std=[0.26862954, 0.26130258, 0.27577711])
HALF = dict(image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
PROCESSOR = dict(do_resize=True, resample=3, do_rescale=True, rescale_factor=1 / 255, do_normalize=True,
                 do_convert_rgb=True, temporal_patch_size=2, merge_size=2)

QWEN25_VISION = dict(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16, out_hidden_size=3584,
                     patch_size=14, window_size=112, fullatt_block_indexes=[7, 15, 23, 31], spatial_merge_size=2,
                     temporal_patch_size=2, tokens_per_second=2, hidden_act="silu", in_chans=3)
QWEN25_TEXT = dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
                   num_key_value_heads=4, vocab_size=152064, max_position_embeddings=128000, rms_norm_eps=1e-6,
                   hidden_act="silu", tie_word_embeddings=False,
                   rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [16, 24, 24]})
QWEN3_VISION = dict(depth=27, hidden_size=1152, intermediate_size=4304, num_heads=16, out_hidden_size=4096,
                    patch_size=16, spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=2304,
                    deepstack_visual_indexes=[8, 16, 24], hidden_act="gelu_pytorch_tanh", in_channels=3)
QWEN3_TEXT = dict(hidden_size=4096, intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32,
                  num_key_value_heads=8, head_dim=128, vocab_size=151936, max_position_embeddings=262144,
                  rms_norm_eps=1e-6, hidden_act="silu", tie_word_embeddings=False,
                  rope_parameters={"rope_type": "default", "rope_theta": 5000000.0, "mrope_section": [24, 20, 20],
                                   "mrope_interleaved": True})

# (family, vision config, text config, preprocessor_config.json)
SHAPES = {
    "qwen2.5-vl-7b": ("qwen2.5-vl", QWEN25_VISION, QWEN25_TEXT,
                      {"image_processor_type": "Qwen2VLImageProcessor", "processor_class": "Qwen2_5_VLProcessor",
                       **PROCESSOR, **CLIP, "min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14}),
    "qwen3-vl-8b": ("qwen3-vl", QWEN3_VISION, QWEN3_TEXT,
                    {"image_processor_type": "Qwen2VLImageProcessorFast", "processor_class": "Qwen3VLProcessor",
                     **PROCESSOR, **HALF, "size": {"shortest_edge": 65536, "longest_edge": 16777216},
                     "patch_size": 16}),
    "qwen2.5-vl-tiny": ("qwen2.5-vl",
                        dict(depth=2, hidden_size=16, intermediate_size=32, num_heads=2, out_hidden_size=24,
                             patch_size=4, window_size=16, fullatt_block_indexes=[1], spatial_merge_size=2,
                             temporal_patch_size=2),
                        dict(hidden_size=24, intermediate_size=48, num_hidden_layers=2, num_attention_heads=2,
                             num_key_value_heads=1, vocab_size=151936, max_position_embeddings=2048,
                             rms_norm_eps=1e-6, tie_word_embeddings=False,
                             rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                              "mrope_section": [2, 2, 2]}),
                        {"image_processor_type": "Qwen2VLImageProcessor", **PROCESSOR, **CLIP,
                         "min_pixels": 256, "max_pixels": 16384, "patch_size": 4}),
    "qwen3-vl-tiny": ("qwen3-vl",
                      dict(depth=2, hidden_size=16, intermediate_size=32, num_heads=2, out_hidden_size=24,
                           patch_size=4, spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=16,
                           deepstack_visual_indexes=[1, 0]),
                      dict(hidden_size=24, intermediate_size=48, num_hidden_layers=2, num_attention_heads=2,
                           num_key_value_heads=1, head_dim=16, vocab_size=151936, max_position_embeddings=2048,
                           rms_norm_eps=1e-6, tie_word_embeddings=False,
                           rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 2, 2],
                                            "mrope_interleaved": True}),
                      {"image_processor_type": "Qwen2VLImageProcessor", **PROCESSOR, **HALF,
                       "min_pixels": 256, "max_pixels": 16384, "patch_size": 4}),
}


def build(name: str):
    import torch
    import transformers
    family, vision, text, _ = SHAPES[name]
    if family == "qwen2.5-vl":
        config_class, model_class = transformers.Qwen2_5_VLConfig, transformers.Qwen2_5_VLForConditionalGeneration
        architecture = "Qwen2_5_VLForConditionalGeneration"
    else:
        config_class, model_class = transformers.Qwen3VLConfig, transformers.Qwen3VLForConditionalGeneration
        architecture = "Qwen3VLForConditionalGeneration"
    config = config_class(vision_config=vision, text_config=text, tie_word_embeddings=False, **TOKENS)
    config.architectures = [architecture]
    tiny = name.endswith("-tiny")
    dtype = torch.float32 if tiny else torch.bfloat16
    device = "cuda" if torch.cuda.is_available() and not tiny else "cpu"
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = model_class(config)
    finally:
        torch.set_default_dtype(previous)
    return model.to(dtype)


def write_tokenizer(out: pathlib.Path) -> None:
    """The real Qwen tokenizer with the chat template that writes
    <|vision_start|><|image_pad|><|vision_end|> per image part."""
    with tarfile.open(ROOT / "tests/fixtures/tokenizers/qwen3/tokenizer.tar.xz") as archive:
        archive.extractall(out)
    settings = json.loads((out / "tokenizer_config.json").read_text())
    settings["chat_template"] = (ROOT / "tests/fixtures/vision/rows/chat_template.jinja").read_text()
    (out / "tokenizer_config.json").write_text(json.dumps(settings, indent=2))


def main() -> None:
    name, out = sys.argv[1], pathlib.Path(sys.argv[2])
    if name not in SHAPES:
        sys.exit(f"make_vl_model.py: unknown model {name!r}; known: {', '.join(sorted(SHAPES))}")
    out.mkdir(parents=True, exist_ok=True)
    model = build(name)
    model.save_pretrained(out, max_shard_size="4GB")
    write_tokenizer(out)
    (out / "preprocessor_config.json").write_text(json.dumps(SHAPES[name][3], indent=2))
    count = sum(p.numel() for p in model.parameters())
    print(f"{name}: {count / 1e9:.2f} B parameters -> {out}")


if __name__ == "__main__":
    main()
