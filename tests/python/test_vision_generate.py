"""`surogate generate` on vision-language folders (docs/generation.md, "Images"; docs/vision.md):
greedy generation on the CPU backend in fp32 against transformers' generate(do_sample=False) with
the HF image processor's inputs, token for token, for both families (the tiny random Qwen2.5-VL of
test_vision_sft.py and Qwen3-VL of test_qwen3_vl_sft.py): a row with an image as an HF content part
(a JPEG scaled down, its path relative to the input file), a row with ms-swift's "<image>"
placeholder and an images column (a PNG scaled up), a text-only row, and --prompt, the rows run
together, in groups of two and one at a time; the same rows with a PEFT LoRA adapter on the text
model, applied unmerged (an adapter reaching the tower is refused naming its tensor). Prompts whose greedy path passes a
near-tie (top-2 margin under 1e-4 in transformers' scores) are not used, so fp32 rounding cannot
decide a token (the row's question is taken from a list until one is clear). Bad input (a missing
or undecodable image, placeholders that do not match the images) is one error naming the row;
`chat` and `serve` refuse the folder naming the command and the architecture. With a GPU: the
CUDA backend's completions equal the CPU's up to the first step where transformers' fp32 margin is
under 0.05 (bf16 against fp32; the tiny models' logits are of order 1)."""
import json
import shutil

import pytest

from conftest import gpu_visible, run_surogate

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
peft = pytest.importorskip("peft")
pytest.importorskip("PIL")
pytest.importorskip("safetensors")
import PIL.Image  # noqa: E402
import PIL.ImageOps  # noqa: E402
from test_vision_sft import PROCESSOR as QWEN2_5_PROCESSOR  # noqa: E402
from test_vision_sft import TOKENS, VISION, tiny_qwen2_5_vl, write_model_folder  # noqa: E402
from test_qwen3_vl_sft import PROCESSOR as QWEN3_PROCESSOR  # noqa: E402
from test_qwen3_vl_sft import tiny_qwen3_vl  # noqa: E402

NEW_TOKENS = 8
MARGIN = 1e-4
CUDA_MARGIN = 5e-2
QUESTIONS = ["What is in the picture?", "Describe it.", "What colour is it?", "Is it large?", "Name one thing.",
             "Tell me more.", "Why?", "Where is this?"]


FAMILIES = {
    "qwen2_5_vl": (tiny_qwen2_5_vl, QWEN2_5_PROCESSOR, "Qwen2_5_VLForConditionalGeneration"),
    "qwen3_vl": (tiny_qwen3_vl, QWEN3_PROCESSOR, "Qwen3VLForConditionalGeneration"),
}


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family(request, tmp_path_factory, tokenizers_dir):
    make, processor, architecture = FAMILIES[request.param]
    root = tmp_path_factory.mktemp(f"vision_generate_{request.param}")
    folder = make(root / "model", tokenizers_dir)
    model_class = getattr(transformers, architecture)
    model = model_class.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    return {"name": request.param, "folder": folder, "model": model, "processor": processor, "tokenizer": tokenizer,
            "architecture": architecture}


def image_processor(settings):
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
    settings = dict(settings)
    settings.pop("image_processor_type")
    return Qwen2VLImageProcessorPil(**settings)


def hf_inputs(family, messages, images):
    """What the HF processor gives for the conversation: the chat template with the generation
    prompt, each <|image_pad|> repeated grid_t·grid_h·grid_w / merge² times, the pixel values."""
    text = family["tokenizer"].apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    inputs = {}
    if images:
        processed = image_processor(family["processor"])(images=images, return_tensors="pt")
        merge = family["processor"]["merge_size"] ** 2
        parts = text.split("<|image_pad|>")
        assert len(parts) == len(images) + 1
        text = parts[0]
        for grid, part in zip(processed["image_grid_thw"], parts[1:]):
            text += "<|image_pad|>" * (int(grid.prod()) // merge) + part
        inputs = {"pixel_values": processed["pixel_values"], "image_grid_thw": processed["image_grid_thw"]}
    ids = torch.tensor([family["tokenizer"](text, add_special_tokens=False)["input_ids"]])
    inputs["mm_token_type_ids"] = (ids == TOKENS["image_token_id"]).to(torch.int32)
    return ids, inputs


def hf_greedy(model, ids, inputs):
    """transformers' greedy completion ids and the top-1 / top-2 margin of each step."""
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, output_scores=True,
                             return_dict_in_generate=True, **inputs)
    margins = [float(s[0].topk(2).values[0] - s[0].topk(2).values[1]) for s in out.scores]
    return out.sequences[0, ids.shape[1]:].tolist(), margins


def load_image(path):
    return PIL.ImageOps.exif_transpose(PIL.Image.open(path)).convert("RGB")


def row_kinds(question):
    """(engine row, HF messages, images) for each kind of row, paths relative to the input file."""
    photo, small = "img/photo.jpg", "img/rgb_small.png"
    return [
        ({"messages": [{"role": "user", "content": [{"type": "image", "image": photo},
                                                    {"type": "text", "text": question}]}]},
         [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": question}]}], [photo]),
        ({"messages": [{"role": "user", "content": f"<image>{question}"}], "images": [small]},
         [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": question}]}], [small]),
        ({"messages": [{"role": "user", "content": question}]},
         [{"role": "user", "content": question}], []),
    ]


def clear_rows(family, model, workdir, first_margin=MARGIN):
    """One row of each kind whose greedy path has no near-tie (and whose first step leads by
    `first_margin`), with transformers' completion and margins."""
    chosen = []
    for kind in range(3):
        for question in QUESTIONS:
            row, messages, images = row_kinds(question)[kind]
            ids, inputs = hf_inputs(family, messages, [load_image(workdir / path) for path in images])
            completion, margins = hf_greedy(model, ids, inputs)
            if min(margins) > MARGIN and margins[0] > first_margin and TOKENS["image_token_id"] not in completion:
                chosen.append((row, completion, margins))
                break
        else:
            pytest.fail(f"no question without a near-tie for row kind {kind}")
    return chosen


def workdir_with_images(tmp_path):
    (tmp_path / "img").mkdir()
    for name in ["photo.jpg", "rgb_small.png"]:
        shutil.copy(VISION / name, tmp_path / "img" / name)
    return tmp_path


def generate_rows(surogate_bin, folder, workdir, rows, *args, device="cpu"):
    source, target = workdir / "in.jsonl", workdir / "out.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = run_surogate(surogate_bin, "generate", "--model", folder, "--input", source, "--output", target,
                          "--device", device, "--temperature", "0", "--max_new_tokens", NEW_TOKENS, *args)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in target.read_text().splitlines()]


def test_greedy_with_images_matches_transformers(surogate_bin, family, tmp_path):
    workdir = workdir_with_images(tmp_path)
    chosen = clear_rows(family, family["model"], workdir)
    # All rows in one forward per step (--batch_size 8), in groups of two (the last group's second
    # row padding), and one at a time: each row's completion is transformers'.
    for batch_size in (8, 2, 1):
        out = generate_rows(surogate_bin, family["folder"], workdir, [row for row, _, _ in chosen],
                            "--batch_size", batch_size)
        for (row, completion, _), written in zip(chosen, out):
            assert written["messages"] == row["messages"]
            assert written["completion_ids"] == completion, (family["name"], batch_size, row)
            assert written["finish_reason"] == "length"


def test_a_text_prompt_runs_on_a_vision_language_folder(surogate_bin, family, tmp_path):
    for text in ["Hello there, how are", "The weather today", "Once upon a time", "One two three"]:
        ids = torch.tensor([family["tokenizer"](text)["input_ids"]])
        completion, margins = hf_greedy(family["model"], ids, {"mm_token_type_ids": torch.zeros_like(ids, dtype=torch.int32)})
        if min(margins) > MARGIN and TOKENS["image_token_id"] not in completion:
            break
    else:
        pytest.fail("no text prompt without a near-tie")
    [written] = generate_rows(surogate_bin, family["folder"], tmp_path, [{"prompt": text}])
    assert written["completion_ids"] == completion
    result = run_surogate(surogate_bin, "generate", "--model", family["folder"], "--prompt", text,
                          "--device", "cpu", "--temperature", "0", "--max_new_tokens", NEW_TOKENS)
    assert result.returncode == 0, result.stderr
    assert result.stdout == written["completion"] + "\n"


def test_greedy_with_a_lora_adapter_matches_peft(surogate_bin, family, tmp_path):
    workdir = workdir_with_images(tmp_path)
    base = getattr(transformers, family["architecture"]).from_pretrained(
        family["folder"], dtype=torch.float32, attn_implementation="eager").eval()
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "down_proj"],
                             exclude_modules=".*visual.*", init_lora_weights=False)
    torch.manual_seed(3)
    model = peft.get_peft_model(base, config).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_" in name:
                parameter.copy_(torch.randn_like(parameter) * 0.3)
    model.save_pretrained(tmp_path / "adapter")
    chosen = clear_rows(family, model, workdir)
    plain = generate_rows(surogate_bin, family["folder"], workdir, [row for row, _, _ in chosen])
    adapted = generate_rows(surogate_bin, family["folder"], workdir, [row for row, _, _ in chosen],
                            "--adapter", tmp_path / "adapter")
    for (row, completion, _), written in zip(chosen, adapted):
        assert written["completion_ids"] == completion, (family["name"], row)
    assert [r["completion_ids"] for r in plain] != [r["completion_ids"] for r in adapted]  # the adapter matters


def test_an_adapter_on_the_tower_is_refused_naming_it(surogate_bin, family, tmp_path):
    base = getattr(transformers, family["architecture"]).from_pretrained(family["folder"], dtype=torch.float32)
    config = peft.LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "qkv"], init_lora_weights=False)
    peft.get_peft_model(base, config).save_pretrained(tmp_path / "adapter")
    result = run_surogate(surogate_bin, "generate", "--model", family["folder"], "--adapter", tmp_path / "adapter",
                          "--prompt", "hi", "--device", "cpu", "--max_new_tokens", 2)
    assert result.returncode == 2, result.stderr
    assert "visual.blocks.0.attn.qkv" in result.stderr and "surogate merge" in result.stderr, result.stderr


def error_of(surogate_bin, folder, workdir, rows):
    source = workdir / "bad.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = run_surogate(surogate_bin, "generate", "--model", folder, "--input", source, "--output",
                          workdir / "bad_out.jsonl", "--device", "cpu", "--max_new_tokens", 2)
    assert result.returncode == 2, result.stderr
    return result.stderr


def test_bad_image_rows_are_one_error_naming_the_row(surogate_bin, family, tmp_path):
    workdir = workdir_with_images(tmp_path)
    (workdir / "img" / "broken.png").write_bytes(b"not an image at all")
    fine = {"messages": [{"role": "user", "content": "Hi"}]}
    missing = {"messages": [{"role": "user", "content": [{"type": "image", "image": "img/absent.png"}]}]}
    message = error_of(surogate_bin, family["folder"], workdir, [fine, missing])
    assert "bad.jsonl:2" in message and "absent.png" in message, message
    broken = {"messages": [{"role": "user", "content": [{"type": "image", "image": "img/broken.png"}]}]}
    message = error_of(surogate_bin, family["folder"], workdir, [fine, fine, broken])
    assert "bad.jsonl:3" in message and "broken.png" in message, message
    counts = {"messages": [{"role": "user", "content": "<image>Two?"}], "images": ["img/photo.jpg", "img/rgb_small.png"]}
    message = error_of(surogate_bin, family["folder"], workdir, [counts])
    assert "bad.jsonl:1" in message and "placeholder" in message, message
    pads = {"input_ids": [1, 2, TOKENS["image_token_id"], 3]}
    message = error_of(surogate_bin, family["folder"], workdir, [fine, pads])
    assert "bad.jsonl:2" in message and "image" in message, message


@pytest.mark.parametrize("command", ["chat", "serve"])
def test_chat_and_serve_refuse_the_folder_naming_the_command(surogate_bin, family, command):
    result = run_surogate(surogate_bin, command, "--model", family["folder"], "--device", "cpu", input_text="")
    assert result.returncode == 2, result.stderr
    assert f"surogate {command}" in result.stderr and family["architecture"] in result.stderr, result.stderr


def test_max_pixels_is_refused_on_a_text_folder(surogate_bin, tmp_path):
    from conftest import REPO_ROOT
    result = run_surogate(surogate_bin, "generate", "--model", REPO_ROOT / "tests" / "fixtures" / "qwen3_qknorm",
                          "--prompt", "x", "--max_pixels", 1000, "--device", "cpu")
    assert result.returncode == 2 and "--max_pixels" in result.stderr, result.stderr


@pytest.mark.skipif(not gpu_visible(), reason="needs a GPU")
def test_the_cuda_backend_generates_the_cpus_tokens(surogate_bin, family, tmp_path):
    workdir = workdir_with_images(tmp_path)
    chosen = clear_rows(family, family["model"], workdir, first_margin=CUDA_MARGIN)
    rows = [row for row, _, _ in chosen]
    cpu = generate_rows(surogate_bin, family["folder"], workdir, rows, device="cpu")
    cuda = generate_rows(surogate_bin, family["folder"], workdir, rows, device="cuda")
    for (row, _, margins), ours, theirs in zip(chosen, cpu, cuda):
        # The steps before the first whose fp32 choice is not clear at bf16 precision (at least one).
        clear = next((step for step, margin in enumerate(margins) if margin < CUDA_MARGIN), len(margins))
        assert clear >= 1
        assert theirs["completion_ids"][:clear] == ours["completion_ids"][:clear], (family["name"], row, margins)
