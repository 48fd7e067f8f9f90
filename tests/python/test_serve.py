"""`surogate serve` on the CPU with a tiny random Qwen3 (the real Qwen3 tokenizer and chat template),
talked to with the real `openai` client: greedy answers equal transformers' and `surogate generate`'s,
streaming gives the same text, completions from text and from ids, n choices with seeds, logprobs,
two LoRA adapters by name, concurrent clients, and the errors (400 naming the field, 404, 413, 401);
a client that disconnects mid-stream does not hurt the next requests; SIGTERM stops it cleanly."""
import json
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

from conftest import run_surogate
from serve_process import serve_process
from test_generate_cli import hf_greedy, qwen3_chat_model  # noqa: F401 (a fixture)

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
openai = pytest.importorskip("openai")
peft = pytest.importorskip("peft")

API_KEY = "sk-test-key"
MAX_REQUEST_BYTES = 1 << 20
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hello in French."}]
NEW_TOKENS = 8


@pytest.fixture(scope="module")
def adapters(qwen3_chat_model, tmp_path_factory):  # noqa: F811
    """Two PEFT LoRA adapters with random non-zero B, by name."""
    folders = {}
    for name, seed in (("alpha", 1), ("beta", 2)):
        base = transformers.AutoModelForCausalLM.from_pretrained(qwen3_chat_model, dtype=torch.float32)
        torch.manual_seed(seed)
        config = peft.LoraConfig(r=4, lora_alpha=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                                                  "down_proj"],
                                 init_lora_weights=False)
        folder = tmp_path_factory.mktemp(f"adapter_{name}")
        peft.get_peft_model(base, config).save_pretrained(folder)
        folders[name] = folder
    return folders


@pytest.fixture(scope="module")
def server(surogate_bin, qwen3_chat_model, adapters, tmp_path_factory):  # noqa: F811
    key_file = tmp_path_factory.mktemp("key") / "key.txt"
    key_file.write_text(API_KEY + "\n")
    args = [str(surogate_bin), "serve", "--model", str(qwen3_chat_model), "--device", "cpu", "--port", "0",
            "--batch_size", "4", "--max_context", "256", "--api_key_file", str(key_file),
            "--max_request_bytes", str(MAX_REQUEST_BYTES),
            # Small, so that chat prompts come in chunks while other requests decode.
            "--max_prefill_tokens", "16"]
    for name, folder in adapters.items():
        args += ["--adapter", f"{name}={folder}"]
    with serve_process(args) as served:
        yield served


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server["url"] + "/v1", api_key=API_KEY, max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def hf(qwen3_chat_model):  # noqa: F811
    tokenizer = transformers.AutoTokenizer.from_pretrained(qwen3_chat_model)
    model = transformers.AutoModelForCausalLM.from_pretrained(qwen3_chat_model, dtype=torch.float32).eval()
    return tokenizer, model


def chat_prompt(tokenizer, messages):
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    return list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)


def raw_request(server, path, body=None, headers=None, method=None):
    """(status, parsed JSON body) of a request made without the openai client."""
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    request = urllib.request.Request(server["url"] + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


AUTH = {"Authorization": f"Bearer {API_KEY}"}


def test_chat_greedy_equals_transformers_and_generate(surogate_bin, tmp_path, server, client, hf, qwen3_chat_model):  # noqa: F811
    tokenizer, model = hf
    prompt = chat_prompt(tokenizer, MESSAGES)
    completion, margin = hf_greedy(model, prompt, NEW_TOKENS)
    assert margin > 1e-4
    reply = client.chat.completions.create(model=server["base"], messages=MESSAGES, max_tokens=NEW_TOKENS,
                                           temperature=0)
    assert reply.object == "chat.completion"
    [choice] = reply.choices
    assert choice.message.role == "assistant"
    assert choice.message.content == tokenizer.decode(completion, skip_special_tokens=True)
    assert choice.finish_reason == ("stop" if completion[-1] == model.config.eos_token_id else "length")
    assert reply.usage.prompt_tokens == len(prompt)
    assert reply.usage.completion_tokens == len(completion)
    assert reply.usage.total_tokens == len(prompt) + len(completion)
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text(json.dumps({"messages": MESSAGES}) + "\n")
    result = run_surogate(surogate_bin, "generate", "--model", qwen3_chat_model, "--input", source, "--output", target,
                          "--device", "cpu", "--max_new_tokens", NEW_TOKENS, "--temperature", 0)
    assert result.returncode == 0, result.stderr
    assert json.loads(target.read_text())["completion"] == choice.message.content


def test_streaming_gives_the_same_text_in_chunks(server, client):
    whole = client.chat.completions.create(model=server["base"], messages=MESSAGES, max_tokens=NEW_TOKENS,
                                           temperature=0).choices[0]
    chunks = list(client.chat.completions.create(model=server["base"], messages=MESSAGES, max_tokens=NEW_TOKENS,
                                                 temperature=0, stream=True, stream_options={"include_usage": True}))
    assert all(chunk.object == "chat.completion.chunk" for chunk in chunks)
    with_choices = [chunk for chunk in chunks if chunk.choices]
    assert len(with_choices) >= 2  # the text came in pieces
    assert with_choices[0].choices[0].delta.role == "assistant"
    assert "".join(chunk.choices[0].delta.content or "" for chunk in with_choices) == whole.message.content
    assert [chunk.choices[0].finish_reason for chunk in with_choices][-1] == whole.finish_reason
    assert all(chunk.choices[0].finish_reason is None for chunk in with_choices[:-1])
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0


def test_completions_from_text_and_from_ids(server, client, hf):
    tokenizer, model = hf
    text = "The capital of France is"
    completion, _ = hf_greedy(model, tokenizer(text)["input_ids"], NEW_TOKENS)
    reply = client.completions.create(model=server["base"], prompt=text, max_tokens=NEW_TOKENS, temperature=0)
    assert reply.object == "text_completion"
    assert reply.choices[0].text == tokenizer.decode(completion, skip_special_tokens=True)
    ids = [9707, 11, 1879, 0, 576]
    completion, _ = hf_greedy(model, ids, NEW_TOKENS)
    reply = client.completions.create(model=server["base"], prompt=ids, max_tokens=NEW_TOKENS, temperature=0)
    assert reply.choices[0].text == tokenizer.decode(completion, skip_special_tokens=True)
    assert reply.usage.prompt_tokens == len(ids)
    streamed = client.completions.create(model=server["base"], prompt=ids, max_tokens=NEW_TOKENS, temperature=0,
                                         stream=True)
    assert "".join(chunk.choices[0].text for chunk in streamed) == reply.choices[0].text


def test_a_list_of_prompts_answers_each_in_openai_order(server, client, hf):
    tokenizer, model = hf
    texts = ["The capital of France is", "Once upon a time"]
    ids = [[9707, 11, 1879, 0, 576], [100, 2000, 5000]]
    for prompts, as_ids in ((texts, [tokenizer(t)["input_ids"] for t in texts]), (ids, ids)):
        expected = [tokenizer.decode(hf_greedy(model, p, NEW_TOKENS)[0], skip_special_tokens=True) for p in as_ids]
        reply = client.completions.create(model=server["base"], prompt=prompts, max_tokens=NEW_TOKENS, temperature=0,
                                          n=2)
        # Prompt i's n choices are indices i * n ... i * n + n - 1.
        by_index = {choice.index: choice.text for choice in reply.choices}
        assert by_index == {0: expected[0], 1: expected[0], 2: expected[1], 3: expected[1]}
        assert reply.usage.prompt_tokens == sum(len(p) for p in as_ids)
        streamed = client.completions.create(model=server["base"], prompt=prompts, max_tokens=NEW_TOKENS,
                                             temperature=0, stream=True)
        texts_by_index = {}
        for chunk in streamed:
            for choice in chunk.choices:
                texts_by_index[choice.index] = texts_by_index.get(choice.index, "") + choice.text
        assert texts_by_index == {0: expected[0], 1: expected[1]}


def test_n_choices_with_a_seed_are_reproducible(server, client):
    def ask(n, seed):
        reply = client.completions.create(model=server["base"], prompt="Once upon a time", max_tokens=6,
                                          temperature=1.5, n=n, seed=seed)
        return [choice.text for choice in sorted(reply.choices, key=lambda c: c.index)]
    first = ask(2, 11)
    assert len(first) == 2
    assert ask(2, 11) == first
    assert ask(1, 12) == first[1:]  # choice i samples with seed + i
    assert ask(1, 11) == first[:1]


def test_logprobs_are_consistent(server, client, hf):
    tokenizer, model = hf
    prompt = chat_prompt(tokenizer, MESSAGES)
    reply = client.chat.completions.create(model=server["base"], messages=MESSAGES, max_tokens=4, temperature=0,
                                           logprobs=True, top_logprobs=3)
    content = reply.choices[0].logprobs.content
    assert len(content) == reply.usage.completion_tokens
    for entry in content:
        assert entry.logprob <= 0
        assert len(entry.top_logprobs) == 3
        values = [top.logprob for top in entry.top_logprobs]
        assert values == sorted(values, reverse=True)
        assert entry.top_logprobs[0].token == entry.token  # greedy: the chosen token is the most likely
        assert entry.top_logprobs[0].logprob == pytest.approx(entry.logprob, abs=1e-9)
    with torch.no_grad():
        logits = model(torch.tensor([prompt])).logits[0, -1]
    expected = torch.log_softmax(logits.double(), dim=-1).max().item()
    assert content[0].logprob == pytest.approx(expected, abs=1e-4)  # fp32 forward, tolerance of its rounding
    legacy = client.completions.create(model=server["base"], prompt="Hello", max_tokens=3, temperature=0, logprobs=2)
    logprobs = legacy.choices[0].logprobs
    assert len(logprobs.tokens) == len(logprobs.token_logprobs) == len(logprobs.top_logprobs) == 3
    assert all(lp <= 0 for lp in logprobs.token_logprobs)
    assert all(len(top) <= 2 for top in logprobs.top_logprobs)


def test_two_adapters_answer_as_generate_does_with_each(surogate_bin, tmp_path, server, client, adapters,
                                                        qwen3_chat_model):  # noqa: F811
    listed = [model.id for model in client.models.list().data]
    assert listed == [server["base"], "alpha", "beta"]
    answers = {}
    for name in [server["base"], "alpha", "beta"]:
        reply = client.completions.create(model=name, prompt="Once upon a time", max_tokens=NEW_TOKENS, temperature=0)
        answers[name] = reply.choices[0].text
    assert len(set(answers.values())) == 3, answers
    for name, folder in adapters.items():
        source, target = tmp_path / f"{name}.jsonl", tmp_path / f"{name}.out.jsonl"
        source.write_text(json.dumps({"prompt": "Once upon a time"}) + "\n")
        result = run_surogate(surogate_bin, "generate", "--model", qwen3_chat_model, "--adapter", folder, "--input",
                              source, "--output", target, "--device", "cpu", "--max_new_tokens", NEW_TOKENS,
                              "--temperature", 0)
        assert result.returncode == 0, result.stderr
        assert json.loads(target.read_text())["completion"] == answers[name]


def test_concurrent_clients_are_all_answered_correctly(server, client, hf):
    tokenizer, model = hf
    prompts = [[100 + 37 * i, 2000 + 11 * i, 5000 + i] for i in range(8)]
    expected = [tokenizer.decode(hf_greedy(model, p, NEW_TOKENS)[0], skip_special_tokens=True) for p in prompts]
    answers = [None] * len(prompts)

    def ask(index):
        stream = index % 2 == 0
        reply = client.completions.create(model=server["base"], prompt=prompts[index], max_tokens=NEW_TOKENS,
                                          temperature=0, stream=stream)
        answers[index] = "".join(c.choices[0].text for c in reply) if stream else reply.choices[0].text

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(prompts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert answers == expected


@pytest.mark.parametrize("fields, param", [
    ({"temperature": 5}, "temperature"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"max_tokens": "ten"}, "max_tokens"),
    ({"top_p": 0}, "top_p"),
    ({"n": 0}, "n"),
    ({"stop": [1, 2]}, "stop"),
    ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
    ({"response_format": {"type": "json_object"}}, "response_format"),
    ({"logit_bias": {"5": 10}}, "logit_bias"),
    ({"max_tokens": 100000}, "max_tokens"),
])
def test_a_bad_field_is_a_400_naming_it(server, client, fields, param):
    with pytest.raises(openai.BadRequestError) as error:
        client.chat.completions.create(model=server["base"], messages=MESSAGES, **fields)
    assert error.value.param == param
    assert error.value.type == "invalid_request_error"
    assert param in error.value.message


def test_malformed_bodies_unknown_models_and_unknown_fields(server, client):
    status, body = raw_request(server, "/v1/chat/completions", b"{not json", AUTH)
    assert status == 400 and body["error"]["type"] == "invalid_request_error"
    status, body = raw_request(server, "/v1/chat/completions", {"model": server["base"], "messages": "hi"}, AUTH)
    assert status == 400 and body["error"]["param"] == "messages"
    status, body = raw_request(server, "/v1/completions", {"model": server["base"], "prompt": [-1]}, AUTH)
    assert status == 400 and body["error"]["param"] == "prompt"
    status, body = raw_request(server, "/v1/completions", {"model": server["base"], "prompt": [10 ** 6]}, AUTH)
    assert status == 400 and "vocabulary" in body["error"]["message"]
    with pytest.raises(openai.NotFoundError) as error:
        client.chat.completions.create(model="no-such-model", messages=MESSAGES, max_tokens=2)
    assert error.value.code == "model_not_found" and "no-such-model" in error.value.message
    # Unknown fields are ignored, as OpenAI does.
    reply = client.chat.completions.create(model=server["base"], messages=MESSAGES, max_tokens=2,
                                           extra_body={"some_future_field": 1})
    assert reply.usage.completion_tokens >= 1


def test_an_oversized_body_is_a_413(server):
    body = json.dumps({"model": server["base"], "prompt": "x" * (MAX_REQUEST_BYTES + 10)}).encode()
    status, error = raw_request(server, "/v1/completions", body, AUTH)
    assert status == 413 and "limit" in error["error"]["message"]
    assert raw_request(server, "/health", headers=AUTH, method="GET")[0] == 200


def test_the_api_key_is_required(server, client):
    wrong = openai.OpenAI(base_url=server["url"] + "/v1", api_key="sk-wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        wrong.chat.completions.create(model=server["base"], messages=MESSAGES, max_tokens=2)
    with pytest.raises(openai.AuthenticationError):
        wrong.models.list()
    assert raw_request(server, "/health", method="GET")[0] == 401
    assert raw_request(server, "/v1/models", headers={"Authorization": API_KEY}, method="GET")[0] == 401
    assert raw_request(server, "/health", headers=AUTH, method="GET") == (200, {"status": "ok"})
    assert client.chat.completions.create(model=server["base"], messages=MESSAGES, max_tokens=2).choices


def test_a_client_that_disconnects_mid_stream_does_not_hurt_the_next(server, client):
    host, port = server["url"].removeprefix("http://").split(":")
    body = json.dumps({"model": server["base"], "prompt": "Once upon a time", "max_tokens": 200, "stream": True,
                       "temperature": 0})
    for _ in range(6):  # more than the 4 slots: cancelled sequences must free theirs
        with socket.create_connection((host, int(port)), timeout=60) as connection:
            connection.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {API_KEY}\r\n"
                                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}").encode())
            assert b"data: " in connection.recv(4096) + connection.recv(4096)
    started = time.time()
    answers = [client.completions.create(model=server["base"], prompt="Hello", max_tokens=4, temperature=0)
               for _ in range(3)]
    assert all(answer.choices[0].text is not None for answer in answers)
    assert time.time() - started < 60
    assert server["process"].poll() is None
