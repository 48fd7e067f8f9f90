"""Tool-calling conversations through the data path with the real Qwen3 and Llama 3 tokenizers:
`surogate preview` must produce exactly the ids of transformers'
apply_chat_template(messages, tools=...) followed by tokenizing the text, for the OpenAI layout
(assistant tool_calls, role tool) and the agent layout (tools as a JSON string, roles tool_call /
tool_response); the loss lands on the assistant turns; bad tool data is one error naming the file
and line."""
import json

import pytest

from conftest import run_surogate
from test_data_pipeline import write_config

transformers = pytest.importorskip("transformers")

# Keys deliberately not in sorted order: templates print them with tojson in the dataset's order.
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city",
    "parameters": {"type": "object", "properties": {"unit": {"type": "string", "enum": ["c", "f"]},
                                                    "city": {"type": "string"}},
                   "required": ["city"]}}}
SEARCH = {"type": "function", "function": {"name": "search", "description": "Web search",
                                           "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}}

OPENAI_ROW = {"tools": [WEATHER, SEARCH], "messages": [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Weather in Paris and Zürich?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"unit": "c", "city": "Paris"}}},
        {"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Zürich\"}"}}]},
    {"role": "tool", "content": "{\"temperature\": 21}"},
    {"role": "tool", "content": "{\"temperature\": 15}"},
    {"role": "assistant", "content": "Paris is 21°C, Zürich 15°C."},
    {"role": "user", "content": "Search cats"},
    {"role": "assistant", "content": "Searching.", "tool_calls": [
        {"type": "function", "function": {"name": "search", "arguments": {"query": "cats"}}}]},
    {"role": "tool", "content": "cats are mammals"},
    {"role": "assistant", "content": "Cats are mammals."},
]}

AGENT_ROW = {"tools": json.dumps([WEATHER]), "messages": [
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "tool_call", "content": json.dumps({"name": "get_weather", "arguments": {"unit": "c", "city": "Oslo"}})},
    {"role": "tool_response", "content": "{\"temperature\": -3}"},
    {"role": "assistant", "content": "It is -3°C in Oslo."},
]}
# What AGENT_ROW means in the OpenAI layout (the oracle's input).
AGENT_AS_OPENAI = [
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"unit": "c", "city": "Oslo"}}}]},
    {"role": "tool", "content": "{\"temperature\": -3}"},
    {"role": "assistant", "content": "It is -3°C in Oslo."},
]


def preview(tmp_path, surogate_bin, tokenizers_dir, rows, model="qwen3", **extra):
    data = tmp_path / "tools.jsonl"
    data.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    extra.setdefault("sequence_len", 1024)
    config = write_config(tmp_path, tokenizers_dir, {"path": str(data), "type": "conversation"}, **extra)
    text = config.read_text().replace(str(tokenizers_dir / "qwen3"), str(tokenizers_dir / model))
    config.write_text(text)
    return run_surogate(surogate_bin, "preview", config, "-n", str(len(rows)))


def preview_ids(stdout):
    return [[int(x) for x in line[5:].split()] for line in stdout.splitlines() if line.startswith("ids: ")]


def loss_runs(stdout):
    marked = stdout.split("inside ⟦ ⟧) ---\n")[1].split("\n\n=== ")[0]
    return [part.split("⟧")[0] for part in marked.split("⟦")[1:]]


def hf_ids(tokenizer, messages, tools):
    text = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def test_openai_layout_matches_transformers_with_qwen3(tmp_path, surogate_bin, tokenizers_dir):
    result = preview(tmp_path, surogate_bin, tokenizers_dir, [OPENAI_ROW])
    assert result.returncode == 0, result.stderr
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tokenizers_dir / "qwen3"))
    assert preview_ids(result.stdout) == [hf_ids(tokenizer, OPENAI_ROW["messages"], OPENAI_ROW["tools"])]
    runs = loss_runs(result.stdout)
    assert runs == [
        '<tool_call>\n{"name": "get_weather", "arguments": {"unit": "c", "city": "Paris"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich"}}\n</tool_call><|im_end|>\n',
        "Paris is 21°C, Zürich 15°C.<|im_end|>\n",
        'Searching.\n<tool_call>\n{"name": "search", "arguments": {"query": "cats"}}\n</tool_call><|im_end|>\n',
        "<think>\n\n</think>\n\nCats are mammals.<|im_end|>\n",
    ]


def test_agent_layout_matches_transformers_with_qwen3(tmp_path, surogate_bin, tokenizers_dir):
    result = preview(tmp_path, surogate_bin, tokenizers_dir, [AGENT_ROW])
    assert result.returncode == 0, result.stderr
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tokenizers_dir / "qwen3"))
    assert preview_ids(result.stdout) == [hf_ids(tokenizer, AGENT_AS_OPENAI, [WEATHER])]


def test_llama3_without_tool_calls_matches_transformers(tmp_path, surogate_bin, tokenizers_dir):
    # The Llama 3 template ignores `tools`; a row with tools but no calls renders as transformers does.
    row = {"tools": [WEATHER], "messages": [{"role": "user", "content": "Hi"},
                                            {"role": "assistant", "content": "Hello!"}]}
    result = preview(tmp_path, surogate_bin, tokenizers_dir, [row], model="llama3")
    assert result.returncode == 0, result.stderr
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tokenizers_dir / "llama3"))
    assert preview_ids(result.stdout) == [hf_ids(tokenizer, row["messages"], row["tools"])]


def test_llama3_multi_turn_masks_without_the_trailing_assistant_header(tmp_path, surogate_bin, tokenizers_dir):
    # The original Llama 3 template ends every rendering with an assistant header; it belongs to
    # no turn (it used to make multi-turn conversations fail to mask).
    row = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
                        {"role": "user", "content": "Bye"}, {"role": "assistant", "content": "Bye!"}]}
    result = preview(tmp_path, surogate_bin, tokenizers_dir, [row], model="llama3")
    assert result.returncode == 0, result.stderr
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tokenizers_dir / "llama3"))
    assert preview_ids(result.stdout) == [hf_ids(tokenizer, row["messages"], None)]
    assert loss_runs(result.stdout) == ["Hello!<|eot_id|>", "Bye!<|eot_id|>"]


def test_template_that_drops_tool_calls_is_an_error(tmp_path, surogate_bin, tokenizers_dir):
    result = preview(tmp_path, surogate_bin, tokenizers_dir, [AGENT_ROW], model="llama3")
    assert result.returncode != 0
    assert "tools.jsonl:1" in result.stderr and "agent_template" in result.stderr


@pytest.mark.parametrize("messages, message", [
    ([{"role": "user", "content": "x"}, {"role": "tool_call", "content": "{\"name\": \"get_weather\", \"arguments\": {oops}"}],
     "not valid JSON"),
    ([{"role": "user", "content": "x"}, {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": "{city: Paris}"}}]}],
     "not valid JSON"),
    ([{"role": "user", "content": "x"}, {"role": "tool_response", "content": "42"},
      {"role": "assistant", "content": "y"}], "no tool call before it"),
    ([{"role": "user", "content": "x"}, {"role": "tool_call", "content": "{\"name\": \"teleport\", \"arguments\": {}}"}],
     "'teleport', which is not among the row's tools"),
    ([{"role": "user", "content": "x"}, {"role": "wizard", "content": "y"}], "unknown role 'wizard'"),
])
def test_bad_tool_data_names_file_line_and_problem(tmp_path, surogate_bin, tokenizers_dir, messages, message):
    rows = [AGENT_ROW, {"tools": [WEATHER], "messages": messages}]
    result = preview(tmp_path, surogate_bin, tokenizers_dir, rows)
    assert result.returncode != 0
    assert "tools.jsonl:2" in result.stderr and message in result.stderr, result.stderr


def test_unknown_loss_scale_is_a_config_error_with_a_suggestion(tmp_path, surogate_bin, tokenizers_dir):
    result = preview(tmp_path, surogate_bin, tokenizers_dir, [AGENT_ROW], loss_scale="last_rund")
    assert result.returncode != 0
    assert "unknown loss_scale 'last_rund'" in result.stderr and "did you mean 'last_round'" in result.stderr


def test_response_prefix_and_ignore_empty_think_in_preview(tmp_path, surogate_bin, tokenizers_dir):
    row = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
                        {"role": "user", "content": "Bye"}, {"role": "assistant", "content": "Bye!"}]}
    result = preview(tmp_path, surogate_bin, tokenizers_dir, [row], response_prefix="<think>\n\n</think>\n\n",
                     loss_scale="ignore_empty_think")
    assert result.returncode == 0, result.stderr
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tokenizers_dir / "qwen3"))
    prefixed = [dict(m, content="<think>\n\n</think>\n\n" + m["content"]) if m["role"] == "assistant" else m
                for m in row["messages"]]
    assert preview_ids(result.stdout) == [hf_ids(tokenizer, prefixed, None)]
    assert loss_runs(result.stdout) == ["Hello!<|im_end|>\n", "Bye!<|im_end|>\n"]
