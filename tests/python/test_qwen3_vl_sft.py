"""`surogate sft` on a Qwen3-VL folder (docs/vision.md, "Training"): LoRA on the Qwen3 text model,
the vision tower (learned position embeddings, DeepStack mergers) frozen, on the CPU backend in
fp32, against transformers + PEFT computing the same batch. test_vision_sft.py's checks on a tiny
random Qwen3VLForConditionalGeneration (tower depth 2 with DeepStack after blocks [1, 0], patch 4,
a 4 × 4 position grid resampled to each image; text hidden 24, 2 layers of head_dim 16 (the CUDA q/k norms need a multiple of 8),
interleaved M-RoPE sections [4, 2, 2]; the real Qwen tokenizer's vocabulary), the processor
Qwen3-VL's (mean = std = 0.5) at patch 4:

- step 1's loss is transformers' and its gradient norm PEFT's (B = 0), rel 1e-5 (fp32);
- the PEFT adapter the run writes loads with PeftModel.from_pretrained (the tower excluded) and
  gives the loss the engine logs at step 2, rel 1e-5;
- evaluation (both rows as validation_datasets): the evaluator's graph at the held-out rows' patch
  count, its DeepStack index and interpolation taps bound: the eval loss at step 0 is transformers'
  (B = 0) and the final one step 2's training loss, rel 1e-5;
- merge_adapter: the merged folder loads with Qwen3VLForConditionalGeneration.from_pretrained and
  gives step 2's loss, rel 1e-5, its tower (position embedding, DeepStack mergers, 5-D patch
  embedding) the source's byte for byte; `surogate merge` writes the same tensors bit for bit;
- full fine-tuning (lora: false): step 1's loss and gradient norm are transformers' with the tower's
  requires_grad off, the written folder loads and gives step 2's loss (rel 1e-5), its tower the
  source's byte for byte;
- with a GPU: the CUDA backend's two steps, its eval losses and its full fine-tuning steps are the
  CPU's within bf16 tolerances.
"""

import pytest

from conftest import gpu_visible, load_script

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
peft = pytest.importorskip("peft")
pytest.importorskip("PIL")
pytest.importorskip("safetensors")
from test_vision_sft import (TOKENS, check_adapter_loads, check_cuda_evaluator,  # noqa: E402
                             check_cuda_full_fine_tuning, check_cuda_steps, check_evaluation, check_full_fine_tuning,
                             check_merged_folder, check_step_one, check_surogate_merge, engine_rows, merge_run,
                             run_sft, write_model_folder)

PROCESSOR = {"image_processor_type": "Qwen2VLImageProcessor", "do_resize": True, "resample": 3, "do_rescale": True,
             "rescale_factor": 1 / 255, "do_normalize": True, "do_convert_rgb": True,
             "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
             "min_pixels": 256, "max_pixels": 2048, "patch_size": 4, "temporal_patch_size": 2, "merge_size": 2}


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory, tokenizers_dir):
    return tiny_qwen3_vl(tmp_path_factory.mktemp("qwen3_vl_sft") / "qwen3_vl", tokenizers_dir)


def tiny_qwen3_vl(folder, tokenizers_dir):
    """The tiny random Qwen3-VL described above, written to `folder`."""
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration
    folder.mkdir()
    vision = dict(depth=2, hidden_size=16, intermediate_size=32, num_heads=2, out_hidden_size=24, patch_size=4,
                  spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=16,
                  deepstack_visual_indexes=[1, 0])
    text = dict(hidden_size=24, intermediate_size=48, num_hidden_layers=2, num_attention_heads=2,
                num_key_value_heads=1, head_dim=16, vocab_size=151936, max_position_embeddings=512,
                rms_norm_eps=1e-6,
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 2, 2],
                                 "mrope_interleaved": True})
    config = Qwen3VLConfig(vision_config=vision, text_config=text, **TOKENS)
    config.architectures = ["Qwen3VLForConditionalGeneration"]
    torch.manual_seed(0)
    model = load_script("make_qwen3_vision_tower_fixtures").randomize(Qwen3VLForConditionalGeneration(config).float())
    return write_model_folder(folder, config, model, PROCESSOR, tokenizers_dir)


def hf_model(folder):
    from transformers import Qwen3VLForConditionalGeneration
    model = Qwen3VLForConditionalGeneration.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager")
    return model.eval()


@pytest.fixture(scope="module")
def run(surogate_bin, model_folder, tmp_path_factory, tokenizers_dir):
    """Two steps on the same micro-batch, as test_vision_sft.py's (step 2's LR is 0)."""
    tmp_path = tmp_path_factory.mktemp("qwen3_vl_sft_runs")
    out, records = run_sft(surogate_bin, model_folder, tmp_path, 2)
    assert [record["lr"] for record in records] == [pytest.approx(1e-2), 0.0]
    return {"out": out, "records": records, "rows": engine_rows(model_folder, tokenizers_dir, tmp_path)}


def test_step_one_loss_and_gradient_norm_are_transformers_and_peft(run, model_folder):
    check_step_one(run, model_folder, hf_model(model_folder), PROCESSOR)


def test_the_adapter_loads_into_peft_with_the_next_steps_loss(run, model_folder):
    check_adapter_loads(run, model_folder, hf_model(model_folder), PROCESSOR)


@pytest.mark.skipif(not gpu_visible(), reason="needs a GPU")
def test_the_cuda_backends_steps_are_the_cpus_within_bf16(run, surogate_bin, model_folder, tmp_path):
    check_cuda_steps(run, surogate_bin, model_folder, tmp_path)


def test_evaluation_runs_the_held_out_image_rows_through_the_qwen3_vl_graph(run, surogate_bin, model_folder, tmp_path):
    check_evaluation(run, surogate_bin, model_folder, tmp_path, hf_model, PROCESSOR)


@pytest.fixture(scope="module")
def merged_run(surogate_bin, model_folder, tmp_path_factory):
    return merge_run(surogate_bin, model_folder, tmp_path_factory.mktemp("qwen3_vl_merge_runs"))


def test_merge_adapter_writes_a_folder_transformers_loads_with_the_engines_loss(merged_run, run, model_folder):
    check_merged_folder(merged_run, run, model_folder, hf_model, PROCESSOR)


def test_surogate_merge_merges_a_runs_adapter_into_the_folder(merged_run, surogate_bin, model_folder, tmp_path):
    check_surogate_merge(merged_run, surogate_bin, model_folder, tmp_path)


def test_full_fine_tuning_trains_the_text_model_with_the_tower_frozen(surogate_bin, model_folder, run, tmp_path):
    check_full_fine_tuning(surogate_bin, model_folder, run, tmp_path, hf_model, PROCESSOR)


@pytest.mark.skipif(not gpu_visible(), reason="needs a GPU")
def test_the_cuda_evaluator_is_the_cpus_within_bf16(surogate_bin, model_folder, tmp_path):
    check_cuda_evaluator(surogate_bin, model_folder, tmp_path)


@pytest.mark.skipif(not gpu_visible(), reason="needs a GPU")
def test_the_cuda_backends_full_fine_tuning_is_the_cpus_within_bf16(surogate_bin, model_folder, tmp_path):
    check_cuda_full_fine_tuning(surogate_bin, model_folder, tmp_path)
