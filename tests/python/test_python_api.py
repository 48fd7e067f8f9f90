"""The Python package (python/surogate, docs/python.md) installed with pip into a fresh virtual
environment: the CLI on its PATH, `import surogate` without PyTorch, surogate.train (the quick
start with the step callback, the CLI's exact losses, errors naming the key, Ctrl-C at a step
boundary leaving a checkpoint the run resumes from) and surogate.load (loss and logits against the
CLI and an independent numpy Llama, weights shared with NumPy through DLPack without a copy, a
LoRA adapter trained from Python)."""
import json
import signal
import subprocess
import time

import numpy as np
import pytest

from conftest import REPO_ROOT, make_quickstart_example, run_surogate

QUICKSTART = REPO_ROOT / "examples" / "quickstart" / "config.yaml"
STEPS = 20


def quickstart_options(ex, out, **extra):
    """examples/quickstart/config.yaml's options as a dict, on the example written into `ex`."""
    split = {"path": None, "type": "instruction", "instruction_field": "instruction", "output_field": "output",
             "prompt_format": "{instruction}={output}"}
    options = {"model": str(ex / "model"), "output_dir": str(out), "sequence_len": 64, "lora": False,
               "init_projections_to_zero": False,
               "datasets": [dict(split, path=str(ex / "train.jsonl"))],
               "validation_datasets": [dict(split, path=str(ex / "valid.jsonl"))],
               "use_chat_template": False, "optimizer": "adamw", "learning_rate": 3e-3, "lr_scheduler_type": "cosine",
               "warmup_steps": 5, "weight_decay": 0.0, "max_steps": STEPS, "per_device_train_batch_size": 16,
               "gradient_accumulation_steps": 1, "eval_steps": 10, "save_steps": 10, "save_total_limit": 2}
    options.update(extra)
    return options


def optional_import(name):
    """The module, or a skip when it is missing or does not import here (a torch without its CUDA
    libraries, say)."""
    import importlib
    try:
        return importlib.import_module(name)
    except Exception as error:  # noqa: BLE001 - any failure to import means "not available here"
        pytest.skip(f"{name} is not usable here: {error}")


def yaml_of(options):
    return "".join(f"{key}: {json.dumps(value)}\n" for key, value in options.items())


def log_losses(out):
    losses = []
    for log in out.glob("log-*.jsonl"):
        losses += [r["loss"] for r in map(json.loads, log.read_text().splitlines()) if r["type"] == "step"]
    return losses


@pytest.fixture(scope="module")
def trained(surogate_package, tmp_path_factory):
    """The quick start (STEPS steps) trained once from Python with a callback, and once by the
    installed CLI from the same options as YAML."""
    tmp = tmp_path_factory.mktemp("quickstart")
    ex = make_quickstart_example(tmp)
    seen = []
    python_out = tmp / "python"
    summary = surogate_package.module.train(quickstart_options(ex, python_out), seen.append)
    cli_out = tmp / "cli"
    config = tmp / "cli.yaml"
    config.write_text(yaml_of(quickstart_options(ex, cli_out)))
    cli = run_surogate(surogate_package.cli, "sft", config)
    assert cli.returncode == 0, cli.stderr + cli.stdout
    return {"ex": ex, "summary": summary, "seen": seen, "python_out": python_out, "cli_out": cli_out, "tmp": tmp}


def test_install_puts_the_cli_on_path_and_imports_without_torch(surogate_package):
    assert surogate_package.cli.exists()
    help_text = run_surogate(surogate_package.cli, "--help")
    assert help_text.returncode == 0 and "sft" in help_text.stdout
    script = ("import sys, surogate, surogate.dsl; assert 'torch' not in sys.modules, 'torch was imported'; "
              "help(surogate.train); print(surogate.__version__)")
    result = surogate_package.run_python(script)
    assert result.returncode == 0, result.stderr
    # help(surogate.train) lists every option with its default.
    for option in ("learning_rate: 0.0002", "per_device_train_batch_size", "lora_rank: 16", "model_definition"):
        assert option in result.stdout, option


def test_train_from_python_reports_each_step_and_matches_the_cli(trained):
    summary, seen = trained["summary"], trained["seen"]
    steps = [m for m in seen if m["type"] == "step"]
    assert [m["step"] for m in steps] == list(range(1, STEPS + 1))
    for metrics in steps:
        assert {"loss", "lr", "grad_norm", "tokens_per_second", "tokens", "epoch"} <= metrics.keys()
        assert metrics["tokens_per_second"] > 0
    assert [m["step"] for m in seen if m["type"] == "eval"] == [0, 10, 20]
    assert summary["steps"] == STEPS and not summary["stopped"]
    assert summary["step_losses"] == [m["loss"] for m in steps]
    assert summary["step_losses"][-1] < 0.8 * summary["step_losses"][0]
    assert (trained["python_out"] / "model.safetensors").exists()
    assert summary["checkpoint"].endswith(f"checkpoint-{STEPS}")
    # The same engine from the CLI: the same losses, bit for bit (the CPU backend is deterministic).
    assert log_losses(trained["cli_out"]) == summary["step_losses"]


def test_a_bad_option_raises_a_user_error_naming_the_key(surogate_package, tmp_path):
    surogate = surogate_package.module
    ex = make_quickstart_example(tmp_path)
    with pytest.raises(surogate.UserError, match="learning_rat") as unknown:
        surogate.train(quickstart_options(ex, tmp_path / "out", learning_rat=1e-3))
    assert isinstance(unknown.value, ValueError)
    with pytest.raises(surogate.UserError, match="optimizer"):
        surogate.train(quickstart_options(ex, tmp_path / "out", optimizer="sgd"))
    with pytest.raises(surogate.UserError, match="max_steps"):
        surogate.train(QUICKSTART, overrides={"max_steps": "many"})
    with pytest.raises(surogate.UserError, match="datasets\\[0\\].path"):
        surogate.train(quickstart_options(ex, tmp_path / "out", datasets=[{"path": str(tmp_path / "absent.jsonl"),
                                                                           "type": "text"}]))


def test_an_exception_in_the_callback_stops_the_run_and_reaches_the_caller(surogate_package, tmp_path):
    ex = make_quickstart_example(tmp_path)

    def callback(metrics):
        if metrics["type"] == "step" and metrics["step"] == 2:
            raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        surogate_package.module.train(quickstart_options(ex, tmp_path / "out"), callback)


CTRL_C_SCRIPT = """
import json, signal, sys, surogate
# Python keeps SIGINT ignored when it starts ignored (a test run started as a background job):
# Ctrl-C's handler, as an interactive user has it.
signal.signal(signal.SIGINT, signal.default_int_handler)
options = json.loads(sys.argv[1])
def callback(metrics):
    if metrics["type"] == "step":
        print("callback step", metrics["step"], flush=True)
try:
    surogate.train(options, callback)
    print("finished", flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


def test_ctrl_c_stops_at_a_step_boundary_with_a_checkpoint_the_run_resumes_from(surogate_package, tmp_path):
    ex = make_quickstart_example(tmp_path)
    out = tmp_path / "out"
    options = quickstart_options(ex, out, max_steps=200, save_steps=1000, eval_steps=1000,
                                 resume_from_checkpoint=True)
    process = subprocess.Popen([str(surogate_package.python), "-c", CTRL_C_SCRIPT, json.dumps(options)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in process.stdout:
        if line.startswith("callback step 3"):
            process.send_signal(signal.SIGINT)
            break
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr
    assert stdout.strip().endswith("interrupted"), stdout
    # The one checkpoint is the step the run stopped at, which its log says it finished last.
    checkpoints = sorted(out.glob("checkpoint-*"))
    assert len(checkpoints) == 1, sorted(p.name for p in out.iterdir())
    stopped_at = int(checkpoints[0].name.split("-")[1])
    assert 3 <= stopped_at < 200
    records = [json.loads(line) for log in out.glob("log-*.jsonl") for line in log.read_text().splitlines()]
    assert [r["step"] for r in records if r["type"] == "step"][-1] == stopped_at
    assert [r for r in records if r["type"] == "stopped"][0]["checkpoint"] == str(checkpoints[0])
    assert not (out / "model.safetensors").exists()  # no final outputs: the run did not end
    # Resuming continues from that step, with the losses an uninterrupted run has there.
    resumed = surogate_package.module.train(quickstart_options(ex, out, max_steps=stopped_at + 2, save_steps=1000,
                                                               eval_steps=1000, resume_from_checkpoint=True))
    assert resumed["first_step"] == stopped_at and resumed["steps"] == stopped_at + 2
    straight = surogate_package.module.train(quickstart_options(ex, tmp_path / "straight", max_steps=stopped_at + 2,
                                                                save_steps=1000, eval_steps=1000))
    assert resumed["step_losses"] == straight["step_losses"][stopped_at:]


def held_out_rows(ex, count=8):
    """Validation examples as the quick start's training sees them (prompt format, <s>, </s>):
    the answer and </s> scored."""
    vocab = json.loads((ex / "model" / "tokenizer.json").read_text())["model"]["vocab"]
    rows, labels = [], []
    for line in (ex / "valid.jsonl").read_text().splitlines()[:count]:
        row = json.loads(line)
        prompt = [vocab["<s>"]] + [vocab[c] for c in f"{row['instruction']}="]
        answer = [vocab[c] for c in row["output"]] + [vocab["</s>"]]
        rows.append(prompt + answer)
        labels.append([-100] * len(prompt) + answer)
    return rows, labels


def test_loaded_model_loss_and_logits_match_the_cli_and_a_numpy_llama(surogate_package, trained, tmp_path):
    surogate = surogate_package.module
    model_dir = trained["python_out"]
    rows, labels = held_out_rows(trained["ex"])
    model = surogate.load(model_dir, batch_size=len(rows), seq_len=64)
    assert model.device == "cpu"
    loss = model.loss(rows, labels)
    data = tmp_path / "eval.jsonl"
    data.write_text("".join(json.dumps({"input_ids": r, "labels": l}) + "\n" for r, l in zip(rows, labels)))
    cli = run_surogate(surogate_package.cli, "eval", "--model", model_dir, "--data", data)
    assert cli.returncode == 0, cli.stderr
    # One batch of padded rows vs the CLI's packed rows: the same sums in another order (fp32).
    assert loss == pytest.approx(json.loads(cli.stdout.strip().splitlines()[-1])["loss"], rel=1e-5)

    import numpy_llama

    config, weights, _ = numpy_llama.load_model(model_dir)
    logits = model.logits(rows)
    assert logits.shape == (len(rows), max(map(len, rows)), model.vocab_size)
    for index, row in enumerate(rows):
        expected = numpy_llama.logits_of(config, weights, np.array(row))
        error = np.abs(logits[index, :len(row)] - expected).max() / np.abs(expected).max()
        assert error < 1e-5, (index, error)  # fp32 engine vs float64 numpy
    with pytest.raises(surogate.UserError, match="seq_len"):
        model.loss([[1] * 65])


def test_weights_are_shared_with_numpy_through_dlpack_without_a_copy(surogate_package, trained):
    surogate = surogate_package.module
    rows, labels = held_out_rows(trained["ex"], 4)
    model = surogate.load(trained["python_out"], batch_size=4, seq_len=64)
    names = model.names()
    assert names[0] == "model.embed_tokens.weight" and "model.norm.weight" in names
    weights = model.weights()
    embed = weights["model.embed_tokens.weight"]
    assert embed.dtype == np.float32 and embed.shape == (model.vocab_size, embed.shape[1])
    # No copy: the array's memory is the engine's.
    assert embed.ctypes.data == model.data_pointer("model.embed_tokens.weight")
    dlpack = model.weight("model.norm.weight", "dlpack")
    assert np.from_dlpack(dlpack).ctypes.data == model.data_pointer("model.norm.weight")
    before = model.loss(rows, labels)
    saved = embed.copy()
    embed[:] = 0.0  # writes the engine's weight in place
    assert model.loss(rows, labels) != before
    model.set_weights({"model.embed_tokens.weight": saved.astype(np.float64)})  # converted, copied in
    assert model.loss(rows, labels) == before
    with pytest.raises(surogate.UserError, match="no weight"):
        model.weight("model.embed.weight")


def test_torch_tensors_share_the_engine_memory(surogate_package, trained):
    torch = optional_import("torch")  # not in CI (no CPU-only torch on PyPI); run where torch is installed
    model = surogate_package.module.load(trained["python_out"], seq_len=32)
    tensor = model.weight("model.norm.weight", "torch")
    assert tensor.data_ptr() == model.data_pointer("model.norm.weight")
    tensor.mul_(2.0)
    assert np.array_equal(model.weight("model.norm.weight"), tensor.numpy())


def test_lora_adapter_trained_from_python_loads_with_its_matrices(surogate_package, trained, tmp_path):
    surogate = surogate_package.module
    out = tmp_path / "lora"
    base = trained["python_out"]
    options = quickstart_options(trained["ex"], out, model=str(base), lora=True, lora_rank=4, lora_alpha=8,
                                 max_steps=6)
    surogate.train(options)
    assert (out / "adapter_model.safetensors").exists()
    rows, labels = held_out_rows(trained["ex"], 4)
    model = surogate.load(base, adapter=out, batch_size=4, seq_len=64)
    lora = model.lora_weights()
    assert lora and all(".lora_A.weight" in name or ".lora_B.weight" in name for name in lora)
    assert any(np.abs(values).max() > 0 for name, values in lora.items() if "lora_B" in name)
    data = tmp_path / "eval.jsonl"
    data.write_text("".join(json.dumps({"input_ids": r, "labels": l}) + "\n" for r, l in zip(rows, labels)))
    cli = run_surogate(surogate_package.cli, "eval", "--model", base, "--adapter", out, "--data", data)
    assert cli.returncode == 0, cli.stderr
    # Separate adapter matrices vs merged into the weights (the CLI): fp32 rounding only.
    assert model.loss(rows, labels) == pytest.approx(json.loads(cli.stdout.strip().splitlines()[-1])["loss"], rel=1e-5)
    torch = optional_import("torch")  # with torch + peft installed: PEFT loads the adapter trained from Python
    peft = optional_import("peft")
    transformers = optional_import("transformers")
    hf = peft.PeftModel.from_pretrained(transformers.AutoModelForCausalLM.from_pretrained(base), out).eval()
    with torch.no_grad():
        result = hf(input_ids=torch.tensor([rows[0]]), labels=torch.tensor([labels[0]]))
    assert float(result.loss) == pytest.approx(model.loss([rows[0]], [labels[0]]), rel=1e-4)
