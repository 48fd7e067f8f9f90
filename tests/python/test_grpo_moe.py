"""`surogate grpo` on a mixture-of-experts model (the Qwen3-MoE fixture: top-2 of its experts,
a dense layer between sparse ones, the router's load-balancing loss in the step) on the CPU
backend, with the grpo example's character tokenizer (17 ids below the fixture's 96): the rollouts
run the decode graph's MoE layers on the trainer's live weights — full fine-tuning, and LoRA on
attention and every expert — and the toy task learns (a reward for the digit 7 from chance, one
token in 17, to > 0.6 within 30 steps)."""
import shutil
import subprocess
import sys

import pytest

from conftest import REPO_ROOT, run_surogate
from test_grpo_cli import SEVENS, grpo_config, records

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "qwen3_moe_topk"


@pytest.fixture(scope="module")
def moe_example(tmp_path_factory):
    folder = tmp_path_factory.mktemp("grpo_moe")
    subprocess.run([sys.executable, str(REPO_ROOT / "examples/grpo/make_example.py"), str(folder)], check=True,
                   capture_output=True)
    model = folder / "moe"
    model.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(FIXTURE / name, model / name)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(folder / "model" / name, model / name)
    (folder / "rewards.py").write_text(SEVENS)
    return folder


@pytest.mark.parametrize("lora,temperature", [("false", "1.0"),
                                              ("true\nlora_rank: 4\nlora_target_modules: [all-linear]", "0.7")],
                         ids=["full", "lora"])
def test_a_toy_task_learns_on_a_moe_model(surogate_bin, moe_example, lora, temperature):
    out = moe_example / f"out-{lora[:4]}"
    path = moe_example / f"{lora[:4]}.yaml"
    text = grpo_config(path, moe_example, out, ["rewards.py:sevens"], lora=lora).read_text()
    path.write_text(text.replace(f"model: {moe_example}/model", f"model: {moe_example}/moe"))
    result = run_surogate(surogate_bin, "grpo", path, "--max_steps=30", f"--grpo.temperature={temperature}")
    assert result.returncode == 0, result.stdout + result.stderr
    steps = records(out, "step")
    rewards = [step["reward"] for step in steps]
    assert len(rewards) == 30
    assert sum(rewards[:2]) / 2 < 0.2, rewards
    assert sum(rewards[-3:]) / 3 > 0.6, rewards
    assert all(step["completions/max_length"] <= 4 for step in steps)
