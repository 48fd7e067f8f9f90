"""examples/dsl/olmo2.py (docs/models.md): an architecture that is not the Llama wiring, written with
surogate.dsl, exact against transformers' own Olmo2ForCausalLM.

- A tiny random OLMo-2 (GQA, random norm weights) saved by transformers loads in the engine with
  the DSL's graph, and its fp32 CPU loss equals transformers' fp32 loss on the same tokens
  (relative 1e-5); the Llama wiring of the same weights, computed by transformers, is further away
  than 1e-3, so the comparison sees a wrong wiring.
- The engine has no built-in OLMo-2 graph: without a model definition it says which one to use.
- It trains from Python (surogate.train with model_definition): the loss falls, and the OLMo-2
  folder it writes still matches transformers.
"""
import json
import shutil

import pytest

from conftest import REPO_ROOT, make_quickstart_example, run_surogate
from test_python_api import held_out_rows, quickstart_options

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

OLMO2 = REPO_ROOT / "examples" / "dsl" / "olmo2.py"
RELATIVE_TOLERANCE = 1e-5  # fp32 on both sides, sums in another order
WIRING_GAP = 1e-3          # a wrong wiring is at least this far (relative) from transformers' loss
ROWS, SEQ = 4, 64


def make_olmo2(ex, folder):
    """A 2-layer OLMo-2 over the quick start's tokenizer, random weights (seed 0), as transformers saves it."""
    vocab_size = json.loads((ex / "model" / "config.json").read_text())["vocab_size"]
    torch.manual_seed(0)
    config = transformers.Olmo2Config(vocab_size=vocab_size, hidden_size=64, intermediate_size=128,
                                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                      max_position_embeddings=SEQ, initializer_range=0.1, bos_token_id=None,
                                      eos_token_id=None, pad_token_id=None)
    model = transformers.Olmo2ForCausalLM(config).float().eval()
    with torch.no_grad():
        for name, tensor in model.named_parameters():
            if name.endswith("norm.weight") or name.endswith("layernorm.weight"):
                tensor.uniform_(0.5, 1.5)
    model.save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(ex / "model" / name, folder / name)
    return folder


def transformers_loss(model, rows, labels):
    """Mean token cross-entropy over every scored token of the rows (labels aligned with input_ids)."""
    total, tokens = 0.0, 0
    with torch.no_grad():
        for row, label in zip(rows, labels):
            logits = model(torch.tensor([row])).logits[0, :-1].double()
            target = torch.tensor(label[1:])
            scored = target != -100
            total += torch.nn.functional.cross_entropy(logits[scored], target[scored], reduction="sum").item()
            tokens += int(scored.sum())
    return total / tokens


def llama_wiring_loss(olmo2, rows, labels):
    """The same weights through the Llama block (norms before each half, no q/k norm), in transformers."""
    c = olmo2.config
    llama = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=c.vocab_size, hidden_size=c.hidden_size, intermediate_size=c.intermediate_size,
        num_hidden_layers=c.num_hidden_layers, num_attention_heads=c.num_attention_heads,
        num_key_value_heads=c.num_key_value_heads, rms_norm_eps=c.rms_norm_eps, max_position_embeddings=SEQ))
    state = {name.replace("post_feedforward_layernorm", "input_layernorm"): tensor
             for name, tensor in olmo2.state_dict().items() if "q_norm" not in name and "k_norm" not in name}
    llama.load_state_dict(state)
    return transformers_loss(llama.float().eval(), rows, labels)


def engine_loss(surogate, dsl, folder, tmp_path, rows, labels):
    definition = dsl.load_definition(OLMO2).save(tmp_path / f"olmo2_{folder.name}.json", folder, batch=ROWS, seq=SEQ)
    return surogate.load(folder, batch_size=ROWS, seq_len=SEQ, model_definition=definition).loss(rows, labels)


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    ex = make_quickstart_example(tmp_path_factory.mktemp("olmo2"))
    return ex, make_olmo2(ex, ex / "olmo2")


def test_the_dsl_olmo2_equals_transformers(surogate_package, example, tmp_path):
    import surogate.dsl as dsl
    surogate = surogate_package.module
    ex, folder = example
    rows, labels = held_out_rows(ex, ROWS)
    reference_model = transformers.Olmo2ForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    reference = transformers_loss(reference_model, rows, labels)
    loss = engine_loss(surogate, dsl, folder, tmp_path, rows, labels)
    print(f"OLMo-2: engine {loss!r}, transformers {reference!r}, relative {abs(loss - reference) / reference:.3g}")
    assert loss == pytest.approx(reference, rel=RELATIVE_TOLERANCE)
    assert llama_wiring_loss(reference_model, rows, labels) != pytest.approx(reference, rel=WIRING_GAP)


def test_olmo2_without_its_definition_names_it(surogate_package, example):
    surogate = surogate_package.module
    with pytest.raises(Exception, match="examples/dsl/olmo2.py"):
        surogate.load(example[1], batch_size=ROWS, seq_len=SEQ)
    cli = run_surogate(surogate_package.cli, "ir", example[1], "--batch", 1, "--seq", 8)
    assert cli.returncode == 2 and "model_definition" in cli.stderr, cli.stderr


def test_olmo2_trains_from_python_and_stays_exact(surogate_package, example, tmp_path):
    import surogate.dsl as dsl
    surogate = surogate_package.module
    ex, folder = example
    out = tmp_path / "trained"
    summary = surogate.train(quickstart_options(ex, out, model=str(folder), max_steps=20, eval_steps=20,
                                                save_steps=100), model_definition=OLMO2)
    assert summary["step_losses"][-1] < 0.8 * summary["step_losses"][0]
    assert summary["eval_loss"] < summary["initial_eval_loss"]
    rows, labels = held_out_rows(ex, ROWS)
    trained = transformers.Olmo2ForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    reference = transformers_loss(trained, rows, labels)
    assert engine_loss(surogate, dsl, out, tmp_path, rows, labels) == pytest.approx(reference, rel=RELATIVE_TOLERANCE)
