"""Bad model, tokenizer and adapter files: one clear error (exit 2, naming the file and the key or
tensor), never a crash, an out-of-memory kill or silently wrong output. Each test failed before its
fix: the sizes crashed or predicted "fits", a NaN adapter was merged into the model, an eos_token
missing from the vocabulary was silently dropped from every sample, and adapter settings Surogate
does not apply were ignored."""
import json
import math
import struct

from conftest import run_surogate
from test_input_errors import user_error, write_text_run
from tiny_model import TOKENIZER_CONFIG, char_tokenizer, f32_tensor, llama_config, tokenizer_size, weight_shapes, \
    write_model, write_safetensors

VOCAB = tokenizer_size(char_tokenizer())


# ---- config.json sizes ----

def test_absurd_sizes_in_config_json_name_the_file_and_key(surogate_bin, tmp_path):
    """vocab_size 2^56 ended `pt` in an internal error, 2^62 made --dry-run predict 15.2 MiB and
    'fits', intermediate_size 2^62 gave a graph error naming neither file nor key."""
    for key, value in (("vocab_size", 2 ** 56), ("vocab_size", 2 ** 62), ("intermediate_size", 2 ** 62),
                       ("hidden_size", 2 ** 40)):
        model = write_model(tmp_path / f"model-{key}-{value}", **{key: value})
        config = write_text_run(tmp_path, model)
        for command in (["pt", config, "--dry-run"], ["pt", config],
                        ["eval", "--model", model, "--data", tmp_path / "data.jsonl"]):
            stderr = user_error(run_surogate(surogate_bin, *command))
            assert f"{model / 'config.json'}: '{key}' is {value}, larger than any model's" in stderr, stderr


def test_sizes_that_together_describe_an_impossible_model(surogate_bin, tmp_path):
    model = write_model(tmp_path / "model", num_hidden_layers=10000, hidden_size=65536, intermediate_size=2 ** 24,
                        num_attention_heads=512, head_dim=128, num_key_value_heads=512)
    stderr = user_error(run_surogate(surogate_bin, "pt", write_text_run(tmp_path, model), "--dry-run"))
    assert f"{model / 'config.json'}: 'hidden_size' and the other sizes" in stderr
    assert "more than any machine holds" in stderr


def test_huge_sequence_len_does_not_wrap_into_a_small_prediction(surogate_bin, tmp_path):
    """Sizes from the run's options meet the model's in the planner's products: one that wraps
    around 64 bits is an error, not a tiny prediction that "fits"."""
    model = write_model(tmp_path / "model")
    config = write_text_run(tmp_path, model)
    stderr = user_error(run_surogate(surogate_bin, "pt", config, "--dry-run", f"--sequence_len={2 ** 62}"))
    assert "has more than 2^47 elements, more than any machine holds" in stderr, stderr


# ---- eval requests larger than memory ----

def test_eval_sequence_length_beyond_memory_is_refused_before_allocating(surogate_bin, tmp_path):
    """--seq-len 2000000000 grew to 24 GB and was killed (rc 137) before any check."""
    model = write_model(tmp_path / "model", weights=True)
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"input_ids": [4, 5, 6, 7]}) + "\n")
    result = run_surogate(surogate_bin, "eval", "--model", model, "--data", data, "--seq-len", "2000000000")
    stderr = user_error(result)
    assert "--seq-len 2000000000 with --batch-size 1: the evaluation needs at least" in stderr
    assert f"the longest row of {data} has 4 tokens" in stderr
    stderr = user_error(run_surogate(surogate_bin, "eval", "--model", model, "--data", data, "--batch-size",
                                     "4000000000", "--seq-len", "8"))
    assert "--batch-size 4000000000" in stderr and "Lower --seq-len" in stderr
    ok = run_surogate(surogate_bin, "eval", "--model", model, "--data", data, "--seq-len", "16")
    assert ok.returncode == 0, ok.stderr


def test_eval_zero_counts_say_what_is_wrong(surogate_bin, tmp_path):
    """--batch-size 0 printed CLI11's double range, a 309-digit number."""
    model = write_model(tmp_path / "model", weights=True)
    for option in ("--batch-size", "--seq-len", "--lmhead-chunks"):
        result = run_surogate(surogate_bin, "eval", "--model", model, "--data", tmp_path / "x.jsonl", option, "0")
        assert result.returncode == 2, result.stderr
        assert f"{option}: must be a whole number of at least 1, got '0'" in result.stderr, result.stderr
        assert "308" not in result.stderr and "e+308" not in result.stderr


# ---- special tokens ----

def test_eos_token_missing_from_the_vocabulary_is_refused(surogate_bin, tmp_path):
    """An eos_token the tokenizer has no id for silently dropped EOS from every sample (exit 0)."""
    for key in ("eos_token", "pad_token"):
        model = write_model(tmp_path / f"model-{key}", weights=True)
        (model / "tokenizer_config.json").write_text(json.dumps({**TOKENIZER_CONFIG, key: "<|not-a-token|>"}))
        config = write_text_run(tmp_path, model)
        for command in (["pt", config], ["sft", config], ["preview", config], ["pt", config, "--dry-run"]):
            stderr = user_error(run_surogate(surogate_bin, *command))
            assert (f"{model / 'tokenizer_config.json'}: {key} '<|not-a-token|>' is not a token of "
                    f"{model / 'tokenizer.json'}") in stderr, stderr


# ---- non-finite weights and adapters ----

def write_adapter(folder, config_overrides=None, lora_a_value=0.01, modules=("q_proj",)):
    """A PEFT LoRA adapter of rank 2 for the tiny Llama's layer-0 projections."""
    folder.mkdir(parents=True, exist_ok=True)
    config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 2, "lora_alpha": 4, "target_modules": list(modules),
              "bias": "none", "use_dora": False, "modules_to_save": None, "fan_in_fan_out": False}
    config.update(config_overrides or {})
    (folder / "adapter_config.json").write_text(json.dumps(config))
    shapes = {"q_proj": (32, 32), "k_proj": (16, 32), "v_proj": (16, 32), "o_proj": (32, 32)}
    tensors = {}
    for module in modules:
        out, inp = shapes[module]
        prefix = f"base_model.model.model.layers.0.self_attn.{module}"
        tensors[prefix + ".lora_A.weight"] = f32_tensor([2, inp], lora_a_value)
        tensors[prefix + ".lora_B.weight"] = f32_tensor([out, 2], 0.02)
    write_safetensors(folder / "adapter_model.safetensors", tensors)
    return folder


def test_non_finite_adapter_is_refused_by_merge_and_eval(surogate_bin, tmp_path):
    """merge wrote NaN into the merged model and exited 0; eval --adapter printed "loss": null."""
    model = write_model(tmp_path / "model", weights=True)
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"input_ids": [4, 5, 6, 7]}) + "\n")
    good = write_adapter(tmp_path / "good")
    assert run_surogate(surogate_bin, "merge", "--model", model, "--adapter", good, "--output", tmp_path / "m").returncode == 0
    for bad_value, name in ((math.nan, "nan"), (math.inf, "inf")):
        adapter = write_adapter(tmp_path / f"bad-{name}", lora_a_value=bad_value)
        out = tmp_path / f"merged-{name}"
        stderr = user_error(run_surogate(surogate_bin, "merge", "--model", model, "--adapter", adapter, "--output", out))
        assert (f"{adapter / 'adapter_model.safetensors'}: tensor "
                f"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight holds a non-finite value "
                f"({name} at element 0)") in stderr, stderr
        assert not (out / "model.safetensors").exists()
        stderr = user_error(run_surogate(surogate_bin, "eval", "--model", model, "--data", data, "--adapter", adapter))
        assert "holds a non-finite value" in stderr


def test_non_finite_base_weights_are_refused_by_merge_and_eval(surogate_bin, tmp_path):
    model = write_model(tmp_path / "model")
    tensors = {name: f32_tensor(shape) for name, shape in weight_shapes(llama_config(VOCAB)).items()}
    values = [0.01] * (32 * 64)
    values[70] = -math.inf
    tensors["model.layers.0.mlp.down_proj.weight"] = ("F32", [32, 64], struct.pack(f"<{len(values)}f", *values))
    write_safetensors(model / "model.safetensors", tensors)
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"input_ids": [4, 5, 6]}) + "\n")
    expected = f"{model}: tensor model.layers.0.mlp.down_proj.weight holds a non-finite value (-inf at element 70)"
    stderr = user_error(run_surogate(surogate_bin, "merge", "--model", model, "--adapter", write_adapter(tmp_path / "a"),
                                     "--output", tmp_path / "merged"))
    assert expected in stderr
    assert expected in user_error(run_surogate(surogate_bin, "eval", "--model", model, "--data", data))


def test_adapter_settings_that_would_not_be_applied_are_refused(surogate_bin, tmp_path):
    """use_dora: true, target_modules Surogate cannot place and modules_to_save loaded as plain LoRA."""
    model = write_model(tmp_path / "model", weights=True)
    cases = [
        ({"use_dora": True}, ("q_proj",), "'use_dora' is true (DoRA (weight-decomposed LoRA)), which Surogate does not apply"),
        ({"modules_to_save": ["lm_head"]}, ("q_proj",), "'modules_to_save' is [\"lm_head\"]"),
        ({"rank_pattern": {"q_proj": 8}}, ("q_proj",), "'rank_pattern' is"),
        ({"target_modules": ["q_proj", "embed_tokens"]}, ("q_proj",),
         "target_modules names 'embed_tokens', which is not a projection of this model"),
        ({"target_modules": ["q_proj", "v_proj"]}, ("q_proj",),
         "target_modules names 'v_proj', but adapter_model.safetensors holds no lora_A / lora_B for it"),
        ({"target_modules": ".*q_proj"}, ("q_proj",), "'target_modules' is the pattern \".*q_proj\""),
    ]
    for index, (overrides, modules, expected) in enumerate(cases):
        adapter = write_adapter(tmp_path / f"adapter-{index}", overrides, modules=modules)
        stderr = user_error(run_surogate(surogate_bin, "merge", "--model", model, "--adapter", adapter, "--output",
                                         tmp_path / f"merged-{index}"))
        assert f"{adapter / 'adapter_config.json'}: " in stderr and expected in stderr, (overrides, stderr)
    ok = write_adapter(tmp_path / "ok", {"target_modules": ["q_proj", "v_proj"]}, modules=("q_proj", "v_proj"))
    result = run_surogate(surogate_bin, "merge", "--model", model, "--adapter", ok, "--output", tmp_path / "merged-ok")
    assert result.returncode == 0, result.stderr
