"""`surogate sft` on a Qwen2.5-VL folder (docs/vision.md, "Training"): LoRA on the text model, the
vision tower frozen, on the CPU backend in fp32, against transformers + PEFT computing the same batch.

A tiny random Qwen2_5_VLForConditionalGeneration (tower depth 2 with block 1 fully attending,
patch 4, window 16; text hidden 24, 2 layers; the real Qwen tokenizer's vocabulary) is written
with transformers; two image rows (a JPEG scaled down, a PNG scaled up) make one micro-batch of
two rows. The engine's ids and labels come from tests/data/image_rows_tool (the same formatter
the run uses); transformers reads the images through its own image processor.

- Step 1's loss is the base model's (LoRA's B starts at 0): transformers' mean cross-entropy over
  both rows' scored tokens, rel 1e-5 (fp32; the sums run in other orders).
- Step 1's gradient norm is PEFT's over the adapter matrices with the run's A (unchanged by a
  step whose gradient for A is 0: B = 0, weight_decay 0) and B = 0, rel 1e-5.
- The PEFT adapter the run writes loads into transformers (PeftModel.from_pretrained: keys under
  model.language_model, the tower excluded) and gives the loss the engine logs at step 2 on the
  same batch (the last step's LR is 0, so the written adapter is the one step 2 used), rel 1e-5.
- With a GPU: the CUDA backend's two steps are the CPU's within bf16 tolerances.
"""
import json
import math
import os
import shutil

import pytest

from conftest import REPO_ROOT, build_binary, gpu_visible, load_script, run_surogate

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
peft = pytest.importorskip("peft")
PIL = pytest.importorskip("PIL")
pytest.importorskip("safetensors")
import PIL.Image  # noqa: E402
import PIL.ImageOps  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

VISION = REPO_ROOT / "tests" / "fixtures" / "vision"
TOKENS = dict(image_token_id=151655, video_token_id=151656, vision_start_token_id=151652, vision_end_token_id=151653)
PROCESSOR = {"image_processor_type": "Qwen2VLImageProcessor", "do_resize": True, "resample": 3, "do_rescale": True,
             "rescale_factor": 1 / 255, "do_normalize": True, "do_convert_rgb": True,
             "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711],
             "min_pixels": 256, "max_pixels": 2048, "patch_size": 4, "temporal_patch_size": 2, "merge_size": 2}
ROWS = [
    {"messages": [{"role": "user", "content": [{"type": "image", "image": str(VISION / "photo.jpg")},
                                               {"type": "text", "text": "What is in the picture?"}]},
                  {"role": "assistant", "content": "A small photo with a few colours."}]},
    {"messages": [{"role": "user", "content": "<image>Describe it."},
                  {"role": "assistant", "content": "Some coloured pixels."}],
     "images": [str(VISION / "rgb_small.png")]},
]
RTOL = 1e-5
CPU_ONLY = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory, tokenizers_dir):
    return tiny_qwen2_5_vl(tmp_path_factory.mktemp("vision_sft") / "qwen2_5_vl", tokenizers_dir)


def tiny_qwen2_5_vl(folder, tokenizers_dir, hidden=24, intermediate=48, mrope_section=(2, 2, 2)):
    """The tiny random Qwen2.5-VL (2 tower blocks, 2 text layers of 2 heads, one kv head) written to
    `folder`, its text model `hidden` wide."""
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration
    folder.mkdir()
    vision = dict(depth=2, hidden_size=16, intermediate_size=32, num_heads=2, out_hidden_size=hidden, patch_size=4,
                  window_size=16, fullatt_block_indexes=[1], spatial_merge_size=2, temporal_patch_size=2)
    text = dict(hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=2, num_attention_heads=2,
                num_key_value_heads=1, vocab_size=151936, max_position_embeddings=512, rms_norm_eps=1e-6,
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": list(mrope_section)})
    config = Qwen2_5_VLConfig(vision_config=vision, text_config=text, **TOKENS)
    config.architectures = ["Qwen2_5_VLForConditionalGeneration"]
    torch.manual_seed(0)
    model = load_script("make_vision_tower_fixtures").randomize(Qwen2_5_VLForConditionalGeneration(config).float())
    return write_model_folder(folder, config, model, PROCESSOR, tokenizers_dir)


def write_model_folder(folder, config, model, processor, tokenizers_dir):
    """A model folder: config.json, the weights, the processor, the real Qwen tokenizer with
    Qwen2-VL's chat template."""
    (folder / "config.json").write_text(json.dumps(config.to_dict(), indent=2))
    save_file({name: tensor.detach().contiguous() for name, tensor in model.state_dict().items()},
              str(folder / "model.safetensors"))
    (folder / "preprocessor_config.json").write_text(json.dumps(processor))
    shutil.copy(tokenizers_dir / "qwen3" / "tokenizer.json", folder / "tokenizer.json")
    tokenizer_config = json.loads((tokenizers_dir / "qwen3" / "tokenizer_config.json").read_text())
    tokenizer_config["chat_template"] = (VISION / "rows" / "chat_template.jinja").read_text()
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    return folder


def hf_model(folder):
    from transformers import Qwen2_5_VLForConditionalGeneration
    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager")
    return model.eval()


def engine_rows(folder, tokenizers_dir, tmp_path):
    """The formatter's ids and labels of ROWS (tests/data/image_rows_tool)."""
    import subprocess
    rows_file = tmp_path / "tool_rows.jsonl"
    rows_file.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    result = subprocess.run([str(build_binary("tests/data/image_rows_tool")), str(tokenizers_dir / "qwen3"),
                             str(VISION / "rows" / "chat_template.jinja"), str(folder), str(rows_file)],
                            capture_output=True, text=True, check=True)
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert all("error" not in row for row in rows), rows
    return rows


def image_of(row):
    content = row["messages"][0]["content"]
    path = content[0]["image"] if isinstance(content, list) else row["images"][0]
    return PIL.ImageOps.exif_transpose(PIL.Image.open(path)).convert("RGB")


def batch_loss(model, folder, rows, processor_settings=PROCESSOR):
    """transformers' loss of the micro-batch: Σ over both rows of the summed cross-entropy / scored tokens."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
    settings = dict(processor_settings)
    settings.pop("image_processor_type")
    processor = Qwen2VLImageProcessorPil(**settings)
    total, scored = 0.0, 0
    for row, ours in zip(ROWS, rows):
        images = processor(images=[image_of(row)], return_tensors="pt")
        assert images["image_grid_thw"].tolist() == ours["grid_thw"]
        ids = torch.tensor([ours["input_ids"]])
        labels = torch.tensor([ours["labels"]])
        out = model(input_ids=ids, labels=labels, pixel_values=images["pixel_values"],
                    image_grid_thw=images["image_grid_thw"],
                    mm_token_type_ids=(ids == TOKENS["image_token_id"]).to(torch.int32))
        count = int((labels[0, 1:] != -100).sum())
        total = total + out.loss * count
        scored += count
    return total / scored


def run_sft(surogate_bin, folder, tmp_path, steps, env=CPU_ONLY, name="cpu", extra=""):
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    out = tmp_path / f"out_{name}{steps}"
    config = tmp_path / f"config_{name}{steps}.yaml"
    config.write_text(f"model: {folder}\noutput_dir: {out}\nlog_file: {out}/log.jsonl\nsequence_len: 128\n"
                      "sample_packing: false\nvalidation_split_ratio: 0\nper_device_train_batch_size: 2\n"
                      f"gradient_accumulation_steps: 1\nmax_steps: {steps}\nlora_rank: 4\nlora_alpha: 8\n"
                      "lora_dropout: 0\noptimizer: adamw\nlearning_rate: 1e-2\nweight_decay: 0\nmax_grad_norm: 0\n"
                      "warmup_steps: 0\n"
                      f"datasets:\n  - path: {data}\n    type: conversation\n{extra}")
    result = run_surogate(surogate_bin, "sft", config, env=env)
    assert result.returncode == 0, result.stderr
    logged = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    if extra:
        return out, logged
    return out, [record for record in logged if record.get("type") == "step"]


@pytest.fixture(scope="module")
def run(surogate_bin, model_folder, tmp_path_factory, tokenizers_dir):
    """Two steps on the same micro-batch (both rows each epoch). The linear schedule's LR is 1e-2 at
    step 1 and 0 at step 2, so the adapter written at the end is the one step 2 computed with, and
    its A is the initial one (B = 0 gives A no gradient at step 1)."""
    tmp_path = tmp_path_factory.mktemp("vision_sft_runs")
    out, records = run_sft(surogate_bin, model_folder, tmp_path, 2)
    assert [record["lr"] for record in records] == [pytest.approx(1e-2), 0.0]
    return {"out": out, "records": records, "rows": engine_rows(model_folder, tokenizers_dir, tmp_path)}


def check_step_one(run, model_folder, base_model, processor=PROCESSOR):
    """Step 1's loss is transformers' and its gradient norm PEFT's (the run's A, B = 0), rel 1e-5."""
    model = peft.PeftModel.from_pretrained(base_model, run["out"], is_trainable=True)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.zero_()
    loss = batch_loss(model, model_folder, run["rows"], processor)
    loss.backward()
    adapters = [p for name, p in model.named_parameters() if "lora_" in name]
    assert adapters and not any("visual" in name for name, _ in model.named_parameters() if "lora_" in name)
    norm = math.sqrt(sum(float((p.grad.double() ** 2).sum()) for p in adapters if p.grad is not None))
    assert run["records"][0]["loss"] == pytest.approx(float(loss.detach()), rel=RTOL)
    assert run["records"][0]["grad_norm"] == pytest.approx(norm, rel=RTOL)


def check_adapter_loads(run, model_folder, base_model, processor=PROCESSOR):
    """The written adapter loads into PEFT (the tower excluded) and gives step 2's logged loss."""
    config = json.loads((run["out"] / "adapter_config.json").read_text())
    assert config["exclude_modules"] == ".*visual.*"
    model = peft.PeftModel.from_pretrained(base_model, run["out"])
    # The trained B is loaded (not PEFT's zero init): every adapter of the text model is present.
    lora_b = [p for name, p in model.named_parameters() if "lora_B" in name]
    assert len(lora_b) == 14 and all(float(p.abs().sum()) > 0 for p in lora_b)
    with torch.no_grad():
        loss = batch_loss(model, model_folder, run["rows"], processor)
    records = run["records"]
    assert records[1]["loss"] == pytest.approx(float(loss), rel=RTOL)
    assert records[1]["loss"] != pytest.approx(records[0]["loss"], rel=1e-3)  # the step changed the model


def check_cuda_steps(run, surogate_bin, model_folder, tmp_path):
    """The CUDA backend's two steps against the CPU's: bf16 weights and activations against fp32, the
    loss to rel 1e-2, the gradient norm to 5e-2 (the tolerances of the model's CUDA tests, docs/vision.md)."""
    _, cuda = run_sft(surogate_bin, model_folder, tmp_path, 2, env=dict(os.environ), name="cuda")
    for step in range(2):
        assert cuda[step]["loss"] == pytest.approx(run["records"][step]["loss"], rel=1e-2)
        assert cuda[step]["grad_norm"] == pytest.approx(run["records"][step]["grad_norm"], rel=5e-2)


def test_step_one_loss_and_gradient_norm_are_transformers_and_peft(run, model_folder):
    check_step_one(run, model_folder, hf_model(model_folder))


def test_the_adapter_loads_into_peft_with_the_next_steps_loss(run, model_folder):
    check_adapter_loads(run, model_folder, hf_model(model_folder))


def eval_records(logged):
    return [record for record in logged if record.get("type") == "eval"]


def run_with_evaluation(surogate_bin, folder, tmp_path, env=CPU_ONLY, name="cpu"):
    """The run of the `run` fixture with both rows, in the other order, as validation_datasets."""
    held_out = tmp_path / "held_out.jsonl"
    held_out.write_text("".join(json.dumps(row) + "\n" for row in reversed(ROWS)))
    return run_sft(surogate_bin, folder, tmp_path, 2, env=env, name=f"{name}_eval",
                   extra=f"validation_datasets:\n  - path: {held_out}\n    type: conversation\n")


def check_evaluation(run, surogate_bin, model_folder, tmp_path, load=hf_model, processor=PROCESSOR):
    """The eval loss at step 0 is the base model's (B = 0) on the held-out rows, transformers' mean
    cross-entropy over their scored tokens; the final one (after step 2, whose LR is 0) is the
    written adapter's, which is step 2's training loss on the same two rows. fp32, rel 1e-5."""
    out, logged = run_with_evaluation(surogate_bin, model_folder, tmp_path)
    evals = eval_records(logged)
    assert [(record["step"], record["final"]) for record in evals] == [(0, False), (2, True)]
    with torch.no_grad():
        base = batch_loss(load(model_folder), model_folder, run["rows"], processor)
    scored = sum(sum(1 for label in row["labels"][1:] if label != -100) for row in run["rows"])
    assert evals[0]["eval_tokens"] == scored
    assert evals[0]["eval_loss"] == pytest.approx(float(base), rel=RTOL)
    steps = [record for record in logged if record.get("type") == "step"]
    assert steps[0]["loss"] == pytest.approx(run["records"][0]["loss"], rel=RTOL)  # evaluating changes no step
    assert evals[1]["eval_loss"] == pytest.approx(steps[1]["loss"], rel=RTOL)
    assert evals[1]["eval_loss"] != pytest.approx(evals[0]["eval_loss"], rel=1e-3)


def test_evaluation_runs_the_held_out_image_rows_through_the_vision_stage(run, surogate_bin, model_folder, tmp_path):
    check_evaluation(run, surogate_bin, model_folder, tmp_path)


def source_tensors(folder):
    from safetensors import safe_open
    tensors = {}
    for file in sorted(folder.glob("*.safetensors")):
        with safe_open(str(file), "pt") as handle:
            tensors.update({name: handle.get_tensor(name) for name in handle.keys()})
    return tensors


def assert_folder_as_the_source(written, source):
    """The files copied as they are and the tower's tensors byte for byte (names, dtypes, shapes:
    the patch embedding's 5-D Conv3d weight); every text tensor present under the source's name."""
    for name in ("config.json", "preprocessor_config.json", "tokenizer.json", "tokenizer_config.json"):
        assert (written / name).read_bytes() == (source / name).read_bytes(), name
    ours, theirs = source_tensors(written), source_tensors(source)
    assert set(ours) == set(theirs)
    tower = [name for name in theirs if "visual" in name]
    assert tower and any(theirs[name].dim() == 5 for name in tower)
    for name in tower:
        assert ours[name].dtype == theirs[name].dtype and ours[name].shape == theirs[name].shape, name
        assert torch.equal(ours[name], theirs[name]), name
    return ours, theirs


def merge_run(surogate_bin, model_folder, tmp_path):
    """The `run` fixture's run with merge_adapter: output_dir/merged."""
    out, logged = run_sft(surogate_bin, model_folder, tmp_path, 2, name="merge", extra="merge_adapter: true\n")
    return {"out": out, "records": [record for record in logged if record.get("type") == "step"]}


@pytest.fixture(scope="module")
def merged_run(surogate_bin, model_folder, tmp_path_factory):
    return merge_run(surogate_bin, model_folder, tmp_path_factory.mktemp("vision_merge_runs"))


def check_merged_folder(merged_run, run, model_folder, load=hf_model, processor=PROCESSOR):
    """The merged folder: the source's files and tower, the adapted text projections changed, and
    transformers' loss on the batch is the one the engine logs at step 2 (the merged adapter is the
    one step 2 used), rel 1e-5 (fp32)."""
    merged = merged_run["out"] / "merged"
    ours, theirs = assert_folder_as_the_source(merged, model_folder)
    changed = [name for name in theirs if "visual" not in name and not torch.equal(ours[name], theirs[name])]
    assert len(changed) == 14 and all("proj" in name for name in changed)  # the seven projections × 2 layers
    with torch.no_grad():
        loss = batch_loss(load(merged), merged, run["rows"], processor)
    assert merged_run["records"][1]["loss"] == pytest.approx(float(loss), rel=RTOL)


def test_merge_adapter_writes_a_folder_transformers_loads_with_the_engines_loss(merged_run, run, model_folder):
    check_merged_folder(merged_run, run, model_folder)


def check_surogate_merge(merged_run, surogate_bin, model_folder, tmp_path):
    """`surogate merge` on the folder and the run's adapter writes what merge_adapter wrote (the same
    fp32 sums: the adapter is saved in fp32), and refuses --model_definition for it by name."""
    output = tmp_path / "merged_cli"
    result = run_surogate(surogate_bin, "merge", "--model", model_folder, "--adapter", merged_run["out"],
                          "--output", output)
    assert result.returncode == 0, result.stderr
    assert "merged 14 adapted projections" in result.stdout
    ours, _ = assert_folder_as_the_source(output, model_folder)
    in_run = source_tensors(merged_run["out"] / "merged")
    for name, tensor in in_run.items():
        assert torch.equal(ours[name], tensor), name
    (tmp_path / "graph.json").write_text("{}")
    refused = run_surogate(surogate_bin, "merge", "--model", model_folder, "--adapter", merged_run["out"],
                           "--output", tmp_path / "other", "--model_definition", tmp_path / "graph.json")
    assert refused.returncode == 2 and "is a vision-language folder" in refused.stderr


def test_surogate_merge_merges_a_runs_adapter_into_the_folder(merged_run, surogate_bin, model_folder, tmp_path):
    check_surogate_merge(merged_run, surogate_bin, model_folder, tmp_path)


def check_full_fine_tuning(surogate_bin, model_folder, run, tmp_path, load=hf_model, processor=PROCESSOR):
    """lora: false: step 1's loss and gradient norm are transformers' with the tower's parameters
    frozen (requires_grad off: the text model's gradients only), rel 1e-5 (fp32); the folder the run
    writes loads in transformers and gives the loss the engine logs at step 2 (whose LR is 0, so the
    written weights are the ones step 2 used), rel 1e-5; its tower is the source's byte for byte and
    every text tensor was trained."""
    out, logged = run_sft(surogate_bin, model_folder, tmp_path, 2, name="full", extra="lora: false\n")
    records = [record for record in logged if record.get("type") == "step"]
    assert [record["lr"] for record in records] == [pytest.approx(1e-2), 0.0]
    model = load(model_folder)
    for name, parameter in model.named_parameters():
        parameter.requires_grad_("visual" not in name)
    loss = batch_loss(model, model_folder, run["rows"], processor)
    loss.backward()
    grads = [p.grad for name, p in model.named_parameters() if "visual" not in name and p.grad is not None]
    norm = math.sqrt(sum(float((grad.double() ** 2).sum()) for grad in grads))
    assert records[0]["loss"] == pytest.approx(float(loss.detach()), rel=RTOL)
    assert records[0]["grad_norm"] == pytest.approx(norm, rel=RTOL)
    assert not (out / "adapter_config.json").exists()
    ours, theirs = assert_folder_as_the_source(out, model_folder)
    assert all(not torch.equal(ours[name], theirs[name]) for name in theirs if "visual" not in name)
    with torch.no_grad():
        trained = batch_loss(load(out), out, run["rows"], processor)
    assert records[1]["loss"] == pytest.approx(float(trained), rel=RTOL)
    assert records[1]["loss"] != pytest.approx(records[0]["loss"], rel=1e-3)  # the step changed the model


def test_full_fine_tuning_trains_the_text_model_with_the_tower_frozen(surogate_bin, model_folder, run, tmp_path):
    check_full_fine_tuning(surogate_bin, model_folder, run, tmp_path)


def check_cuda_full_fine_tuning(surogate_bin, model_folder, tmp_path):
    _, cpu = run_sft(surogate_bin, model_folder, tmp_path, 2, name="full_cpu", extra="lora: false\n")
    _, cuda = run_sft(surogate_bin, model_folder, tmp_path, 2, env=dict(os.environ), name="full_cuda",
                      extra="lora: false\n")
    cpu, cuda = ([record for record in logged if record.get("type") == "step"] for logged in (cpu, cuda))
    # bf16 weights and activations against fp32: the loss to rel 1e-2, the gradient norm to 5e-2
    # (the tolerances of the LoRA run above).
    for step in range(2):
        assert cuda[step]["loss"] == pytest.approx(cpu[step]["loss"], rel=1e-2)
        assert cuda[step]["grad_norm"] == pytest.approx(cpu[step]["grad_norm"], rel=5e-2)


@pytest.mark.skipif(not gpu_visible(), reason="needs a GPU")
def test_the_cuda_backends_full_fine_tuning_is_the_cpus_within_bf16(surogate_bin, model_folder, tmp_path):
    check_cuda_full_fine_tuning(surogate_bin, model_folder, tmp_path)


def check_cuda_evaluator(surogate_bin, model_folder, tmp_path):
    _, cpu = run_with_evaluation(surogate_bin, model_folder, tmp_path)
    _, cuda = run_with_evaluation(surogate_bin, model_folder, tmp_path, env=dict(os.environ), name="cuda")
    # bf16 weights and activations against fp32: the loss to rel 1e-2 (the model's CUDA tolerance).
    for ours, theirs in zip(eval_records(cuda), eval_records(cpu), strict=True):
        assert ours["eval_tokens"] == theirs["eval_tokens"]
        assert ours["eval_loss"] == pytest.approx(theirs["eval_loss"], rel=1e-2)


@pytest.mark.skipif(not gpu_visible(), reason="needs a GPU")
def test_the_cuda_evaluator_is_the_cpus_within_bf16(surogate_bin, model_folder, tmp_path):
    check_cuda_evaluator(surogate_bin, model_folder, tmp_path)


@pytest.mark.skipif(not gpu_visible(), reason="needs a GPU")
def test_the_cuda_backends_step_one_is_the_cpus_within_bf16(run, surogate_bin, model_folder, tmp_path):
    check_cuda_steps(run, surogate_bin, model_folder, tmp_path)


def dry_run(surogate_bin, model_folder, tmp_path, *flags, batch=1):
    config = tmp_path / f"dry{batch}.yaml"
    config.write_text(f"model: {model_folder}\noutput_dir: {tmp_path / 'out'}\nsequence_len: 128\n"
                      f"validation_split_ratio: 0\nper_device_train_batch_size: {batch}\n"
                      f"datasets:\n  - path: {tmp_path / 'rows.jsonl'}\n    type: conversation\n")
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    return run_surogate(surogate_bin, "sft", config, "--dry-run", *flags, env=CPU_ONLY)


def test_dry_run_plans_the_tower_from_the_datas_images(surogate_bin, model_folder, tmp_path):
    """--dry-run reads the training rows the run would train on (tokenized in memory: no token cache is
    written) and plans the tower for per_device_train_batch_size × the most patches one packed row holds: the two
    rows pack into one, photo.jpg resized to 48 × 32 (12 × 8 = 96 patches of 4 pixels) and
    rgb_small.png to 40 × 24 (10 × 6 = 60): 156. The activations scale with the batch."""
    arenas = []
    for batch in (1, 4):
        result = dry_run(surogate_bin, model_folder, tmp_path, batch=batch)
        assert result.returncode == 0, result.stderr
        assert "configuration is valid (dry run, nothing trained)" in result.stdout
        assert (f"# vision tower planned for {156 * batch} patches: per_device_train_batch_size {batch} × 156, the "
                "most patches one packed row of the training data holds (2 images in 1 rows, resized under "
                "max_pixels 2048") in result.stdout, result.stdout
        line = next(line for line in result.stdout.splitlines() if "activations (planned arena)" in line)
        arenas.append(float(line.split()[-2]))
    assert arenas[1] > 3 * arenas[0]
    assert not (tmp_path / "out" / "tokenized").exists()  # a dry run reads, it writes no token cache
    # max_pixels 512: both images 24 × 16 (6 × 4 = 24 patches each).
    result = dry_run(surogate_bin, model_folder, tmp_path, "--max_pixels=512")
    assert result.returncode == 0, result.stderr
    assert "# vision tower planned for 48 patches: per_device_train_batch_size 1 × 48" in result.stdout, result.stdout


def test_dry_run_counts_the_evaluator_of_a_run_that_evaluates(surogate_bin, model_folder, tmp_path):
    """With evaluation the dry run plans the evaluator's forward of the same model (at the training rows'
    patch count, as training's): its arena is a category of the prediction, more than zero."""
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    config = tmp_path / "dry_eval.yaml"
    config.write_text(f"model: {model_folder}\noutput_dir: {tmp_path / 'out'}\nsequence_len: 128\n"
                      f"validation_split_ratio: 0.5\nper_device_train_batch_size: 2\n"
                      f"datasets:\n  - path: {tmp_path / 'rows.jsonl'}\n    type: conversation\n")
    result = run_surogate(surogate_bin, "sft", config, "--dry-run", env=CPU_ONLY)
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if "evaluation (outside the training's memory)" in line)
    assert float(line.split()[-2]) > 0, line
