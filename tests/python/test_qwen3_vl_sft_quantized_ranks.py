"""QLoRA, fp8_hybrid and data-parallel ranks on a Qwen3-VL folder: the checks of
test_vision_sft_quantized.py and test_vision_sft_ranks.py on test_qwen3_vl_sft.py's tiny random
model (DeepStack after tower blocks [1, 0], interleaved M-RoPE), LoRA only (Qwen3-VL's full
fine-tuning, merge_adapter and evaluation are not wired yet), on the CPU backend:
- QLoRA (NF4 and FP8 blocks) trains exactly as LoRA on the folder with the format's rounded text
  projections and the source's tower and DeepStack mergers;
- fp8_hybrid puts the text model's 14 projections in FP8 and tracks the fp32 run within 1 %;
- 2 CPU ranks with accumulation 1 match one rank with accumulation 2 (losses and gradient norms
  within 2e-4 relative, adapters within 5e-5, as for Qwen2.5-VL).
"""
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from test_qwen3_vl_sft import model_folder  # noqa: E402,F401  (the fixture)
from test_vision_sft_quantized import check_fp8_hybrid, check_qlora_against_rounded, full_precision_lora  # noqa: E402,F401
from test_vision_sft_ranks import WEIGHTS, largest_difference, one_and_two_ranks  # noqa: E402


@pytest.mark.parametrize("mode", ["qlora_bnb", "qlora_fp8"])
def test_qlora_trains_exactly_as_lora_on_the_rounded_text_projections(mode, surogate_bin, model_folder,  # noqa: F811
                                                                      full_precision_lora, tmp_path):  # noqa: F811
    check_qlora_against_rounded(surogate_bin, model_folder, tmp_path, mode, full_precision_lora)


def test_fp8_hybrid_puts_the_text_projections_in_fp8_and_tracks_the_fp32_run(surogate_bin, model_folder,  # noqa: F811
                                                                             tmp_path):
    check_fp8_hybrid(surogate_bin, model_folder, tmp_path, "lora: true\n")


def test_two_ranks_lora_match_one_rank(surogate_bin, model_folder, tmp_path):  # noqa: F811
    one, two = one_and_two_ranks(surogate_bin, model_folder, tmp_path, "lora", {"lora_dropout": "0.05"})
    assert largest_difference(one, two, "adapter_model.safetensors") < WEIGHTS
