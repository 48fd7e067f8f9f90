"""surogate.dsl's MoE decoders (python/surogate/dsl/moe.py, docs/models.md): Qwen3-MoE, Qwen2-MoE
(shared expert and its sigmoid gate) and Mixtral written in Python.

- Round trip: ``dsl.decoder`` emits exactly the C++ builder's IR (`surogate ir`) for every MoE
  fixture (sparse and dense layers from decoder_sparse_step / mlp_only_layers) and several shapes;
  the comparison is exact (one attribute, group or weight name changed makes it fail).
- Training from the DSL's IR (`model_definition` through `surogate sft`): the same step losses,
  router losses and evaluation losses as the built-in graph, bit for bit on the CPU backend (the
  engine adds the router loss of output_router_logits to the IR's training graph by its fixed rule).
"""
import copy
import json

import pytest

from conftest import REPO_ROOT, make_quickstart_example, quickstart_sft_config, run_surogate
from dsl_names import without_checkpoint_names
from test_moe_cli import moe_model

FIXTURES = REPO_ROOT / "tests" / "fixtures"
MOE_ARCHITECTURES = ["qwen3_moe_topk", "qwen2_moe_shared", "mixtral_topk"]


@pytest.fixture(scope="module")
def dsl(surogate_package):
    import surogate.dsl
    return surogate.dsl


def cli_ir(surogate_package, name, batch, seq, chunks=1):
    result = run_surogate(surogate_package.cli, "ir", FIXTURES / name, "--batch", batch, "--seq", seq,
                          "--lmhead-chunks", chunks)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def nodes_named(ir, suffix):
    return [node for node in ir["nodes"] if node["name"].endswith(suffix)]


@pytest.mark.parametrize("name", MOE_ARCHITECTURES)
def test_the_dsl_emits_the_ir_of_the_cpp_builder_for_moe_models(surogate_package, dsl, name):
    config = json.loads((FIXTURES / name / "config.json").read_text())
    for batch, seq, chunks in ((2, 16, 1), (1, 48, 3)):
        emitted = without_checkpoint_names(dsl.decoder.emit(FIXTURES / name, batch=batch, seq=seq,
                                                            lmhead_chunks=chunks), FIXTURES / name)
        assert emitted == cli_ir(surogate_package, name, batch, seq, chunks), (name, batch, seq)
    # What the comparison covered: the sparse layers config.json asks for, each routed top-k.
    sparse = [int(node["name"].split(".")[1]) for node in nodes_named(emitted, ".route")]
    expected = {"qwen3_moe_topk": [0, 2], "qwen2_moe_shared": [1, 3], "mixtral_topk": [0, 1]}[name]
    assert sparse == expected  # mlp_only_layers [1]; decoder_sparse_step 2; every layer
    assert all(node["attrs"]["top_k"] == config["num_experts_per_tok"] for node in nodes_named(emitted, ".route"))
    assert len(nodes_named(emitted, ".moe_out")) == (len(sparse) if name == "qwen2_moe_shared" else 0)
    assert len(nodes_named(emitted, ".experts_gate")) == len(sparse)


def test_the_comparison_is_exact(surogate_package, dsl):
    """One attribute, one recompute group or one weight's HF name changed: the IRs differ (or the
    engine refuses the weights)."""
    cli = cli_ir(surogate_package, "qwen2_moe_shared", 2, 16)
    emitted = without_checkpoint_names(dsl.decoder.emit(FIXTURES / "qwen2_moe_shared", batch=2, seq=16),
                                       FIXTURES / "qwen2_moe_shared")
    assert emitted == cli
    for edit in (lambda node: node["attrs"].update(normalize=True) if node["op"] == "router_topk" else None,
                 lambda node: node.update(recompute_group="ffn") if node["name"].endswith("shared_swiglu") else None,
                 lambda node: node.update(name=node["name"] + "_") if node["op"] == "sigmoid_gated_add" else None):
        perturbed = copy.deepcopy(emitted)
        for node in perturbed["nodes"]:
            edit(node)
        assert perturbed != cli
    import surogate.dsl.moe as moe
    names = dict(moe.MIXTRAL_EXPERT_PROJECTIONS)
    try:
        moe.MIXTRAL_EXPERT_PROJECTIONS["up_proj"] = "w2"  # Mixtral's w3 declared as w2
        with pytest.raises(ValueError, match="layers.0.mlp.experts.up_proj.weight"):
            dsl.decoder.emit(FIXTURES / "mixtral_topk", batch=1, seq=8)
    finally:
        moe.MIXTRAL_EXPERT_PROJECTIONS.update(names)


def training_records(surogate_package, config):
    result = run_surogate(surogate_package.cli, "sft", config)
    assert result.returncode == 0, result.stderr + result.stdout
    out = config.parent / config.stem
    [log] = list(out.glob("log-*.jsonl"))
    records = [json.loads(line) for line in log.read_text().splitlines()]
    steps = [(r["loss"], r["router_aux_loss"]) for r in records if r["type"] == "step"]
    evals = [(r["eval_loss"], r["eval_accuracy"]) for r in records if r["type"] == "eval"]
    return steps, evals


@pytest.mark.parametrize("name", ["qwen2_moe_shared", "mixtral_topk"])
def test_training_from_the_dsl_ir_gives_the_built_in_losses(surogate_package, dsl, tmp_path, name):
    ex = make_quickstart_example(tmp_path)
    model = moe_model(tmp_path, name, ex)
    ir = tmp_path / "moe.json"
    dsl.decoder.save(ir, model, batch=4, seq=64)
    runs = {}
    for label, extra in (("built_in", ""), ("dsl", f"model_definition: {ir}\n")):
        config = quickstart_sft_config(tmp_path / f"{label}.yaml", model, tmp_path / label, ex, extra,
                                       gradient_accumulation_steps=2, max_steps=4, eval_steps=2)
        runs[label] = training_records(surogate_package, config)
    steps, evals = runs["built_in"]
    assert len(steps) == 4 and len(evals) >= 2
    assert all(aux > 0 for _, aux in steps)  # output_router_logits: the router loss is in both
    assert runs["dsl"] == runs["built_in"]  # bit for bit: step losses, router losses, eval losses and accuracies
