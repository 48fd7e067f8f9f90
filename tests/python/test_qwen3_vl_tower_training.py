"""`freeze_vision: false` on a Qwen3-VL folder (docs/vision.md, "Training"): the vision tower (patch
embedding, learned position embedding, blocks), the merger and the DeepStack mergers train, on the
CPU backend in fp32, against transformers + PEFT computing the same batch.

test_vision_tower_training.py's checks on test_qwen3_vl_sft.py's tiny random Qwen3-VL (tower depth 2
with DeepStack mergers after blocks [1, 0], a 4 × 4 position grid) with a Qwen3 text model of 3
layers, and the same two image rows in one micro-batch, two steps (step 2 at LR 0). Three layers:
DeepStack feature i is added to the image tokens' hidden states after text layer i, and one added
after the last layer reaches only the image tokens' own logits, which are never scored, so its
merger would get no gradient (in transformers as here); with 3 layers both mergers train.

- full fine-tuning: step 1's loss and gradient norm are transformers' with every parameter trainable,
  rel 1e-5; the written folder holds every tensor under the source's name, dtype and shape (the 5-D
  patch embedding, the position embedding, the DeepStack mergers), each one changed, and loads in
  transformers with step 2's loss (rel 1e-5);
- LoRA with all-linear: 35 projections (21 of the text model, 14 of the tower: per block attn.qkv,
  attn.proj, mlp.linear_fc1, mlp.linear_fc2; linear_fc1 / linear_fc2 of the merger and of both
  DeepStack mergers); PeftModel.from_pretrained puts adapters exactly on the file's modules; step 1's loss is
  transformers' and its gradient norm PEFT's with the run's A and B = 0, rel 1e-5, every tower B
  with a gradient; the adapter, the merge_adapter folder and `surogate merge`'s give step 2's loss;
- linear_fc1 in lora_target_modules is refused while the tower is frozen;
- --dry-run predicts a larger peak with freeze_vision: false (full fine-tuning and LoRA);
- with a GPU: the CUDA backend's two steps are the CPU's within bf16 tolerances.
"""
import pytest

from conftest import gpu_visible

pytest.importorskip("torch")
pytest.importorskip("peft")
pytest.importorskip("transformers")
from test_qwen3_vl_sft import PROCESSOR, hf_model, tiny_qwen3_vl  # noqa: E402
# The fixtures rows, full_run and lora_run run on this module's model_folder.
from test_vision_tower_training import (TRAIN_TOWER, Tower, assert_merged_folder, check_adapter_loss,  # noqa: E402,F401
                                        check_adapter_placement, check_dry_run_grows, check_full_folder,
                                        check_full_gradients, check_lora_gradients, check_surogate_merge,
                                        check_tower_module_refused_while_frozen, full_run, lora_run, rows,
                                        run_both_backends)

VISUAL = "base_model.model.model.visual"
# all-linear: the text model's seven per layer; per tower block qkv, proj, linear_fc1, linear_fc2; the
# merger's linear_fc1 / linear_fc2 and each of the two DeepStack mergers'.
LAYERS = 3
QWEN3_VL = Tower(hf_model, PROCESSOR, 7 * LAYERS, 4 * 2 + 2 + 2 * 2,
                 frozenset({"qkv", "proj", "linear_fc1", "linear_fc2", "q_proj", "gate_proj"}),
                 frozenset({f"{VISUAL}.blocks.1.attn.proj", f"{VISUAL}.blocks.0.mlp.linear_fc1",
                            f"{VISUAL}.merger.linear_fc2", f"{VISUAL}.deepstack_merger_list.1.linear_fc1",
                            "base_model.model.model.language_model.layers.2.mlp.down_proj"}))


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory, tokenizers_dir):
    return tiny_qwen3_vl(tmp_path_factory.mktemp("qwen3_vl_tower") / "qwen3_vl", tokenizers_dir, layers=LAYERS)


def test_full_fine_tuning_trains_the_tower_with_transformers_gradients(full_run, model_folder, rows):  # noqa: F811
    check_full_gradients(full_run, model_folder, rows, QWEN3_VL)


def test_full_fine_tuning_writes_the_trained_tower_transformers_loads(full_run, model_folder, rows):  # noqa: F811
    check_full_folder(full_run, model_folder, rows, QWEN3_VL)


def test_the_adapter_reaches_the_tower_and_mergers_and_peft_puts_it_where_ours_is(lora_run, model_folder):  # noqa: F811
    check_adapter_placement(lora_run, model_folder, QWEN3_VL)


def test_lora_step_one_gradient_norm_is_pefts_with_the_tower_adapted(lora_run, model_folder, rows):  # noqa: F811
    check_lora_gradients(lora_run, model_folder, rows, QWEN3_VL)


def test_the_adapter_loads_into_peft_with_the_next_steps_loss(lora_run, model_folder, rows):  # noqa: F811
    check_adapter_loss(lora_run, model_folder, rows, QWEN3_VL)


def test_merge_adapter_merges_the_towers_adapters(lora_run, model_folder, rows):  # noqa: F811
    assert_merged_folder(lora_run["out"] / "merged", model_folder, lora_run["out"], rows,
                         lora_run["records"][1]["loss"], QWEN3_VL)


def test_surogate_merge_merges_the_towers_adapters(lora_run, surogate_bin, model_folder, rows, tmp_path):  # noqa: F811
    check_surogate_merge(lora_run, surogate_bin, model_folder, rows, tmp_path, QWEN3_VL)


def test_tower_module_names_need_a_trainable_tower(surogate_bin, model_folder, tmp_path):  # noqa: F811
    check_tower_module_refused_while_frozen(surogate_bin, model_folder, tmp_path, "linear_fc1")


@pytest.mark.parametrize("mode", ["--lora=false", "--lora=true"])
def test_dry_run_counts_the_towers_gradients_and_optimizer_state(surogate_bin, model_folder, tmp_path, mode):  # noqa: F811
    check_dry_run_grows(surogate_bin, model_folder, tmp_path, mode)


@pytest.mark.skipif(not gpu_visible(), reason="needs a GPU")
@pytest.mark.parametrize("mode", ["lora: false\n", "lora: true\n"])
def test_the_cuda_backend_trains_the_tower_as_the_cpu_within_bf16(surogate_bin, model_folder, tmp_path, mode):  # noqa: F811
    run_both_backends(surogate_bin, model_folder, tmp_path, mode + TRAIN_TOWER)
