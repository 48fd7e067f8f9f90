"""examples/dsl/gpt_neox.py (docs/models.md): an architecture the engine has no C++ for, written in
Python alone — LayerNorm with bias, GELU, per-head interleaved query_key_value, partial rotary,
parallel residual, its own checkpoint names — exact against transformers' GPTNeoXForCausalLM.

- A tiny random GPT-NeoX saved by transformers (config.json: GPTNeoXForCausalLM, hidden_act gelu)
  loads with the definition's graph and weight table, and its fp32 CPU loss equals transformers'
  fp32 loss within relative 1e-5, for the parallel block with erf GELU and the sequential block
  with tanh GELU; the other wiring of the same weights is further away than 1e-3.
- Without the definition the engine refuses the architecture, naming it.
- A wrong definition (a weight the checkpoint lacks, a shape mismatch, an op that does not exist)
  exits 2 from `python -m surogate.dsl`, naming the weight / op and the line of the file.
- It trains through `surogate sft` on the CPU from the definition's IR; the folder it writes keeps
  the checkpoint's names and transformers loads it, with the engine's loss on it.
"""
import json
import subprocess
import sys

import pytest

from conftest import REPO_ROOT, make_quickstart_example, run_surogate
from dsl_parity import ROWS, SEQ, both_losses, engine_loss, save_with_tokenizer
from test_dsl_olmo2 import transformers_loss
from test_python_api import held_out_rows, quickstart_options, yaml_of

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

GPT_NEOX = REPO_ROOT / "examples" / "dsl" / "gpt_neox.py"
RELATIVE_TOLERANCE = 1e-5  # fp32 on both sides, sums in another order
WIRING_GAP = 1e-3          # the other residual wiring is at least this far (relative)


def make_gpt_neox(ex, folder, parallel=True, hidden_act="gelu"):
    """A 2-layer GPT-NeoX over the quick start's tokenizer, random weights, biases and norms (seed 0),
    half the head rotated, as transformers saves it."""
    vocab_size = json.loads((ex / "model" / "config.json").read_text())["vocab_size"]
    torch.manual_seed(0)
    config = transformers.GPTNeoXConfig(vocab_size=vocab_size, hidden_size=64, intermediate_size=128,
                                        num_hidden_layers=2, num_attention_heads=4, rotary_pct=0.5,
                                        max_position_embeddings=SEQ, use_parallel_residual=parallel,
                                        hidden_act=hidden_act, initializer_range=0.1, bos_token_id=None,
                                        eos_token_id=None, pad_token_id=None)
    model = transformers.GPTNeoXForCausalLM(config).float().eval()
    with torch.no_grad():
        for name, tensor in model.named_parameters():
            if "layernorm" in name or "layer_norm" in name:
                tensor.uniform_(0.5, 1.5) if name.endswith("weight") else tensor.uniform_(-0.2, 0.2)
            elif name.endswith("bias"):
                tensor.uniform_(-0.1, 0.1)
    return save_with_tokenizer(model, ex, folder)


def other_wiring_loss(model, rows, labels):
    """The same weights through the other residual wiring (parallel <-> sequential), in transformers."""
    config = transformers.GPTNeoXConfig.from_dict(model.config.to_dict())
    config.use_parallel_residual = not config.use_parallel_residual
    other = transformers.GPTNeoXForCausalLM(config)
    other.load_state_dict(model.state_dict())
    return transformers_loss(other.float().eval(), rows, labels)


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    ex = make_quickstart_example(tmp_path_factory.mktemp("gpt_neox"))
    return ex, make_gpt_neox(ex, ex / "neox")


@pytest.mark.parametrize("parallel, hidden_act", [(True, "gelu"), (False, "gelu_new")])
def test_the_dsl_gpt_neox_equals_transformers(surogate_package, example, tmp_path, parallel, hidden_act):
    ex = example[0]
    folder = make_gpt_neox(ex, tmp_path / "neox", parallel, hidden_act)
    rows, labels = held_out_rows(ex, ROWS)
    loss, reference, reference_model = both_losses(surogate_package.module, GPT_NEOX, transformers.GPTNeoXForCausalLM,
                                                   folder, tmp_path, rows, labels)
    assert loss == pytest.approx(reference, rel=RELATIVE_TOLERANCE)
    assert other_wiring_loss(reference_model, rows, labels) != pytest.approx(reference, rel=WIRING_GAP)


def test_gpt_neox_without_its_definition_is_refused(surogate_package, example):
    surogate = surogate_package.module
    with pytest.raises(surogate.UserError, match="GPTNeoXForCausalLM"):
        surogate.load(example[1], batch_size=ROWS, seq_len=SEQ)
    cli = run_surogate(surogate_package.cli, "ir", example[1], "--batch", 1, "--seq", 8)
    assert cli.returncode == 2 and "GPTNeoXForCausalLM" in cli.stderr and "model_definition" in cli.stderr, cli.stderr


def python_m_dsl(surogate_package, definition, folder, out, batch=1, seq=8):
    return subprocess.run([str(surogate_package.python), "-m", "surogate.dsl", str(definition), "--model", str(folder),
                           "--batch", str(batch), "--seq", str(seq), "-o", str(out)], capture_output=True, text=True)


@pytest.mark.parametrize("edit, expected", [
    (('"gpt_neox.embed_in.weight"', '"gpt_neox.embed_in.weights"'),
     ["'embed.weight'", "gpt_neox.embed_in.weights", "does not hold", "did you mean 'gpt_neox.embed_in.weight'"]),
    (("3 * hidden, hidden, bias", "2 * hidden, hidden, bias"), ["query_key_value", "shape", "[128, 64]", "[192, 64]"]),
    (("g.ops.gelu(", "g.ops.geluu("), ["no op 'geluu'", "did you mean gelu"]),
])
def test_a_wrong_definition_names_the_weight_or_op_and_the_line(surogate_package, example, tmp_path, edit, expected):
    source = GPT_NEOX.read_text()
    assert edit[0] in source
    broken = tmp_path / "broken_neox.py"
    broken.write_text(source.replace(edit[0], edit[1], 1))
    line = next(number for number, text in enumerate(broken.read_text().splitlines(), 1) if edit[1] in text)
    result = python_m_dsl(surogate_package, broken, example[1], tmp_path / "out.json")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    for fragment in expected:
        assert fragment in result.stderr, (fragment, result.stderr)
    location = result.stderr[result.stderr.index(f"{broken}:"):].split(": ")[0]
    if "gelu" in edit[0]:  # the op's line itself
        assert location == f"{broken}:{line}", result.stderr
    else:  # a weight: the helper's line that declares it, via the line that names it
        assert str(line) in location.split("via lines")[-1], result.stderr


def test_gpt_neox_trains_with_the_cli_and_transformers_loads_the_result(surogate_package, example, tmp_path):
    import surogate.dsl as dsl
    surogate = surogate_package.module
    ex, folder = example
    ir = tmp_path / "neox.json"
    dsl.load_definition(GPT_NEOX).save(ir, folder, batch=16, seq=64)
    assert json.loads(ir.read_text())["checkpoint_names"]["layers.0.attention.query_key_value.weight"] == \
        "gpt_neox.layers.0.attention.query_key_value.weight"
    out = tmp_path / "trained"
    config = tmp_path / "neox.yaml"
    config.write_text(yaml_of(quickstart_options(ex, out, model=str(folder), max_steps=12, eval_steps=12,
                                                 save_steps=100, model_definition=str(ir))))
    result = run_surogate(surogate_package.cli, "sft", config)
    assert result.returncode == 0, result.stderr + result.stdout
    steps = [r["loss"] for log in out.glob("log-*.jsonl")
             for r in map(json.loads, log.read_text().splitlines()) if r["type"] == "step"]
    assert len(steps) == 12 and steps[-1] < 0.9 * steps[0], steps
    from safetensors import safe_open
    with safe_open(str(folder / "model.safetensors"), framework="numpy") as original:
        names = set(original.keys())
    saved = set()
    for file in out.glob("*.safetensors"):
        with safe_open(str(file), framework="numpy") as written:
            saved |= set(written.keys())
    assert saved == names
    assert json.loads((out / "config.json").read_text())["architectures"] == ["GPTNeoXForCausalLM"]
    rows, labels = held_out_rows(ex, ROWS)
    trained = transformers.GPTNeoXForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    reference = transformers_loss(trained, rows, labels)
    assert reference < transformers_loss(transformers.GPTNeoXForCausalLM.from_pretrained(folder).float().eval(),
                                         rows, labels)
    assert engine_loss(surogate, GPT_NEOX, out, tmp_path, rows, labels) == pytest.approx(reference, rel=RELATIVE_TOLERANCE)


def test_python_m_surogate_dsl_runs_from_the_source_tree_with_the_cli_alone(surogate_package, example, tmp_path):
    """PYTHONPATH=python, no extension module, no pip install: the DSL asks `surogate ir --dsl-queries`
    and writes the same IR as with the extension; its errors are the same too."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT / "python"), "SUROGATE_BIN": str(surogate_package.cli)}
    out = tmp_path / "source_tree.json"
    command = [sys.executable, "-m", "surogate.dsl", str(GPT_NEOX), "--model", str(example[1]), "--batch", "2",
               "--seq", "16", "-o", str(out)]
    check = subprocess.run([sys.executable, "-c", "import surogate.dsl._link as l; print(l._extension)"],
                           env=env, capture_output=True, text=True)
    assert check.stdout.strip() == "None", check.stdout + check.stderr  # really without the extension
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    installed = tmp_path / "installed.json"
    assert python_m_dsl(surogate_package, GPT_NEOX, example[1], installed, batch=2, seq=16).returncode == 0
    assert json.loads(out.read_text()) == json.loads(installed.read_text())
    broken = tmp_path / "broken.py"
    broken.write_text(GPT_NEOX.read_text().replace("g.ops.gelu(", "g.ops.geluu(", 1))
    result = subprocess.run(command[:3] + [str(broken)] + command[4:], env=env, capture_output=True, text=True)
    assert result.returncode == 2 and "no op 'geluu'" in result.stderr and f"{broken}:" in result.stderr, result.stderr
    result = subprocess.run(command, env=dict(env, SUROGATE_BIN="/nonexistent"), capture_output=True, text=True,
                            cwd=tmp_path)
    assert result.returncode == 2 and "pip install" in result.stderr and "SUROGATE_BIN=/nonexistent" in result.stderr, \
        result.stderr
