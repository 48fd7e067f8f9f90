"""`surogate sft/pt CONFIG --dry-run`: validation errors name file, line and option; exit codes."""
import json

from conftest import run_surogate
from tiny_model import TOKENIZER_CONFIG, char_tokenizer

# A complete (tiny) Hugging Face Llama config.json, as transformers writes one.
TINY_LLAMA = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 64, "hidden_size": 32,
    "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 128, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu",
    "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}


def write_run(tmp_path, extra=""):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(TINY_LLAMA))
    # --dry-run loads the tokenizer as training does.
    (model / "tokenizer.json").write_text(json.dumps(char_tokenizer()))
    (model / "tokenizer_config.json").write_text(json.dumps(TOKENIZER_CONFIG))
    (tmp_path / "data.jsonl").write_text('{"text": "hello"}\n')
    config = tmp_path / "config.yaml"
    config.write_text(f"model: {model}\ndatasets:\n  - path: {tmp_path / 'data.jsonl'}\n    type: text\n{extra}")
    return config


def test_dry_run_prints_the_resolved_config(surogate_bin, tmp_path):
    config = write_run(tmp_path, "learning_rate: 0.001\n")
    result = run_surogate(surogate_bin, "sft", config, "--dry-run", "--lora_rank=8")
    assert result.returncode == 0, result.stderr
    assert "learning_rate: 0.001" in result.stdout
    assert "lora_rank: 8" in result.stdout
    assert "checkpoint_dir: output" in result.stdout


def test_unknown_option_is_a_user_error_with_a_suggestion(surogate_bin, tmp_path):
    config = write_run(tmp_path, "warmup_stpes: 10\n")
    result = run_surogate(surogate_bin, "sft", config, "--dry-run")
    assert result.returncode == 2
    assert f"{config}:5" in result.stderr
    assert "did you mean 'warmup_steps'?" in result.stderr


def test_missing_dataset_and_model_are_named(surogate_bin, tmp_path):
    config = write_run(tmp_path)
    result = run_surogate(surogate_bin, "sft", config, "--dry-run", f"--datasets.0.path={tmp_path / 'nope.jsonl'}")
    assert result.returncode == 2
    assert "datasets[0].path" in result.stderr and "does not exist" in result.stderr
    result = run_surogate(surogate_bin, "sft", config, "--dry-run", f"--model={tmp_path / 'nomodel'}")
    assert result.returncode == 2
    assert "not a local folder" in result.stderr


def test_pt_needs_text_datasets(surogate_bin, tmp_path):
    config = write_run(tmp_path)
    assert run_surogate(surogate_bin, "pt", config, "--dry-run").returncode == 0
    result = run_surogate(surogate_bin, "pt", config, "--dry-run", "--datasets.0.type=conversation")
    assert result.returncode == 2
    assert "use type: text" in result.stderr


def test_vision_options_for_a_text_model_are_rejected_by_name(surogate_bin, tmp_path):
    # norm_bbox and max_pixels are implemented (docs/vision.md); this folder is a text model, so
    # each is refused by name.
    config = write_run(tmp_path, "norm_bbox: norm1000\n")
    result = run_surogate(surogate_bin, "sft", config, "--dry-run")
    assert result.returncode == 2
    assert "norm_bbox applies to vision-language models" in result.stderr
    result = run_surogate(surogate_bin, "sft", config, "--dry-run", "--norm_bbox=null", "--max_pixels=1000000")
    assert result.returncode == 2
    assert "max_pixels applies to vision-language models" in result.stderr
    result = run_surogate(surogate_bin, "sft", config, "--dry-run", "--norm_bbox=norm100")
    assert result.returncode == 2
    assert "norm_bbox" in result.stderr and "norm1000" in result.stderr
    # freeze_vision, set at all (either value), is refused for a text model by its feature-support row.
    for value in ("true", "false"):
        result = run_surogate(surogate_bin, "sft", config, "--dry-run", "--norm_bbox=null", f"--freeze_vision={value}")
        assert result.returncode == 2, result.stdout
        assert "freeze_vision applies to vision-language models" in result.stderr, result.stderr
        assert "command line" in result.stderr


def test_override_spellings(surogate_bin, tmp_path):
    config = write_run(tmp_path)
    result = run_surogate(surogate_bin, "sft", config, "--dry-run", "--lora-rank", "4", "--max_steps", "-1",
                          "--distributed.ray_address=local", "--lora_target_modules=[q_proj,v_proj]")
    assert result.returncode == 0, result.stderr
    assert "lora_rank: 4" in result.stdout
    assert "max_steps: -1" in result.stdout
    assert "ray_address: local" in result.stdout
    assert "- q_proj" in result.stdout and "- v_proj" in result.stdout
    result = run_surogate(surogate_bin, "sft", config, "--dry-run", "--distributed.num_node=2")
    assert result.returncode == 2
    assert "did you mean 'distributed.num_nodes'?" in result.stderr


def test_model_folder_needs_a_valid_config_json(surogate_bin, tmp_path):
    config = write_run(tmp_path)
    (tmp_path / "model" / "config.json").write_text("{not json")
    result = run_surogate(surogate_bin, "sft", config, "--dry-run")
    assert result.returncode == 2
    assert "config.json" in result.stderr
    (tmp_path / "model" / "config.json").write_text(json.dumps({**TINY_LLAMA, "architectures": ["GPT2LMHeadModel"]}))
    result = run_surogate(surogate_bin, "sft", config, "--dry-run")
    assert result.returncode == 2
    assert "config.json" in result.stderr and "GPT2LMHeadModel" in result.stderr
    (tmp_path / "model" / "config.json").unlink()
    result = run_surogate(surogate_bin, "sft", config, "--dry-run")
    assert result.returncode == 2
    assert "config.json: not found" in result.stderr


def test_missing_config_file_and_help(surogate_bin, tmp_path):
    result = run_surogate(surogate_bin, "sft", tmp_path / "absent.yaml", "--dry-run")
    assert result.returncode == 2
    assert "absent.yaml" in result.stderr
    result = run_surogate(surogate_bin, "sft", "--help")
    assert result.returncode == 0
    assert "--dry-run" in result.stdout


def test_constraint_errors_reach_the_user(surogate_bin, tmp_path):
    config = write_run(tmp_path, "qlora_block_size: 100\n")
    result = run_surogate(surogate_bin, "sft", config, "--dry-run")
    assert result.returncode == 2
    assert f"{config}:5: option 'qlora_block_size' must be 64, 128 or 256" in result.stderr
    other = tmp_path / "other"
    other.mkdir()
    config = write_run(other, "lr_scheduler_type: cosin\n")
    result = run_surogate(surogate_bin, "sft", config, "--dry-run")
    assert result.returncode == 2
    assert "not one of: linear, cosine, wsd (did you mean 'cosine'?)" in result.stderr


def test_master_and_gradient_dtype_bf16_and_fp32_are_accepted_fp8_needs_the_fp8_recipe(surogate_bin, tmp_path):
    # bf16 is honoured on the CUDA backend (the CPU backend refuses it when training starts); the fp8
    # gradient dtypes are the fp8_hybrid recipe's backward formats.
    cases = {"fp32": "master_dtype: fp32\ngradient_dtype: fp32\n", "bf16": "master_dtype: bf16\ngradient_dtype: bf16\n",
             "fp8": "gradient_dtype: fp8_e4m3\n"}
    results = {}
    for name, extra in cases.items():
        (tmp_path / name).mkdir()
        results[name] = run_surogate(surogate_bin, "sft", write_run(tmp_path / name, extra), "--dry-run")
    assert results["fp32"].returncode == 0, results["fp32"].stderr
    assert results["bf16"].returncode == 0, results["bf16"].stderr
    assert results["fp8"].returncode == 2 and "set recipe: fp8_hybrid" in results["fp8"].stderr, results["fp8"].stderr
