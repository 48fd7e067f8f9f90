"""A Qwen2.5-VL folder's image datasets through the CLI (docs/vision.md, "Training data"):
`surogate preview` shows image rows with each image's <|image_pad|> run summarised, `surogate
tokenize` caches them and rebuilds when `max_pixels` changes, `max_pixels` for a text model and
the parts of `surogate sft` not wired for the folder yet are refused with one clear error."""
import json
import os
import pathlib
import shutil

from conftest import REPO_ROOT, run_surogate

VISION = REPO_ROOT / "tests" / "fixtures" / "vision"


def vision_folder(tmp_path, tokenizers_dir):
    """The fixture model's config.json (the real tokenizer's image id and vocabulary), the real Qwen
    tokenizer with Qwen2-VL's chat template, the fixture processor (max_pixels 12544)."""
    folder = tmp_path / "qwen2_5_vl"
    folder.mkdir()
    shutil.copy(tokenizers_dir / "qwen3" / "tokenizer.json", folder / "tokenizer.json")
    tokenizer_config = json.loads((tokenizers_dir / "qwen3" / "tokenizer_config.json").read_text())
    tokenizer_config["chat_template"] = (VISION / "rows" / "chat_template.jinja").read_text()
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    config = json.loads((VISION / "vl" / "config.json").read_text())
    config["image_token_id"] = 151655
    config["text_config"]["vocab_size"] = 151936
    (folder / "config.json").write_text(json.dumps(config))
    shutil.copy(VISION / "qwen2_5_vl" / "preprocessor_config.json", folder / "preprocessor_config.json")
    return folder


def write_config(tmp_path, model, rows, **extra):
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    lines = [f"model: {model}", f"output_dir: {tmp_path / 'out'}", "sequence_len: 256",
             "validation_split_ratio: 0", "datasets:", f"  - path: {data}", "    type: conversation"]
    lines += [f"{key}: {json.dumps(value)}" for key, value in extra.items()]
    path = tmp_path / "config.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


ROWS = [
    {"messages": [{"role": "user", "content": "<image>What is it?"}, {"role": "assistant", "content": "A photo."}],
     "images": [str(VISION / "photo.jpg")]},
    {"messages": [{"role": "user", "content": "No image."}, {"role": "assistant", "content": "Only text."}]},
]


def test_preview_summarises_each_images_pad_run(tmp_path, surogate_bin, tokenizers_dir):
    config = write_config(tmp_path, vision_folder(tmp_path, tokenizers_dir), ROWS)
    result = run_surogate(surogate_bin, "preview", config, "-n", "2")
    assert result.returncode == 0, result.stderr
    # photo.jpg resized under max_pixels 12544 to 112 × 84 (grid 6 × 8 patches, 12 merged tokens).
    assert "1 image(s), resized to 112×84 (width × height)" in result.stdout
    assert "<|vision_start|><|image_pad|>×12<|vision_end|>" in result.stdout
    ids_line = next(line for line in result.stdout.splitlines() if line.startswith("ids: "))
    assert "151652 151655×12 151653" in ids_line
    assert result.stdout.count("image(s), resized") == 1  # the text-only row has none


GROUNDING = [
    {"messages": [{"role": "user", "content": "<image>Find <ref-object>"}, {"role": "assistant", "content": "<bbox>"}],
     "images": [str(VISION / "photo.jpg")],
     "objects": {"ref": ["the sky"], "bbox": [[10, 20, 105.5, 156]]}},
]


def test_preview_shows_grounding_rendered_for_each_norm_bbox(tmp_path, surogate_bin, tokenizers_dir):
    config = write_config(tmp_path, vision_folder(tmp_path, tokenizers_dir), GROUNDING)
    # Qwen2.5-VL's default (none): pixels of the 112 × 84 resized photo (211 × 157): 10/211·112 = 5.3,
    # 20/157·84 = 10.7, 105.5/211·112 = 56, 156/157·84 = 83.5 (round half to even).
    result = run_surogate(surogate_bin, "preview", config, "-n", "1")
    assert result.returncode == 0, result.stderr
    assert "Find <|object_ref_start|>the sky<|object_ref_end|>" in result.stdout
    assert "<|box_start|>(5,11),(56,83)<|box_end|>" in result.stdout
    result = run_surogate(surogate_bin, "preview", config, "-n", "1", "--norm_bbox=norm1000")
    assert result.returncode == 0, result.stderr
    assert "<|box_start|>(47,127),(500,994)<|box_end|>" in result.stdout
    bad = dict(GROUNDING[0], objects={"ref": ["the sky"], "bbox": [[1, 2, 3]]})
    (tmp_path / "bad").mkdir()
    config = write_config(tmp_path / "bad", vision_folder(tmp_path / "bad", tokenizers_dir), [bad])
    result = run_surogate(surogate_bin, "preview", config, "-n", "1")
    assert result.returncode == 2
    assert "rows.jsonl:1: 'objects.bbox[0]' must be a list of 2 numbers" in result.stderr


def test_tokenize_caches_images_and_max_pixels_rebuilds(tmp_path, surogate_bin, tokenizers_dir):
    config = write_config(tmp_path, vision_folder(tmp_path, tokenizers_dir), ROWS)
    first = run_surogate(surogate_bin, "tokenize", config)
    assert first.returncode == 0, first.stderr
    assert "2 rows read" in first.stdout
    again = run_surogate(surogate_bin, "tokenize", config)
    assert again.returncode == 0 and "up to date" in again.stderr
    smaller = run_surogate(surogate_bin, "tokenize", config, "--max_pixels=3136")
    assert smaller.returncode == 0, smaller.stderr
    assert "stale" in smaller.stderr
    below = run_surogate(surogate_bin, "tokenize", config, "--max_pixels=1000")
    assert below.returncode != 0 and "max_pixels (1000) is below the image processor's min_pixels" in below.stderr


def test_max_pixels_for_a_text_model_is_refused(tmp_path, surogate_bin, tokenizers_dir):
    config = write_config(tmp_path, tokenizers_dir / "qwen3", ROWS[1:], max_pixels=100000)
    result = run_surogate(surogate_bin, "tokenize", config)
    assert result.returncode != 0
    assert "max_pixels applies to vision-language models" in result.stderr


def test_sft_parts_not_wired_for_a_vision_language_folder_are_refused_before_any_data(tmp_path, surogate_bin,
                                                                                      tokenizers_dir):
    config = write_config(tmp_path, vision_folder(tmp_path, tokenizers_dir), ROWS)
    # Two CPU ranks (no GPU visible, so a one-GPU machine does not refuse gpus: 2 first); data
    # parallelism trains (tests/python/test_vision_sft_ranks.py), sequence parallelism does not.
    cpu_only = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    for overrides, phrase in ((["--gpus=2", "--sequence_parallel_size=2"],
                               "sequence / pipeline parallelism (sequence_parallel_size"),):
        for flags in ([], ["--dry-run"]):
            result = run_surogate(surogate_bin, "sft", config, *overrides, *flags, env=cpu_only)
            assert result.returncode == 2, result.stderr  # a UserError
            assert phrase in result.stderr
            assert "a vision-language model (Qwen2_5_VLForConditionalGeneration), is not implemented yet" in result.stderr
            assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    assert not (tmp_path / "out" / "tokenized").exists()


def test_commands_other_than_sft_refuse_a_vision_language_folder_naming_it(tmp_path, surogate_bin, tokenizers_dir):
    model = vision_folder(tmp_path, tokenizers_dir)
    # `surogate generate` and `surogate eval` run the folder (tests/python/test_vision_generate.py,
    # tests/python/test_vision_eval.py).
    for args in (["ir", model],):
        result = run_surogate(surogate_bin, *args)
        assert result.returncode == 2, (args, result.stderr)
        assert "Qwen2_5_VLForConditionalGeneration is a vision-language model; `surogate sft` trains it" in result.stderr


def test_a_vision_language_class_not_trained_is_refused_naming_it(tmp_path, surogate_bin, tokenizers_dir):
    """A config.json with a vision_config whose class the engine does not train (Qwen2-VL here):
    one error naming the class and the two that are trained, not a missing text key."""
    model = pathlib.Path(vision_folder(tmp_path, tokenizers_dir))
    config = json.loads((model / "config.json").read_text())
    config["architectures"] = ["Qwen2VLForConditionalGeneration"]
    (model / "config.json").write_text(json.dumps(config))
    data = tmp_path / "eval.jsonl"
    data.write_text('{"text": "hello"}\n')
    result = run_surogate(surogate_bin, "eval", "--model", model, "--data", data)
    assert result.returncode == 2, result.stderr
    assert "Qwen2VLForConditionalGeneration is a vision-language model surogate does not train yet" in result.stderr
    assert "Qwen3VLForConditionalGeneration" in result.stderr
