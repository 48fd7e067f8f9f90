"""`freeze_vision: false` on a Qwen2.5-VL folder (docs/vision.md, "Training"): the vision tower and the
merger train, on the CPU backend in fp32, against transformers + PEFT computing the same batch.

The model, rows and run settings are test_vision_sft.py's (a tiny random Qwen2.5-VL with the real
tokenizer; two image rows, one scaled down and one up, in one micro-batch of two rows; two steps, the
second at LR 0 under the linear schedule, so what a run writes is what step 2 computed with).

- Full fine-tuning: step 1's loss and gradient norm are transformers' with every parameter trainable
  (the tower's and the merger's included), rel 1e-5 (fp32; the sums run in other orders); the
  written folder holds every tensor under the source's name, dtype and shape (the 5-D patch
  embedding), each one trained, and loads in transformers with step 2's loss (rel 1e-5).
- LoRA with all-linear: the adapter reaches the tower's qkv, proj, gate/up/down and the merger's
  mlp.0 / mlp.2 (26 projections: 14 of the text model, 5 × 2 blocks, 2 of the merger);
  PeftModel.from_pretrained puts adapters on exactly those modules; step 1's loss is transformers'
  and its gradient norm PEFT's with the run's A and B = 0 (the tower's B get gradients: their A
  is not zero), rel 1e-5; the adapter gives step 2's loss; merge_adapter's folder and `surogate
  merge`'s give it too, with exactly the adapted projections changed.
- --dry-run counts the tower's gradients and optimizer state: a larger prediction.
- With a GPU: the CUDA backend's two steps are the CPU's within bf16 tolerances.
"""
import json
import math
import os
from dataclasses import dataclass
from typing import Callable

import pytest

from conftest import gpu_visible, run_surogate
from test_vision_sft import (CPU_ONLY, PROCESSOR, ROWS, RTOL, batch_loss, engine_rows, hf_model,  # noqa: F401
                             model_folder, run_sft, source_tensors)

torch = pytest.importorskip("torch")
peft = pytest.importorskip("peft")

TRAIN_TOWER = "freeze_vision: false\n"


@dataclass(frozen=True)
class Tower:
    """A family's tiny model as the checks below need it: its transformers loader and processor, and
    what all-linear adapts on it."""
    load: Callable
    processor: dict
    text_adapters: int
    tower_adapters: int
    target_modules: frozenset  # some names adapter_config.json's target_modules must hold
    modules: frozenset         # some module paths the adapter's keys must hold (a block's, a merger's)


# The projections all-linear adapts: the text model's seven per layer, the tower's five per block
# (attn.qkv, attn.proj, mlp.gate_proj / up_proj / down_proj), the merger's two.
QWEN2_5_VL = Tower(hf_model, PROCESSOR, 7 * 2, 5 * 2 + 2,
                   frozenset({"qkv", "proj", "mlp.0", "mlp.2", "q_proj", "gate_proj"}),
                   frozenset({"base_model.model.model.visual.blocks.1.attn.qkv",
                              "base_model.model.model.visual.merger.mlp.2",
                              "base_model.model.model.language_model.layers.0.self_attn.q_proj"}))


def steps_of(logged):
    return [record for record in logged if record.get("type") == "step"]


def tower_run(surogate_bin, model_folder, tmp_path, name, extra):  # noqa: F811
    """Two steps with the tower trainable (step 2's LR is 0)."""
    out, logged = run_sft(surogate_bin, model_folder, tmp_path, 2, name=name, extra=extra + TRAIN_TOWER)
    records = steps_of(logged)
    assert [record["lr"] for record in records] == [pytest.approx(1e-2), 0.0]
    return {"out": out, "records": records}


@pytest.fixture(scope="module")
def rows(model_folder, tokenizers_dir, tmp_path_factory):  # noqa: F811
    return engine_rows(model_folder, tokenizers_dir, tmp_path_factory.mktemp("tower_rows"))


@pytest.fixture(scope="module")
def full_run(surogate_bin, model_folder, tmp_path_factory):  # noqa: F811
    return tower_run(surogate_bin, model_folder, tmp_path_factory.mktemp("tower_full"), "full", "lora: false\n")


@pytest.fixture(scope="module")
def lora_run(surogate_bin, model_folder, tmp_path_factory):  # noqa: F811
    """LoRA (all-linear) with the tower adapted, merge_adapter on: the adapter in out, the merged folder in out/merged."""
    return tower_run(surogate_bin, model_folder, tmp_path_factory.mktemp("tower_lora"), "lora", "merge_adapter: true\n")


def check_full_gradients(full_run, model_folder, rows, tower):  # noqa: F811
    """Step 1's loss and gradient norm are transformers' with every parameter trainable, rel 1e-5."""
    model = tower.load(model_folder)
    for parameter in model.parameters():
        parameter.requires_grad_(True)
    loss = batch_loss(model, model_folder, rows, tower.processor)
    loss.backward()
    grads = {name: p.grad for name, p in model.named_parameters() if p.grad is not None}
    assert any("visual" in name for name in grads) and any("merger" in name for name in grads)
    norm = math.sqrt(sum(float((grad.double() ** 2).sum()) for grad in grads.values()))
    records = full_run["records"]
    assert records[0]["loss"] == pytest.approx(float(loss.detach()), rel=RTOL)
    assert records[0]["grad_norm"] == pytest.approx(norm, rel=RTOL)


def check_full_folder(full_run, model_folder, rows, tower):  # noqa: F811
    """Every tensor under the source's name, dtype and shape (the 5-D patch embedding), each one
    trained; transformers' loss on the written folder is step 2's, rel 1e-5."""
    out = full_run["out"]
    assert not (out / "adapter_config.json").exists()
    for name in ("config.json", "preprocessor_config.json", "tokenizer.json"):
        assert (out / name).read_bytes() == (model_folder / name).read_bytes(), name
    ours, theirs = source_tensors(out), source_tensors(model_folder)
    assert set(ours) == set(theirs)
    assert any(tensor.dim() == 5 for name, tensor in theirs.items() if "patch_embed" in name)
    for name, tensor in theirs.items():
        assert ours[name].dtype == tensor.dtype and ours[name].shape == tensor.shape, name
        assert not torch.equal(ours[name], tensor), f"{name} was not trained"
    with torch.no_grad():
        trained = batch_loss(tower.load(out), out, rows, tower.processor)
    records = full_run["records"]
    assert records[1]["loss"] == pytest.approx(float(trained), rel=RTOL)
    assert records[1]["loss"] != pytest.approx(records[0]["loss"], rel=1e-3)


def test_full_fine_tuning_trains_the_tower_with_transformers_gradients(full_run, model_folder, rows):  # noqa: F811
    check_full_gradients(full_run, model_folder, rows, QWEN2_5_VL)


def test_full_fine_tuning_writes_the_trained_tower_transformers_loads(full_run, model_folder, rows):  # noqa: F811
    check_full_folder(full_run, model_folder, rows, QWEN2_5_VL)


def adapter_keys(folder):
    from safetensors import safe_open
    with safe_open(str(folder / "adapter_model.safetensors"), "pt") as handle:
        return set(handle.keys())


def check_adapter_placement(lora_run, model_folder, tower):  # noqa: F811
    """adapter_config.json excludes the patch embedding only; PeftModel.from_pretrained puts adapters
    on exactly the modules of the file's keys."""
    out = lora_run["out"]
    config = json.loads((out / "adapter_config.json").read_text())
    assert config["exclude_modules"] == ".*visual\\.patch_embed.*"
    assert tower.target_modules <= set(config["target_modules"])
    keys = adapter_keys(out)
    modules = {key.rsplit(".lora_", 1)[0] for key in keys}
    assert len(modules) == tower.text_adapters + tower.tower_adapters
    assert tower.modules <= modules
    model = peft.PeftModel.from_pretrained(tower.load(model_folder), out)
    peft_keys = {name.replace(".default", "") for name, _ in model.named_parameters() if "lora_" in name}
    assert peft_keys == keys


def check_lora_gradients(lora_run, model_folder, rows, tower):  # noqa: F811
    """Step 1's loss is transformers' and its gradient norm PEFT's with the run's A and B = 0 (every
    tower B gets a gradient: its A is not zero), rel 1e-5."""
    model = peft.PeftModel.from_pretrained(tower.load(model_folder), lora_run["out"], is_trainable=True)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.zero_()
    loss = batch_loss(model, model_folder, rows, tower.processor)
    loss.backward()
    adapters = {name: p for name, p in model.named_parameters() if "lora_" in name}
    tower_b = [p for name, p in adapters.items() if "visual" in name and "lora_B" in name]
    assert len(tower_b) == tower.tower_adapters and all(float(p.grad.abs().sum()) > 0 for p in tower_b)
    norm = math.sqrt(sum(float((p.grad.double() ** 2).sum()) for p in adapters.values() if p.grad is not None))
    records = lora_run["records"]
    assert records[0]["loss"] == pytest.approx(float(loss.detach()), rel=RTOL)
    assert records[0]["grad_norm"] == pytest.approx(norm, rel=RTOL)


def check_adapter_loss(lora_run, model_folder, rows, tower):  # noqa: F811
    """The written adapter (every B trained) gives step 2's loss in PEFT, rel 1e-5."""
    model = peft.PeftModel.from_pretrained(tower.load(model_folder), lora_run["out"])
    lora_b = [p for name, p in model.named_parameters() if "lora_B" in name]
    assert len(lora_b) == tower.text_adapters + tower.tower_adapters and all(float(p.abs().sum()) > 0 for p in lora_b)
    with torch.no_grad():
        loss = batch_loss(model, model_folder, rows, tower.processor)
    records = lora_run["records"]
    assert records[1]["loss"] == pytest.approx(float(loss), rel=RTOL)
    assert records[1]["loss"] != pytest.approx(records[0]["loss"], rel=1e-3)


def test_the_adapter_reaches_the_tower_and_peft_puts_it_where_ours_is(lora_run, model_folder):  # noqa: F811
    check_adapter_placement(lora_run, model_folder, QWEN2_5_VL)


def test_lora_step_one_gradient_norm_is_pefts_with_the_tower_adapted(lora_run, model_folder, rows):  # noqa: F811
    check_lora_gradients(lora_run, model_folder, rows, QWEN2_5_VL)


def test_the_adapter_loads_into_peft_with_the_next_steps_loss(lora_run, model_folder, rows):  # noqa: F811
    check_adapter_loss(lora_run, model_folder, rows, QWEN2_5_VL)


def adapted_weight_names(adapter_dir):
    """The checkpoint names of the adapted weights (model.language_model.* / model.visual.*)."""
    return {key.rsplit(".lora_", 1)[0].removeprefix("base_model.model.") + ".weight" for key in adapter_keys(adapter_dir)}


def assert_merged_folder(merged, model_folder, adapter_dir, rows, step_two_loss, tower):  # noqa: F811
    """The files copied, every tensor under the source's name, dtype and shape; exactly the adapted
    projections changed (the tower's and the merger's among them); transformers' loss is step 2's."""
    for name in ("config.json", "preprocessor_config.json", "tokenizer.json"):
        assert (merged / name).read_bytes() == (model_folder / name).read_bytes(), name
    ours, theirs = source_tensors(merged), source_tensors(model_folder)
    assert set(ours) == set(theirs)
    for name, tensor in theirs.items():
        assert ours[name].dtype == tensor.dtype and ours[name].shape == tensor.shape, name
    changed = {name for name in theirs if not torch.equal(ours[name], theirs[name])}
    assert changed == adapted_weight_names(adapter_dir)
    assert sum("visual" in name for name in changed) == tower.tower_adapters
    with torch.no_grad():
        loss = batch_loss(tower.load(merged), merged, rows, tower.processor)
    assert step_two_loss == pytest.approx(float(loss), rel=RTOL)
    return ours


def check_surogate_merge(lora_run, surogate_bin, model_folder, rows, tmp_path, tower):  # noqa: F811
    """`surogate merge` on the run's adapter: merge_adapter's tensors bit for bit."""
    output = tmp_path / "merged_cli"
    result = run_surogate(surogate_bin, "merge", "--model", model_folder, "--adapter", lora_run["out"],
                          "--output", output)
    assert result.returncode == 0, result.stderr
    assert f"merged {tower.text_adapters + tower.tower_adapters} adapted projections" in result.stdout
    assert f"{tower.tower_adapters} of them on the vision tower" in result.stdout
    ours = assert_merged_folder(output, model_folder, lora_run["out"], rows, lora_run["records"][1]["loss"], tower)
    for name, tensor in source_tensors(lora_run["out"] / "merged").items():
        assert torch.equal(ours[name], tensor), name  # the same fp32 sums as merge_adapter's


def test_merge_adapter_merges_the_towers_adapters(lora_run, model_folder, rows):  # noqa: F811
    assert_merged_folder(lora_run["out"] / "merged", model_folder, lora_run["out"], rows,
                         lora_run["records"][1]["loss"], QWEN2_5_VL)


def test_surogate_merge_merges_the_towers_adapters(lora_run, surogate_bin, model_folder, rows, tmp_path):  # noqa: F811
    check_surogate_merge(lora_run, surogate_bin, model_folder, rows, tmp_path, QWEN2_5_VL)


def check_tower_module_refused_while_frozen(surogate_bin, model_folder, tmp_path, module):  # noqa: F811
    """With the tower frozen (the default) lora_target_modules names the text model's projections only."""
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    config = tmp_path / "frozen.yaml"
    config.write_text(f"model: {model_folder}\noutput_dir: {tmp_path / 'out'}\nsequence_len: 128\n"
                      f"validation_split_ratio: 0\nlora_target_modules: [q_proj, {module}]\n"
                      f"datasets:\n  - path: {tmp_path / 'rows.jsonl'}\n    type: conversation\n")
    result = run_surogate(surogate_bin, "sft", config, "--dry-run", env=CPU_ONLY)
    assert result.returncode == 2 and f"'{module}' is not a linear layer of this model" in result.stderr, result.stderr
    result = run_surogate(surogate_bin, "sft", config, "--dry-run", "--freeze_vision=false", env=CPU_ONLY)
    assert result.returncode == 0, result.stderr


def test_tower_module_names_need_a_trainable_tower(surogate_bin, model_folder, tmp_path):  # noqa: F811
    check_tower_module_refused_while_frozen(surogate_bin, model_folder, tmp_path, "qkv")


def predicted_peak(surogate_bin, model_folder, tmp_path, *flags):  # noqa: F811
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    config = tmp_path / "dry.yaml"
    config.write_text(f"model: {model_folder}\noutput_dir: {tmp_path / 'out'}\nsequence_len: 128\n"
                      "validation_split_ratio: 0\nper_device_train_batch_size: 1\n"
                      f"datasets:\n  - path: {tmp_path / 'rows.jsonl'}\n    type: conversation\n")
    result = run_surogate(surogate_bin, "sft", config, "--dry-run", *flags, env=CPU_ONLY)
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if "predicted peak" in line)
    return line


def peak_bytes(line):
    """The predicted peak's size in bytes ("predicted peak   12.3 MiB of ...")."""
    value, unit = line.split("predicted peak", 1)[1].split()[:2]
    return float(value) * {"B": 1, "KiB": 2 ** 10, "MiB": 2 ** 20, "GiB": 2 ** 30, "TiB": 2 ** 40}[unit]


def check_dry_run_grows(surogate_bin, model_folder, tmp_path, mode):  # noqa: F811
    """Full fine-tuning: the tower's gradients and AdamW moments; LoRA: its adapters' and the tower's
    backward. Either way the prediction with freeze_vision false is the larger one."""
    frozen = peak_bytes(predicted_peak(surogate_bin, model_folder, tmp_path, mode))
    trained = peak_bytes(predicted_peak(surogate_bin, model_folder, tmp_path, mode, "--freeze_vision=false"))
    assert trained > frozen


@pytest.mark.parametrize("mode", ["--lora=false", "--lora=true"])
def test_dry_run_counts_the_towers_gradients_and_optimizer_state(surogate_bin, model_folder, tmp_path, mode):  # noqa: F811
    check_dry_run_grows(surogate_bin, model_folder, tmp_path, mode)


def run_both_backends(surogate_bin, model_folder, tmp_path, extra):  # noqa: F811
    _, cpu = run_sft(surogate_bin, model_folder, tmp_path, 2, name="tower_cpu", extra=extra)
    _, cuda = run_sft(surogate_bin, model_folder, tmp_path, 2, env=dict(os.environ), name="tower_cuda", extra=extra)
    # bf16 weights and activations against fp32: the loss to rel 1e-2, the gradient norm to 5e-2
    # (the tolerances of test_vision_sft.py's CUDA cases).
    for cpu_step, cuda_step in zip(steps_of(cpu), steps_of(cuda), strict=True):
        assert cuda_step["loss"] == pytest.approx(cpu_step["loss"], rel=1e-2)
        assert cuda_step["grad_norm"] == pytest.approx(cpu_step["grad_norm"], rel=5e-2)


@pytest.mark.skipif(not gpu_visible(), reason="needs a GPU")
@pytest.mark.parametrize("mode", ["lora: false\n", "lora: true\n"])
def test_the_cuda_backend_trains_the_tower_as_the_cpu_within_bf16(surogate_bin, model_folder, tmp_path, mode):  # noqa: F811
    run_both_backends(surogate_bin, model_folder, tmp_path, mode + TRAIN_TOWER)
