"""Every user mistake gets one clear error: exit code 2 and a message naming the file / key / line
and what to do — never a crash, an "internal error" (exit 1) or silently wrong output. Each test
makes one class of mistake with a tiny model folder (tests/python/tiny_model.py) and runs the
built `surogate` binary the way a user would."""
import json
import math
import struct

from conftest import run_surogate
from tiny_model import char_tokenizer, f32_tensor, llama_config, tokenizer_size, weight_shapes, write_model, \
    write_safetensors


def user_error(result):
    """Asserts the run failed as a user error and returns its stderr."""
    assert "internal error" not in result.stderr, result.stderr
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    return result.stderr


def write_text_run(tmp_path, model, rows=None, extra="", name="run.yaml"):
    data = tmp_path / "data.jsonl"
    if not data.exists() or rows is not None:
        data.write_text("".join(json.dumps(row) + "\n" for row in (rows or [{"text": "abc cab bca"}] * 20)))
    config = tmp_path / name
    config.write_text(f"model: {model}\noutput_dir: {tmp_path / 'out'}\nsequence_len: 32\nlora: false\n"
                      f"max_steps: 1\nper_device_train_batch_size: 1\ngradient_accumulation_steps: 1\n"
                      f"datasets:\n  - path: {data}\n    type: text\n{extra}")
    return config


# ---- tokenizer and model that do not belong together ----

def test_tokenizer_with_ids_beyond_vocab_size_is_caught_before_training(surogate_bin, tmp_path):
    """The known bug: a tokenizer producing ids >= config.json's vocab_size ended in an internal
    error inside the embedding op. Now every command that tokenizes for this model says so first,
    naming both files and both numbers."""
    tokenizer = char_tokenizer(extra_tokens=3)
    size = tokenizer_size(tokenizer)
    model = write_model(tmp_path / "model", vocab_size=20, tokenizer=tokenizer, weights=True)
    config = write_text_run(tmp_path, model)

    def check(stderr):
        assert f"{model / 'tokenizer.json'} can produce token ids up to {size - 1} ('<extra_2>')" in stderr
        assert f"{model / 'config.json'} gives vocab_size 20" in stderr
        assert f"set vocab_size in {model / 'config.json'} to at least {size}" in stderr

    for command in (["pt", config, "--dry-run"], ["pt", config], ["sft", config], ["tokenize", config],
                    ["preview", config]):
        check(user_error(run_surogate(surogate_bin, *command)))
    assert not (tmp_path / "out" / "tokenized").exists()  # stopped before tokenizing anything
    check(user_error(run_surogate(surogate_bin, "eval", "--model", model, "--data", tmp_path / "data.jsonl")))

    # The same folder with a vocab_size that covers the tokenizer trains.
    (model / "config.json").write_text(json.dumps(llama_config(size)))
    write_safetensors(model / "model.safetensors",
                      {name: f32_tensor(shape) for name, shape in weight_shapes(llama_config(size)).items()})
    result = run_surogate(surogate_bin, "pt", config)
    assert result.returncode == 0, result.stderr


def test_dry_run_loads_the_tokenizer_and_chat_template(surogate_bin, tmp_path):
    model = write_model(tmp_path / "model")
    config = write_text_run(tmp_path, model)
    assert run_surogate(surogate_bin, "pt", config, "--dry-run").returncode == 0
    (model / "tokenizer.json").unlink()
    stderr = user_error(run_surogate(surogate_bin, "pt", config, "--dry-run"))
    assert f"{model / 'tokenizer.json'}: not found" in stderr
    write_model(model)
    tokenizer_config = json.loads((model / "tokenizer_config.json").read_text())
    (model / "tokenizer_config.json").write_text(json.dumps({**tokenizer_config, "chat_template": "{% for m in x %}"}))
    stderr = user_error(run_surogate(surogate_bin, "sft", config, "--dry-run"))
    assert f"chat template {model / 'tokenizer_config.json'}, line 1" in stderr and "never closed" in stderr


def test_post_processor_ids_outside_the_tokenizer_vocabulary(surogate_bin, tmp_path):
    """A tokenizer.json whose post-processor adds an id it does not have (negative, past its
    vocabulary, or past int32) used to reach the embedding op, or wrap around silently."""
    for bad_id in (-7, 5000, 2 ** 40):
        tokenizer = char_tokenizer()
        tokenizer["post_processor"] = {
            "type": "TemplateProcessing", "pair": [],
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [bad_id], "tokens": ["<s>"]}}}
        model = write_model(tmp_path / f"model{bad_id}", tokenizer=tokenizer, weights=True)
        config = write_text_run(tmp_path, model, name=f"run{bad_id}.yaml")
        for command in (["pt", config], ["pt", config, "--dry-run"]):
            stderr = user_error(run_surogate(surogate_bin, *command))
            assert f"{model / 'tokenizer.json'}: key 'post_processor.special_tokens.<s>.ids'" in stderr, stderr
            assert str(bad_id) in stderr


# ---- model files ----

def test_config_json_dtype_that_outputs_cannot_use_is_refused_up_front(surogate_bin, tmp_path):
    """torch_dtype int8 passed the dry run and failed after the whole training run."""
    model = write_model(tmp_path / "model", torch_dtype="int8")
    config = write_text_run(tmp_path, model)
    for command in (["pt", config, "--dry-run"], ["pt", config]):
        stderr = user_error(run_surogate(surogate_bin, *command))
        assert f"{model / 'config.json'}: 'torch_dtype' is 'int8'" in stderr
        assert "bfloat16, float16 or float32" in stderr
    assert not (tmp_path / "out" / "tokenized").exists()


def test_non_finite_weights_name_the_tensor_not_the_learning_rate(surogate_bin, tmp_path):
    """NaN weights used to surface as 'training diverged at step 1 ... lower learning_rate'."""
    model = write_model(tmp_path / "model")
    tensors = {name: f32_tensor(shape) for name, shape in weight_shapes(llama_config(tokenizer_size(char_tokenizer()))).items()}
    tensors["model.norm.weight"] = ("F32", [32], struct.pack("<32f", *([1.0] * 5 + [math.nan] + [1.0] * 26)))
    write_safetensors(model / "model.safetensors", tensors)
    stderr = user_error(run_surogate(surogate_bin, "pt", write_text_run(tmp_path, model)))
    assert f"{model}: tensor model.norm.weight holds a non-finite value (nan at element 5)" in stderr
    assert "diverged" not in stderr


# ---- chat templates ----

def test_runaway_chat_template_recursion_is_an_error_not_a_crash(surogate_bin, tmp_path):
    """A recursive macro without a base case overflowed the stack (segmentation fault)."""
    model = write_model(tmp_path / "model")
    tokenizer_config = json.loads((model / "tokenizer_config.json").read_text())
    tokenizer_config["chat_template"] = "{% macro f(x) %}{{ f(x) }}{% endmacro %}\n{{ f(messages) }}"
    (model / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    rows = [{"messages": [{"role": "user", "content": "ab"}, {"role": "assistant", "content": "ba"}]}] * 4
    config = write_text_run(tmp_path, model, rows=rows)
    config.write_text(config.read_text().replace("type: text", "type: conversation"))
    stderr = user_error(run_surogate(surogate_bin, "sft", config))
    assert f"{tmp_path / 'data.jsonl'}:1: the chat template failed" in stderr
    assert f"chat template {model / 'tokenizer_config.json'}, line 1" in stderr and "nest more than 200 deep" in stderr


# ---- datasets ----

def test_no_training_documents_says_what_happened_to_each_dataset(surogate_bin, tmp_path):
    model = write_model(tmp_path / "model")
    config = write_text_run(tmp_path, model, extra="max_length: 4\n")
    stderr = user_error(run_surogate(surogate_bin, "pt", config))
    assert f"{tmp_path / 'data.jsonl'}: 20 rows read; 20 dropped: longer than max_length (truncation_strategy: delete)" \
        in stderr
    assert "max_length / sequence_len (4 / 32)" in stderr
    (tmp_path / "data.jsonl").write_text("")
    stderr = user_error(run_surogate(surogate_bin, "tokenize", config))
    assert f"{tmp_path / 'data.jsonl'}: 0 rows read (the dataset is empty)" in stderr


def test_null_field_is_named_as_null(surogate_bin, tmp_path):
    model = write_model(tmp_path / "model")
    config = write_text_run(tmp_path, model, rows=[{"text": None}])
    stderr = user_error(run_surogate(surogate_bin, "pt", config))
    assert f"{tmp_path / 'data.jsonl'}:1: field 'text' (text_field) is null" in stderr


def test_misspelt_prompt_format_placeholder(surogate_bin, tmp_path):
    """'{instrution}' stayed in every prompt as literal text, silently dropping the instruction."""
    model = write_model(tmp_path / "model")
    config = write_text_run(tmp_path, model, rows=[{"q": "ab", "a": "ba"}] * 10)
    config.write_text(config.read_text().replace(
        "type: text\n", 'type: instruction\n    instruction_field: q\n    output_field: a\n'
                        '    prompt_format: "Q: {instrution} A: {output}"\n'))
    stderr = user_error(run_surogate(surogate_bin, "sft", config, "--dry-run"))
    assert f"{config}:13: option 'datasets[0].prompt_format' uses the placeholder {{instrution}}" in stderr


# ---- command line and output paths ----

def test_output_dir_that_is_a_file(surogate_bin, tmp_path):
    model = write_model(tmp_path / "model")
    config = write_text_run(tmp_path, model)
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    stderr = user_error(run_surogate(surogate_bin, "pt", config, "--dry-run", f"--output_dir={blocker}"))
    assert f"command line --output_dir={blocker}: output_dir '{blocker}' is a file" in stderr
    stderr = user_error(run_surogate(surogate_bin, "tokenize", config, f"--output_dir={blocker}"))
    assert f"output_dir '{blocker}' is a file; output_dir must be a folder" in stderr
    stderr = user_error(run_surogate(surogate_bin, "tokenize", config, f"--output={blocker / 'dataset.surotok'}"))
    assert f"cannot create the token cache folder {blocker}" in stderr


def test_bad_paths_on_the_command_line(surogate_bin, tmp_path):
    model = write_model(tmp_path / "model", weights=True)
    config = write_text_run(tmp_path, model)
    stderr = user_error(run_surogate(surogate_bin, "pt", tmp_path, "--dry-run"))
    assert f"the config file '{tmp_path}' is a folder" in stderr
    stderr = user_error(run_surogate(surogate_bin, "pt", config, "--dry-run", "--datasets.99999999999999999999.path=x"))
    assert "must name an existing entry" in stderr
    stderr = user_error(run_surogate(surogate_bin, "eval", "--model", model, "--data", tmp_path))
    assert f"{tmp_path}: is a folder; --data takes one JSONL file" in stderr
