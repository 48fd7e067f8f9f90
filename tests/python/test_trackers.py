"""report_to (wandb, aim) and log_gpu_util end to end on CPU, read back with the trackers' own SDKs:
wandb in offline mode (its run files read with `wandb leet inspect --json`), Aim in a local
repository (read with aim.Repo). Every step's loss / lr / grad norm / tokens per second and every
evaluation appear at the JSONL log's step numbers with the log's exact values, the run config and
name are there, a resumed run continues the same tracked runs, and a tracker that is missing or
fails costs one warning, never the run."""
import json
import os
import subprocess
import sys

import pytest

from conftest import REPO_ROOT, make_quickstart_example, quickstart_sft_config, run_surogate

wandb = pytest.importorskip("wandb", reason="scripts/install_deps.sh installs wandb")
aim = pytest.importorskip("aim", reason="scripts/install_deps.sh installs aim")

sys.path.insert(0, str(REPO_ROOT / "bench"))
from check_trackers import aim_run, expected_metrics, log_records, wandb_history, wandb_runs  # noqa: E402


def tracker_env(tmp_path, **extra):
    env = {key: value for key, value in os.environ.items() if not key.startswith(("WANDB_", "SUROGATE_PYTHON"))}
    env.update(HOME=str(tmp_path / "home"), WANDB_MODE="offline", WANDB_SILENT="true")
    env.update(extra)
    return env


def write_config(tmp_path, ex, out, extra="", **settings):
    return quickstart_sft_config(tmp_path / "config.yaml", ex / "model", out, ex, extra=extra, **settings)


def test_wandb_and_aim_record_the_runs_config_metrics_and_summary(surogate_bin, tmp_path):
    ex = make_quickstart_example(tmp_path)
    out = tmp_path / "out"
    repo = tmp_path / "aim-repo"
    config = write_config(tmp_path, ex, out, max_steps=4, eval_steps=2, report_to="[wandb, aim]",
                          wandb_project="surogate-tests", aim_experiment="reverse", aim_repo=str(repo))
    result = run_surogate(surogate_bin, "sft", config, env=tracker_env(tmp_path))
    assert result.returncode == 0, result.stderr + result.stdout
    assert "warning" not in (result.stdout + result.stderr).lower(), result.stdout + result.stderr
    records = log_records(out)
    expected = expected_metrics(records)
    assert sorted(expected) == [0, 1, 2, 3, 4]  # eval before training (0), every step, evals at 2 and 4
    assert {"train/loss", "train/lr", "train/grad_norm", "train/tokens_per_second"} <= expected[3].keys()
    assert {"eval/loss", "eval/accuracy", "train/loss"} <= expected[4].keys()

    ids = json.loads((out / "trackers.json").read_text())
    assert ids["run_name"] == "config"

    # wandb: one offline run with the run's name, project, configuration and every value at its step.
    runs = wandb_runs(out)
    assert len(runs) == 1
    wandb_records = runs[0]
    run_record = next(r["run"] for r in wandb_records if r["type"] == "run")
    assert run_record["display_name"] == "config" and run_record["project"] == "surogate-tests"
    assert run_record["run_id"] == ids["wandb_id"]
    config_values = {}
    for record in wandb_records:
        if record["type"] in ("run", "config"):
            block = record[record["type"]]["config"] if record["type"] == "run" else record["config"]
            for entry in block.get("update", []) if isinstance(block.get("update"), list) else [block.get("update", {})]:
                config_values.update(entry)
    assert config_values["learning_rate"] == 0.01 and config_values["max_steps"] == 4
    assert config_values["run"]["run_name"] == "config"
    history = wandb_history(wandb_records)
    assert sorted(history) == [0, 1, 2, 3, 4]
    for step, metrics in expected.items():
        for name, value in metrics.items():
            assert history[step][name] == value, (step, name)  # exact: the log's JSON numbers
    exit_record = next(r for r in wandb_records if r["type"] == "exit")
    assert exit_record["exit"].get("exit_code", 0) == 0

    # Aim: the same run name, experiment, configuration, metrics and summary.
    run, metrics = aim_run(repo, ids["aim_hash"])
    assert run.name == "config" and run.experiment == "reverse"
    assert run["hparams"]["learning_rate"] == 0.01
    assert run["summary"]["steps"].startswith("4")
    for step, values in expected.items():
        for name, value in values.items():
            assert metrics[name][step] == value, (step, name)
    assert run.end_time is not None  # finished successfully

    # The GPU run's checker (bench/check_trackers.py) agrees on this CPU run (no gpu records here).
    check = subprocess.run([sys.executable, str(REPO_ROOT / "bench/check_trackers.py"), str(out), "--aim-repo",
                            str(repo)], capture_output=True, text=True, timeout=600)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "all checks passed" in check.stdout and "HTML report data-points = log" in check.stdout


def test_a_resumed_run_continues_the_same_tracked_runs(surogate_bin, tmp_path):
    ex = make_quickstart_example(tmp_path)
    out = tmp_path / "out"
    repo = tmp_path / "aim-repo"
    settings = dict(eval_steps=100, save_steps=2, report_to="[wandb, aim]", aim_repo=str(repo),
                    resume_from_checkpoint="true", lora="false")
    env = tracker_env(tmp_path)
    first = run_surogate(surogate_bin, "sft", write_config(tmp_path, ex, out, max_steps=2, **settings), env=env)
    assert first.returncode == 0, first.stderr + first.stdout
    first_ids = json.loads((out / "trackers.json").read_text())
    second = run_surogate(surogate_bin, "sft", write_config(tmp_path, ex, out, max_steps=4, **settings), env=env)
    assert second.returncode == 0, second.stderr + second.stdout
    assert "resumed from" in second.stdout
    assert json.loads((out / "trackers.json").read_text()) == first_ids

    runs = wandb_runs(out)
    assert len(runs) == 2  # offline: one folder per process, the same run id (wandb sync merges them)
    run_ids = [next(r["run"]["run_id"] for r in records if r["type"] == "run") for records in runs]
    assert run_ids == [first_ids["wandb_id"]] * 2
    resumed_history = wandb_history(runs[1])
    assert sorted(step for step, values in resumed_history.items() if "train/loss" in values) == [3, 4]

    records = log_records(out)
    _, metrics = aim_run(repo, first_ids["aim_hash"])
    losses = {r["step"]: r["loss"] for r in records if r["type"] == "step"}
    assert sorted(losses) == [1, 2, 3, 4]
    assert metrics["train/loss"] == losses  # one Aim run holds both processes' steps


def fake_package(tmp_path, name, body):
    folder = tmp_path / "fake-packages" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "__init__.py").write_text(body)
    return tmp_path / "fake-packages"


def test_a_missing_tracker_package_costs_one_warning_and_the_run_completes(surogate_bin, tmp_path):
    ex = make_quickstart_example(tmp_path)
    out = tmp_path / "out"
    packages = fake_package(tmp_path, "wandb", "raise ImportError('No module named wandb')\n")
    config = write_config(tmp_path, ex, out, report_to="[wandb]")
    result = run_surogate(surogate_bin, "sft", config, env=tracker_env(tmp_path, PYTHONPATH=str(packages)))
    assert result.returncode == 0, result.stderr + result.stdout
    text = result.stdout + result.stderr
    assert text.count("warning: report_to: wandb:") == 1, text
    assert "pip install wandb" in text
    assert "training summary" in result.stdout


def test_a_tracker_failing_mid_run_costs_one_warning_and_the_others_go_on(surogate_bin, tmp_path):
    ex = make_quickstart_example(tmp_path)
    out = tmp_path / "out"
    repo = tmp_path / "aim-repo"
    packages = fake_package(tmp_path, "wandb", """
class Settings:
    def __init__(self, **kwargs): pass
class _Run:
    id = "fakeid01"; url = None; dir = "nowhere"
    class config:
        @staticmethod
        def update(*args, **kwargs): pass
    def log(self, metrics, step=None): raise RuntimeError("the disk is full")
    def finish(self, exit_code=0): pass
def init(**kwargs): return _Run()
""")
    config = write_config(tmp_path, ex, out, report_to="[wandb, aim]", aim_repo=str(repo))
    result = run_surogate(surogate_bin, "sft", config, env=tracker_env(tmp_path, PYTHONPATH=str(packages)))
    assert result.returncode == 0, result.stderr + result.stdout
    text = result.stdout + result.stderr
    assert text.count("warning: report_to: wandb: recording failed: RuntimeError: the disk is full") == 1, text
    ids = json.loads((out / "trackers.json").read_text())
    _, metrics = aim_run(repo, ids["aim_hash"])
    assert sorted(metrics["train/loss"]) == [1, 2, 3]  # Aim kept recording


def test_no_python_for_the_helper_costs_one_warning(surogate_bin, tmp_path):
    ex = make_quickstart_example(tmp_path)
    out = tmp_path / "out"
    config = write_config(tmp_path, ex, out, report_to="[aim]")
    result = run_surogate(surogate_bin, "sft", config,
                          env=tracker_env(tmp_path, SUROGATE_PYTHON=str(tmp_path / "no-such-python")))
    assert result.returncode == 0, result.stderr + result.stdout
    text = result.stdout + result.stderr
    assert text.count("warning: report_to:") == 1, text
    assert "no-such-python" in text and "SUROGATE_PYTHON" in text


def test_unknown_tracker_is_a_config_error_naming_the_key(surogate_bin, tmp_path):
    ex = make_quickstart_example(tmp_path)
    config = write_config(tmp_path, ex, tmp_path / "out", report_to="[wandb, tensorboard]")
    result = run_surogate(surogate_bin, "sft", config, "--dry-run")
    assert result.returncode == 2
    assert "report_to" in result.stderr and "tensorboard" in result.stderr and "wandb, aim" in result.stderr


def test_log_gpu_util_on_the_cpu_backend_warns_once_when_set_and_never_by_default(surogate_bin, tmp_path):
    ex = make_quickstart_example(tmp_path)
    default = run_surogate(surogate_bin, "sft", write_config(tmp_path, ex, tmp_path / "a"))
    assert default.returncode == 0, default.stderr
    assert "warning" not in default.stdout + default.stderr
    explicit = run_surogate(surogate_bin, "sft", write_config(tmp_path, ex, tmp_path / "b", log_gpu_util=1))
    assert explicit.returncode == 0, explicit.stderr
    text = explicit.stdout + explicit.stderr
    samples = [r for r in log_records(tmp_path / "b") if r["type"] == "gpu"]
    if "CUDA backend" in explicit.stdout:  # on a GPU machine: a sample after every step
        assert [r["step"] for r in samples] == [1, 2, 3] and "GPU utilisation" in explicit.stdout, text
        return
    assert text.count("warning:") == 1 and text.count("log_gpu_util asks") == 1, text
    assert "CPU backend" in text and "config.yaml:" in text, text
    assert not samples
