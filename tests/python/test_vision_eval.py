"""`surogate eval` on vision-language folders (docs/vision.md, "Evaluating"; docs/training.md's eval
command): for the tiny random Qwen2.5-VL (test_vision_sft.py) and Qwen3-VL (test_qwen3_vl_sft.py),
the printed loss on ROWS (an HF content-part image row and an ms-swift "<image>" row, images scaled
down and up) is transformers' token-weighted mean cross-entropy over the assistant tokens (the
engine's formatter's ids and labels, the HF processor's pixel values: test_vision_sft.batch_loss)
to rel 1e-5 in fp32, the rows one per forward and both in one; with a PEFT adapter on the text
model it is PEFT's (and differs from the base's); --max_pixels changes the images and so the loss.
Options the path cannot honour (--ir, --lmhead-chunks) and bad rows are one error naming them. With
a GPU: the CUDA backend's loss is the CPU's within rel 1e-2 (bf16 against fp32, the tolerance of
the other vision-language CUDA cases)."""
import json

import pytest

from conftest import gpu_visible, run_surogate

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
peft = pytest.importorskip("peft")
pytest.importorskip("PIL")
pytest.importorskip("safetensors")
from test_vision_sft import RTOL, ROWS, batch_loss, engine_rows  # noqa: E402
from test_vision_generate import FAMILIES  # noqa: E402  (both tiny families: maker, processor, class)


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family(request, tmp_path_factory, tokenizers_dir):
    make, processor, architecture = FAMILIES[request.param]
    root = tmp_path_factory.mktemp(f"vision_eval_{request.param}")
    folder = make(root / "model", tokenizers_dir)
    rows_file = root / "rows.jsonl"
    rows_file.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    return {"name": request.param, "folder": folder, "architecture": architecture, "data": rows_file,
            "processor": processor,
            "rows": engine_rows(folder, tokenizers_dir, root)}


def hf_model(family):
    model_class = getattr(transformers, family["architecture"])
    return model_class.from_pretrained(family["folder"], dtype=torch.float32, attn_implementation="eager").eval()


def scored_tokens(rows):
    return sum(sum(1 for label in row["labels"][1:] if label != -100) for row in rows)


def evaluate(surogate_bin, family, *args, device="cpu"):
    result = run_surogate(surogate_bin, "eval", "--model", family["folder"], "--data", family["data"],
                          "--device", device, *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("batch", [1, 2])
def test_the_loss_is_transformers_on_the_same_rows(surogate_bin, family, batch):
    ours = evaluate(surogate_bin, family, "--batch-size", batch)
    with torch.no_grad():
        theirs = float(batch_loss(hf_model(family), family["folder"], family["rows"], family["processor"]))
    assert ours["tokens"] == scored_tokens(family["rows"])
    assert ours["loss"] == pytest.approx(theirs, rel=RTOL)
    assert ours["perplexity"] == pytest.approx(float(torch.exp(torch.tensor(theirs, dtype=torch.float64))), rel=RTOL)


def test_a_peft_adapter_gives_pefts_loss(surogate_bin, family, tmp_path):
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "down_proj"],
                             exclude_modules=".*visual.*", init_lora_weights=False)
    torch.manual_seed(3)
    model = peft.get_peft_model(hf_model(family), config).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_" in name:
                parameter.copy_(torch.randn_like(parameter) * 0.3)
    model.save_pretrained(tmp_path / "adapter")
    ours = evaluate(surogate_bin, family, "--adapter", tmp_path / "adapter", "--batch-size", 2)
    with torch.no_grad():
        theirs = float(batch_loss(model, family["folder"], family["rows"], family["processor"]))
    base = evaluate(surogate_bin, family)
    assert ours["loss"] == pytest.approx(theirs, rel=RTOL)
    assert ours["loss"] != pytest.approx(base["loss"], rel=1e-3)  # the adapter matters


def test_max_pixels_resizes_the_images(surogate_bin, family):
    # A lower max_pixels shrinks the larger image (fewer image tokens, so another loss); the
    # scored (assistant) tokens stay the same.
    base = evaluate(surogate_bin, family)
    small = evaluate(surogate_bin, family, "--max_pixels", family["processor"]["min_pixels"])
    assert small["tokens"] == base["tokens"]
    assert small["loss"] != pytest.approx(base["loss"], rel=1e-6)


@pytest.mark.parametrize("option", [["--ir", "model.json"], ["--model_definition", "model.py"],
                                    ["--lmhead-chunks", "2"]])
def test_options_the_path_cannot_honour_are_refused(surogate_bin, family, option):
    result = run_surogate(surogate_bin, "eval", "--model", family["folder"], "--data", family["data"], *option)
    assert result.returncode == 2, result.stderr
    assert option[0] in result.stderr and family["architecture"] in result.stderr, result.stderr


def test_a_bad_row_is_one_error_naming_the_row(surogate_bin, family, tmp_path):
    fine = ROWS[1]
    missing = {"messages": [{"role": "user", "content": [{"type": "image", "image": "absent.png"}]},
                            {"role": "assistant", "content": "No."}]}
    source = tmp_path / "bad.jsonl"
    source.write_text(json.dumps(fine) + "\n" + json.dumps(missing) + "\n")
    result = run_surogate(surogate_bin, "eval", "--model", family["folder"], "--data", source, "--device", "cpu")
    assert result.returncode == 2, result.stderr
    assert "bad.jsonl:2" in result.stderr and "absent.png" in result.stderr, result.stderr


def test_max_pixels_is_refused_on_a_text_folder(surogate_bin, tmp_path):
    from conftest import REPO_ROOT
    source = tmp_path / "rows.jsonl"
    source.write_text(json.dumps({"input_ids": [1, 2, 3]}) + "\n")
    result = run_surogate(surogate_bin, "eval", "--model", REPO_ROOT / "tests" / "fixtures" / "qwen3_qknorm",
                          "--data", source, "--max_pixels", 1000)
    assert result.returncode == 2 and "--max_pixels" in result.stderr, result.stderr


@pytest.mark.skipif(not gpu_visible(), reason="needs a GPU")
def test_the_cuda_backends_loss_is_the_cpus_within_bf16(surogate_bin, family):
    cpu = evaluate(surogate_bin, family, "--batch-size", 2)
    cuda = evaluate(surogate_bin, family, "--batch-size", 2, device="cuda")
    # bf16 weights and activations against fp32: rel 1e-2, as the trainer's VL CUDA evaluator test.
    assert cuda["tokens"] == cpu["tokens"]
    assert cuda["loss"] == pytest.approx(cpu["loss"], rel=1e-2)
