"""surogate.dsl (python/surogate/dsl, docs/models.md): models written in Python as JSON IR.

- The DSL learns its ops from the engine's registry (no op table of its own).
- Round trip: the DSL's Llama-family decoder emits exactly the C++ builder's IR (`surogate ir`) for
  every fixture architecture and several shapes.
- Training from IR (`model_definition`): the decoder's IR trains with the built-in model's losses,
  bit for bit; a model that is not the Llama wiring (examples/dsl/parallel_block.py) trains from
  Python and its loss equals an independent float64 numpy implementation.
- The CLI's errors for IR files that do not fit the run.
"""
import json

import numpy as np
import pytest

from conftest import REPO_ROOT, make_quickstart_example, run_surogate
from dsl_names import without_checkpoint_names
from test_python_api import held_out_rows, quickstart_options, yaml_of

FIXTURES = REPO_ROOT / "tests" / "fixtures"
ARCHITECTURES = ["llama_gqa_llama3", "llama_bias_untied", "mistral_sliding", "qwen2_bias_tied", "qwen3_qknorm",
                 "llama_rope_parameters_yarn"]
PARALLEL_BLOCK = REPO_ROOT / "examples" / "dsl" / "parallel_block.py"


@pytest.fixture(scope="module")
def dsl(surogate_package):
    import surogate.dsl
    return surogate.dsl


def test_ops_come_from_the_engine_registry(dsl):
    ops = dsl.registered_ops()
    for name in ("rmsnorm", "fused_residual_rmsnorm", "linear", "attention", "swiglu", "lm_head_loss", "add"):
        assert name in ops
    assert ops["rmsnorm"]["outputs"][0] == "out"
    g = dsl.Graph(batch=1, seq=4)
    with pytest.raises(AttributeError, match="did you mean rmsnorm"):
        g.ops.rmsnrm
    x = g.input("x", "F32", [1, 4, 8])
    w = g.parameter("w", [6])
    with pytest.raises(ValueError, match="node 'ln' \\(op rmsnorm\\)"):  # the engine's shape rule, naming the node
        g.ops.rmsnorm(x, w, eps=1e-6, name="ln")


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_the_dsl_decoder_emits_the_ir_of_the_cpp_builder(surogate_package, dsl, name):
    for batch, seq, chunks in ((2, 16, 1), (1, 48, 3)):
        cli = run_surogate(surogate_package.cli, "ir", FIXTURES / name, "--batch", batch, "--seq", seq,
                           "--lmhead-chunks", chunks)
        assert cli.returncode == 0, cli.stderr
        emitted = dsl.decoder.emit(FIXTURES / name, batch=batch, seq=seq, lmhead_chunks=chunks)
        assert without_checkpoint_names(emitted, FIXTURES / name) == json.loads(cli.stdout), (name, batch, seq)


def test_weight_names_are_checked_against_the_engine(dsl):
    @dsl.model
    def renamed(g, c):
        dsl.decoder(g, c)
        g.parameter("extra.weight", [4])

    with pytest.raises(ValueError, match="extra.weight"):
        renamed.emit(FIXTURES / "llama_gqa_llama3", batch=1, seq=8)


def train_losses(surogate, ex, out, **extra):
    summary = surogate.train(quickstart_options(ex, out, max_steps=6, eval_steps=3, save_steps=100, **extra))
    return summary


def test_training_from_the_decoders_ir_gives_the_built_in_losses(surogate_package, dsl, tmp_path):
    surogate = surogate_package.module
    ex = make_quickstart_example(tmp_path)
    built_in = train_losses(surogate, ex, tmp_path / "built_in")
    from_python = train_losses(surogate, ex, tmp_path / "dsl", model_definition=dsl.decoder)
    assert (tmp_path / "dsl" / "model_definition.json").exists()
    assert from_python["step_losses"] == built_in["step_losses"]
    assert from_python["eval_loss"] == built_in["eval_loss"]
    # The CLI, from an IR file in the YAML.
    ir = tmp_path / "decoder.json"
    dsl.decoder.save(ir, ex / "model", batch=16, seq=64)
    config = tmp_path / "ir.yaml"
    config.write_text(yaml_of(quickstart_options(ex, tmp_path / "cli", max_steps=6, eval_steps=3, save_steps=100,
                                                 model_definition=str(ir))))
    result = run_surogate(surogate_package.cli, "sft", config)
    assert result.returncode == 0, result.stderr + result.stdout
    losses = [r["loss"] for log in (tmp_path / "cli").glob("log-*.jsonl")
              for r in map(json.loads, log.read_text().splitlines()) if r["type"] == "step"]
    assert losses == built_in["step_losses"]


def test_cli_errors_for_definitions_that_do_not_fit(surogate_package, dsl, tmp_path):
    ex = make_quickstart_example(tmp_path)
    ir = tmp_path / "small.json"
    dsl.decoder.save(ir, ex / "model", batch=2, seq=32)
    empty = tmp_path / "empty.py"
    empty.write_text("# a Python file that defines no model\n")
    for definition, expected in ((ir, "per_device_train_batch_size / sequence_len"),
                                 (empty, "defines 0 models"), (tmp_path / "absent.json", "not a file")):
        config = tmp_path / "bad.yaml"
        config.write_text(yaml_of(quickstart_options(ex, tmp_path / "out", model_definition=str(definition))))
        result = run_surogate(surogate_package.cli, "sft", config)
        assert result.returncode == 2, result.stdout + result.stderr
        assert "model_definition" in result.stderr and expected in result.stderr, result.stderr


def parallel_block_logits(config, w, ids):
    """float64 numpy: x + attention(ln1(x)) + mlp(ln2(x)) per layer (examples/dsl/parallel_block.py)."""
    from numpy_llama import attention_setup, embed, rms_norm, rope

    hidden, T, (heads, kv_heads, head_dim, eps, theta, positions, mask) = embed(w, ids), len(ids), attention_setup(config, len(ids))
    for layer in range(config["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        x = rms_norm(hidden, w[p + "input_layernorm.weight"], eps)
        q = (x @ w[p + "self_attn.q_proj.weight"].T).reshape(T, heads, head_dim).transpose(1, 0, 2)
        k = (x @ w[p + "self_attn.k_proj.weight"].T).reshape(T, kv_heads, head_dim).transpose(1, 0, 2)
        v = (x @ w[p + "self_attn.v_proj.weight"].T).reshape(T, kv_heads, head_dim).transpose(1, 0, 2)
        q, k = rope(q, positions, theta), rope(k, positions, theta)
        k, v = np.repeat(k, heads // kv_heads, axis=0), np.repeat(v, heads // kv_heads, axis=0)
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(head_dim) + mask
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        context = ((scores / scores.sum(-1, keepdims=True)) @ v).transpose(1, 0, 2).reshape(T, heads * head_dim)
        attention = context @ w[p + "self_attn.o_proj.weight"].T
        m = rms_norm(hidden, w[p + "post_attention_layernorm.weight"], eps)
        gate, up = m @ w[p + "mlp.gate_proj.weight"].T, m @ w[p + "mlp.up_proj.weight"].T
        hidden = hidden + attention + (gate / (1.0 + np.exp(-gate)) * up) @ w[p + "mlp.down_proj.weight"].T
    hidden = rms_norm(hidden, w["model.norm.weight"], eps)
    head = w["lm_head.weight"] if "lm_head.weight" in w else w["model.embed_tokens.weight"]
    return hidden @ head.T


def test_a_new_architecture_written_in_python_trains_and_matches_numpy(surogate_package, dsl, tmp_path):
    surogate = surogate_package.module
    ex = make_quickstart_example(tmp_path)
    out = tmp_path / "parallel"
    summary = surogate.train(quickstart_options(ex, out, max_steps=30, eval_steps=30, save_steps=100),
                             model_definition=PARALLEL_BLOCK)
    assert summary["step_losses"][-1] < 0.6 * summary["step_losses"][0]
    assert summary["eval_loss"] < summary["initial_eval_loss"]
    ir = json.loads((out / "model_definition.json").read_text())
    assert any(node["name"] == "layers.0.residual" and node["op"] == "add" for node in ir["nodes"])

    # The trained weights run through the DSL's graph equal the numpy definition of the same model.
    rows, labels = held_out_rows(ex, 4)
    definition = tmp_path / "parallel_4x64.json"
    dsl.load_definition(PARALLEL_BLOCK).save(definition, out, batch=4, seq=64)
    model = surogate.load(out, batch_size=4, seq_len=64, model_definition=definition)
    from numpy_llama import load_model

    config, weights, _ = load_model(out)
    total, tokens = 0.0, 0
    for row, label in zip(rows, labels):
        logits = parallel_block_logits(config, weights, np.array(row))
        logits = logits - logits.max(-1, keepdims=True)
        log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        for i, target in enumerate(label[1:]):
            if target != -100:
                total -= log_probs[i, target]
                tokens += 1
    assert model.loss(rows, labels) == pytest.approx(total / tokens, rel=1e-5)
    # The built-in wiring gives another loss on the same weights: the definition is what ran.
    assert surogate.load(out, batch_size=4, seq_len=64).loss(rows, labels) != pytest.approx(total / tokens, rel=1e-3)


def test_python_m_surogate_dsl_writes_the_ir(surogate_package, tmp_path):
    out = tmp_path / "decoder.json"
    result = surogate_package.run_python(
        f"import sys; from surogate.dsl.__main__ import main; sys.exit(main(['decoder', '--model', "
        f"'{FIXTURES / 'qwen3_qknorm'}', '--batch', '2', '--seq', '16', '-o', '{out}']))")
    assert result.returncode == 0, result.stderr
    cli = run_surogate(surogate_package.cli, "ir", FIXTURES / "qwen3_qknorm", "--batch", 2, "--seq", 16)
    assert without_checkpoint_names(json.loads(out.read_text()), FIXTURES / "qwen3_qknorm") == json.loads(cli.stdout)
