"""`surogate sft/pt CONFIG --dry-run`: validation errors name file, line and option; exit codes."""
import json

from conftest import run_surogate


def write_run(tmp_path, extra=""):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
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


def test_training_without_dry_run_says_what_works(surogate_bin, tmp_path):
    config = write_run(tmp_path)
    result = run_surogate(surogate_bin, "sft", config)
    assert result.returncode == 2
    assert "--dry-run" in result.stderr


def test_not_implemented_option_is_rejected_by_name(surogate_bin, tmp_path):
    config = write_run(tmp_path, "report_to: [wandb]\n")
    result = run_surogate(surogate_bin, "sft", config, "--dry-run")
    assert result.returncode == 2
    assert "'report_to' is valid but not implemented yet" in result.stderr
