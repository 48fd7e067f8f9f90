"""`surogate generate` against transformers' generate(do_sample=False) in fp32 on the CPU: token
for token on the HF-parity fixtures (dense, sliding window, MoE), with a PEFT LoRA adapter applied
unmerged, and for a conversation rendered with Qwen3's chat template (enable_thinking honoured).
Prompts whose greedy path passes a near-tie (top-2 margin under 1e-4 in transformers' scores)
are skipped, so fp32 rounding cannot decide a token. Also: the output file's rows, finish reasons,
seeded sampling reproducible and independent of --batch_size, stop strings, and the errors."""
import json
import shutil

import numpy as np
import pytest

from conftest import REPO_ROOT, run_surogate

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

FIXTURES = REPO_ROOT / "tests" / "fixtures"
PARITY_FIXTURES = ["llama_gqa_llama3", "qwen3_qknorm", "mistral_sliding", "qwen2_bias_tied", "qwen3_moe_topk",
                   "mixtral_topk"]
NEW_TOKENS = 10


def hf_greedy(model, prompt, new_tokens=NEW_TOKENS):
    """transformers' greedy completion ids, and the smallest top-1 / top-2 margin on its path."""
    ids = torch.tensor([prompt])
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=new_tokens,
                             output_scores=True, return_dict_in_generate=True)
    margin = min(float((s[0].topk(2).values[0] - s[0].topk(2).values[1])) for s in out.scores)
    return out.sequences[0, len(prompt):].tolist(), margin


def clear_prompts(model, vocab, count=3, new_tokens=NEW_TOKENS):
    rng = np.random.default_rng(7)
    chosen = []
    for _ in range(40):
        prompt = rng.integers(3, vocab, size=int(rng.integers(2, 9))).tolist()
        completion, margin = hf_greedy(model, prompt, new_tokens)
        if margin > 1e-4:
            chosen.append((prompt, completion))
        if len(chosen) == count:
            return chosen
    pytest.fail("no prompt without a near-tie")


def generate_file(surogate_bin, tmp_path, model, rows, *args, device="cpu"):
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = run_surogate(surogate_bin, "generate", "--model", model, "--input", source, "--output", target,
                          "--device", device, *args)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in target.read_text().splitlines()]


def finish_reason(completion, eos, new_tokens=NEW_TOKENS):
    return "stop" if completion[-1] in eos else "length"


def eos_ids(folder):
    config = json.loads((folder / "config.json").read_text())
    eos = config.get("eos_token_id")
    return set(eos if isinstance(eos, list) else [eos])


@pytest.mark.parametrize("name", PARITY_FIXTURES)
def test_greedy_matches_transformers(surogate_bin, tmp_path, name):
    folder = FIXTURES / name
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    cases = clear_prompts(model, model.config.vocab_size)
    rows = generate_file(surogate_bin, tmp_path, folder, [{"input_ids": p, "id": i} for i, (p, _) in enumerate(cases)],
                         "--max_new_tokens", NEW_TOKENS, "--temperature", 0, "--batch_size", 2)
    for row, (prompt, completion) in zip(rows, cases):
        assert row["input_ids"] == prompt  # the input row comes back, in order, with its own fields
        assert row["completion_ids"] == completion
        assert row["finish_reason"] == finish_reason(completion, eos_ids(folder))
        assert "completion" not in row  # the fixtures have no tokenizer


def test_greedy_with_a_lora_adapter_matches_peft(surogate_bin, tmp_path):
    peft = pytest.importorskip("peft")
    folder = FIXTURES / "qwen3_qknorm"
    base = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    torch.manual_seed(3)
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"],
                             init_lora_weights=False)
    model = peft.get_peft_model(base, config).eval()
    adapter = tmp_path / "adapter"
    model.save_pretrained(adapter)
    cases = clear_prompts(model, base.config.vocab_size, count=2)
    without = clear_prompts(base, base.config.vocab_size, count=1)  # the adapter must change something
    rows = generate_file(surogate_bin, tmp_path, folder, [{"input_ids": p} for p, _ in cases],
                         "--adapter", adapter, "--max_new_tokens", NEW_TOKENS, "--temperature", 0)
    assert [row["completion_ids"] for row in rows] == [completion for _, completion in cases]
    with torch.no_grad(), model.disable_adapter():
        plain, _ = hf_greedy(model, cases[0][0])
    assert plain != cases[0][1] or without, "the adapter changes no greedy token; the test could not fail"


@pytest.fixture(scope="module")
def qwen3_chat_model(tmp_path_factory, tokenizers_dir):
    """A random-weight Qwen3 with the real Qwen3 tokenizer and chat template."""
    folder = tmp_path_factory.mktemp("qwen3_chat")
    for file in (tokenizers_dir / "qwen3").iterdir():
        shutil.copy(file, folder / file.name)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    config = transformers.Qwen3Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                                      max_position_embeddings=512, tie_word_embeddings=True,
                                      eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"))
    torch.manual_seed(0)
    model = transformers.Qwen3ForCausalLM(config)
    with torch.no_grad():
        model.model.embed_tokens.weight.normal_(0.0, 1.0)  # logits spread wide: no near-ties
    model.save_pretrained(folder)
    return folder


@pytest.mark.parametrize("thinking", [None, False])
def test_a_conversation_uses_the_chat_template(surogate_bin, tmp_path, qwen3_chat_model, thinking):
    tokenizer = transformers.AutoTokenizer.from_pretrained(qwen3_chat_model)
    model = transformers.AutoModelForCausalLM.from_pretrained(qwen3_chat_model, dtype=torch.float32).eval()
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hello in French."}]
    kwargs = {} if thinking is None else {"enable_thinking": thinking}
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, **kwargs)
    prompt = prompt["input_ids"] if isinstance(prompt, dict) or hasattr(prompt, "keys") else prompt
    completion, margin = hf_greedy(model, list(prompt))
    assert margin > 1e-4
    row = {"messages": messages, **kwargs}
    [out] = generate_file(surogate_bin, tmp_path, qwen3_chat_model, [row], "--max_new_tokens", NEW_TOKENS,
                          "--temperature", 0)
    assert out["completion_ids"] == completion
    assert out["completion"] == tokenizer.decode(completion, skip_special_tokens=True)
    assert out["messages"] == messages


def test_a_text_prompt_prints_its_completion(surogate_bin, qwen3_chat_model):
    tokenizer = transformers.AutoTokenizer.from_pretrained(qwen3_chat_model)
    model = transformers.AutoModelForCausalLM.from_pretrained(qwen3_chat_model, dtype=torch.float32).eval()
    completion, _ = hf_greedy(model, tokenizer("The capital of France is")["input_ids"], 6)
    result = run_surogate(surogate_bin, "generate", "--model", qwen3_chat_model, "--prompt", "The capital of France is",
                          "--max_new_tokens", 6, "--temperature", 0, "--device", "cpu")
    assert result.returncode == 0, result.stderr
    assert result.stdout == tokenizer.decode(completion, skip_special_tokens=True) + "\n"


def test_seeded_sampling_is_reproducible_and_independent_of_the_batch(surogate_bin, tmp_path):
    folder = FIXTURES / "qwen3_qknorm"
    rows = [{"input_ids": [5, 6, 7 + i]} for i in range(4)]
    sample = ["--max_new_tokens", 12, "--temperature", 1.0, "--top_k", 0, "--seed", 11]
    first = generate_file(surogate_bin, tmp_path, folder, rows, *sample, "--batch_size", 1)
    again = generate_file(surogate_bin, tmp_path, folder, rows, *sample, "--batch_size", 3)
    assert [r["completion_ids"] for r in first] == [r["completion_ids"] for r in again]
    other = generate_file(surogate_bin, tmp_path, folder, rows, *sample[:-1], 12)
    assert [r["completion_ids"] for r in first] != [r["completion_ids"] for r in other]
    greedy = generate_file(surogate_bin, tmp_path, folder, rows, "--max_new_tokens", 12, "--temperature", 0)
    assert [r["completion_ids"] for r in first] != [r["completion_ids"] for r in greedy]


@pytest.mark.parametrize("args,message", [
    (["--prompt", "x", "--input", "in.jsonl"], "either --prompt TEXT or --input"),
    (["--input", "in.jsonl"], "--input needs --output"),
    (["--input", "in.jsonl", "--output", "o.jsonl", "--top_p", "0"], "top_p"),
    (["--input", "in.jsonl", "--output", "o.jsonl", "--max_new_tokens", "100000"], "context"),
    (["--input", "bad.jsonl", "--output", "o.jsonl"], "bad.jsonl:2"),
    (["--input", "ids.jsonl", "--output", "o.jsonl"], "outside the model's vocabulary"),
    (["--input", "text.jsonl", "--output", "o.jsonl"], "has no tokenizer.json"),
])
def test_bad_input_is_one_clear_error(surogate_bin, tmp_path, args, message):
    folder = FIXTURES / "qwen3_qknorm"
    (tmp_path / "in.jsonl").write_text('{"input_ids": [1, 2]}\n')
    (tmp_path / "bad.jsonl").write_text('{"input_ids": [1, 2]}\n{"input_ids": [1], "prompt": "x"}\n')
    (tmp_path / "ids.jsonl").write_text('{"input_ids": [1, 100000]}\n')
    (tmp_path / "text.jsonl").write_text('{"prompt": "hello"}\n')
    result = run_surogate(surogate_bin, "generate", "--model", folder, "--device", "cpu", *args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr and "terminate called" not in result.stderr


def test_a_stop_string_ends_the_completion_before_it(surogate_bin, tmp_path, qwen3_chat_model):
    tokenizer = transformers.AutoTokenizer.from_pretrained(qwen3_chat_model)
    [free] = generate_file(surogate_bin, tmp_path, qwen3_chat_model, [{"prompt": "Once upon a time"}],
                           "--max_new_tokens", 12, "--temperature", 0)
    text = free["completion"]
    assert free["finish_reason"] == "length" and len(text) > 4
    stop = text[len(text) // 2:len(text) // 2 + 2]  # two characters from the middle
    cut = text.index(stop)
    [stopped] = generate_file(surogate_bin, tmp_path, qwen3_chat_model, [{"prompt": "Once upon a time"}],
                              "--max_new_tokens", 12, "--temperature", 0, "--stop", stop)
    assert stopped["finish_reason"] == "stop"
    assert stopped["completion"] == text[:cut]
    ids = stopped["completion_ids"]
    assert ids == free["completion_ids"][:len(ids)]  # the same tokens, up to the one completing the stop string
    assert stop in tokenizer.decode(ids) and stop not in tokenizer.decode(ids[:-1])


def test_chat_keeps_the_conversation_and_resets(surogate_bin, qwen3_chat_model):
    """`surogate chat` with piped input: each reply is transformers' greedy continuation of the whole
    conversation so far through the chat template; /reset starts over, /exit quits."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(qwen3_chat_model)
    model = transformers.AutoModelForCausalLM.from_pretrained(qwen3_chat_model, dtype=torch.float32).eval()

    def reply(messages):
        prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        prompt = prompt["input_ids"] if hasattr(prompt, "keys") else prompt
        completion, margin = hf_greedy(model, list(prompt), 8)
        assert margin > 1e-4
        return tokenizer.decode(completion, skip_special_tokens=True)

    system = {"role": "system", "content": "You are terse."}
    first = reply([system, {"role": "user", "content": "Say hi"}])
    second = reply([system, {"role": "user", "content": "Say hi"}, {"role": "assistant", "content": first},
                    {"role": "user", "content": "Again?"}])
    result = run_surogate(surogate_bin, "chat", "--model", qwen3_chat_model, "--device", "cpu", "--system",
                          "You are terse.", "--max_new_tokens", 8, "--temperature", 0, "--max_context", 256,
                          input_text="Say hi\nAgain?\n/reset\n\nSay hi\n/exit\nnever read\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{first}\n{second}\n{first}\n"


def test_chat_refuses_a_folder_without_a_chat_template(surogate_bin, tmp_path):
    folder = tmp_path / "plain"
    shutil.copytree(FIXTURES / "qwen3_qknorm", folder)
    result = run_surogate(surogate_bin, "chat", "--model", folder, "--device", "cpu", input_text="hi\n")
    assert result.returncode == 2 and "tokenizer.json" in result.stderr, result.stderr
