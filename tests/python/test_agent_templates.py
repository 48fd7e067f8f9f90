"""agent_template through `surogate preview` / `tokenize` with the real Qwen3 and Llama 3 tokenizers.

hermes on Qwen3 must give exactly the ids of Qwen3's own tool rendering (transformers'
apply_chat_template(messages, tools=...)), and the same loss weights. For every format the
messages it writes are spelled out here (Python's json module writes the JSON), rendered by the
model's real template through transformers, and compared token for token; the loss runs and
weights are pinned; bad input is one error naming the key or file:line; an agent loss_scale on a
dataset without tool calls warns once."""
import json

import pytest

from conftest import REPO_ROOT, run_surogate
from test_tool_datasets import AGENT_AS_OPENAI, AGENT_ROW, OPENAI_ROW, WEATHER, hf_ids, loss_runs, preview, preview_ids

transformers = pytest.importorskip("transformers")

HERMES_TOOLS = ("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
                + json.dumps(WEATHER, ensure_ascii=False) +
                "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
                "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
                "<args-json-object>}\n</tool_call>")
LLAMA3_TOOLS = ("Given the following functions, please respond with a JSON for a function call with its proper "
                "arguments that best answers the given prompt.\n\nRespond in the format {\"name\": function name, "
                "\"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n"
                + json.dumps(WEATHER, ensure_ascii=False, indent=4) + "\n\n")
REACT_TOOLS = ("Answer the user with the help of these tools:\n\n"
               "get_weather: Current weather of a city\nParameters: "
               + json.dumps(WEATHER["function"]["parameters"], ensure_ascii=False) +
               "\n\nUse this format:\n\nThought: what to do next\nAction: the tool to call, one of [get_weather]\n"
               "Action Input: the tool's arguments as a JSON object\nObservation: the tool's result\n"
               "... (Thought, Action, Action Input and Observation repeat as needed)\n"
               "Thought: I know the final answer\nFinal Answer: the answer to the user")
OSLO_ARGS = json.dumps({"unit": "c", "city": "Oslo"})

# A ReAct-style row: the assistant's text holds the Thought / Final Answer lines.
REACT_ROW = {"tools": [WEATHER], "messages": [
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": "Thought: I need the weather.", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"unit": "c", "city": "Oslo"}}}]},
    {"role": "tool", "content": "{\"temperature\": -3}"},
    {"role": "assistant", "content": "Thought: I know the final answer\nFinal Answer: It is -3°C in Oslo."},
]}


def tokenizer(tokenizers_dir, model):
    return transformers.AutoTokenizer.from_pretrained(str(tokenizers_dir / model))


def preview_text(stdout):
    return stdout.split("--- text ---\n")[1].split("\n--- ")[0]


@pytest.mark.parametrize("row, messages, tools", [(OPENAI_ROW, OPENAI_ROW["messages"], OPENAI_ROW["tools"]),
                                                  (AGENT_ROW, AGENT_AS_OPENAI, [WEATHER])])
def test_hermes_on_qwen3_is_qwen3s_own_tool_rendering(tmp_path, surogate_bin, tokenizers_dir, row, messages, tools):
    native = preview(tmp_path, surogate_bin, tokenizers_dir, [row], loss_scale="hermes")
    agent = preview(tmp_path, surogate_bin, tokenizers_dir, [row], loss_scale="hermes", agent_template="hermes")
    assert agent.returncode == 0, agent.stderr
    assert preview_ids(agent.stdout) == [hf_ids(tokenizer(tokenizers_dir, "qwen3"), messages, tools)]
    # The same text, ids, loss tokens and weights as Qwen3's template rendering the tools itself.
    assert agent.stdout == native.stdout


def test_hermes_on_llama3_writes_qwens_format_in_plain_messages(tmp_path, surogate_bin, tokenizers_dir):
    result = preview(tmp_path, surogate_bin, tokenizers_dir, [AGENT_ROW], model="llama3", agent_template="hermes",
                     loss_scale="hermes")
    assert result.returncode == 0, result.stderr
    call = '<tool_call>\n{"name": "get_weather", "arguments": ' + OSLO_ARGS + '}\n</tool_call>'
    written = [{"role": "system", "content": HERMES_TOOLS},
               {"role": "user", "content": "Weather in Oslo?"},
               {"role": "assistant", "content": call},
               {"role": "user", "content": "<tool_response>\n{\"temperature\": -3}\n</tool_response>"},
               {"role": "assistant", "content": "It is -3°C in Oslo."}]
    llama = tokenizer(tokenizers_dir, "llama3")
    assert preview_text(result.stdout) == llama.apply_chat_template(written, tokenize=False)
    assert preview_ids(result.stdout) == [hf_ids(llama, written, None)]
    assert loss_runs(result.stdout) == ["×2 " + call, "<|eot_id|>", "It is -3°C in Oslo.<|eot_id|>"]


@pytest.mark.parametrize("loss_scale", ["react", "hermes", "default"])
def test_llama3_writes_llama31s_json_tool_calls(tmp_path, surogate_bin, tokenizers_dir, loss_scale):
    result = preview(tmp_path, surogate_bin, tokenizers_dir, [AGENT_ROW], model="llama3", agent_template="llama3",
                     loss_scale=loss_scale)
    assert result.returncode == 0, result.stderr
    call = '{"name": "get_weather", "parameters": ' + OSLO_ARGS + '}'
    written = [{"role": "user", "content": LLAMA3_TOOLS + "Weather in Oslo?"},
               {"role": "assistant", "content": call},
               {"role": "ipython", "content": "{\"temperature\": -3}"},
               {"role": "assistant", "content": "It is -3°C in Oslo."}]
    llama = tokenizer(tokenizers_dir, "llama3")
    assert preview_text(result.stdout) == llama.apply_chat_template(written, tokenize=False)
    assert preview_ids(result.stdout) == [hf_ids(llama, written, None)]
    if loss_scale == "default":
        assert loss_runs(result.stdout) == [call + "<|eot_id|>", "It is -3°C in Oslo.<|eot_id|>"]
    else:  # both agent strategies weigh the calls the agent template wrote
        assert loss_runs(result.stdout) == ["×2 " + call, "<|eot_id|>", "It is -3°C in Oslo.<|eot_id|>"]


def test_react_en_writes_one_turn_with_observations_without_loss(tmp_path, surogate_bin, tokenizers_dir):
    result = preview(tmp_path, surogate_bin, tokenizers_dir, [REACT_ROW], agent_template="react_en", loss_scale="react")
    assert result.returncode == 0, result.stderr
    action = "Action: get_weather\nAction Input: " + OSLO_ARGS
    turn = ("Thought: I need the weather.\n" + action + "\nObservation: {\"temperature\": -3}\n"
            "Thought: I know the final answer\nFinal Answer: It is -3°C in Oslo.")
    written = [{"role": "system", "content": REACT_TOOLS}, {"role": "user", "content": "Weather in Oslo?"},
               {"role": "assistant", "content": turn}]
    qwen = tokenizer(tokenizers_dir, "qwen3")
    assert preview_text(result.stdout) == qwen.apply_chat_template(written, tokenize=False)
    assert preview_ids(result.stdout) == [hf_ids(qwen, written, None)]
    # Qwen3 puts an empty think block before the last turn. "Observation:" is the model's stop
    # word; the tool's result after it carries no loss.
    assert loss_runs(result.stdout) == [
        "<think>\n\n</think>\n\nThought: I need the weather.\n", "×2 " + action + "\n", "Observation:",
        "Thought: I know the final answer\nFinal Answer: It is -3°C in Oslo.<|im_end|>\n"]


def test_react_is_react_en_and_the_cache_key_holds_the_agent_template(tmp_path, surogate_bin, tokenizers_dir):
    react = preview(tmp_path, surogate_bin, tokenizers_dir, [REACT_ROW], agent_template="react")
    react_en = preview(tmp_path, surogate_bin, tokenizers_dir, [REACT_ROW], agent_template="react_en")
    assert react.returncode == 0 and react.stdout == react_en.stdout
    config = tmp_path / "config.yaml"
    assert run_surogate(surogate_bin, "tokenize", config).returncode == 0
    again = run_surogate(surogate_bin, "tokenize", config, "--agent_template=hermes")
    assert again.returncode == 0 and "stale" in again.stderr, again.stderr


def test_unknown_agent_template_is_a_config_error_with_a_suggestion(tmp_path, surogate_bin, tokenizers_dir):
    result = preview(tmp_path, surogate_bin, tokenizers_dir, [AGENT_ROW], agent_template="hermez")
    assert result.returncode == 2
    assert "config.yaml" in result.stderr and "unknown agent_template 'hermez'" in result.stderr
    assert "did you mean 'hermes'" in result.stderr and "llama3, react_en" in result.stderr


@pytest.mark.parametrize("agent_template, messages, message", [
    ("llama3", [{"role": "system", "content": "s"}, {"role": "tool_call", "content": json.dumps(
        {"name": "get_weather", "arguments": {"city": "Oslo"}})}],
     "agent_template llama3 puts the tool list in the first user message"),
    ("react_en", [{"role": "user", "content": "x"}, {"role": "tool", "content": "42"},
                  {"role": "assistant", "content": "y"}], "('42') follows no assistant message"),
    ("hermes", [{"role": "user", "content": "x"}, {"role": "tool_call", "content": "{\"name\": \"get_weather\", "
                                                   "\"arguments\": {oops}"}], "not valid JSON"),
    ("react_en", [{"role": "user", "content": "x"}, {"role": "tool_response", "content": "42"},
                  {"role": "assistant", "content": "y"}], "no tool call before it"),
])
def test_bad_rows_name_file_line_and_problem(tmp_path, surogate_bin, tokenizers_dir, agent_template, messages,
                                             message):
    rows = [AGENT_ROW, {"tools": [WEATHER], "messages": messages}]
    result = preview(tmp_path, surogate_bin, tokenizers_dir, rows, agent_template=agent_template)
    assert result.returncode == 2
    assert "tools.jsonl:2" in result.stderr and message in result.stderr, result.stderr


def test_agent_loss_scale_without_tool_calls_warns_once(tmp_path, surogate_bin, tokenizers_dir):
    plain = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]}
    preview(tmp_path, surogate_bin, tokenizers_dir, [plain] * 5, loss_scale="hermes")  # writes the config
    data = tmp_path / "tools.jsonl"
    config = tmp_path / "config.yaml"
    result = run_surogate(surogate_bin, "tokenize", config)
    assert result.returncode == 0, result.stderr
    warning = f"warning: loss_scale hermes weighs tool calls, but dataset {data} has none (5 rows read"
    assert result.stderr.count("warning: ") == 1 and warning in result.stderr, result.stderr
    # Reusing the cache says it again, once.
    reused = run_surogate(surogate_bin, "tokenize", config)
    assert "up to date" in reused.stderr and reused.stderr.count(warning) == 1, reused.stderr
    # Data with tool calls: no warning, with or without an agent template.
    data.write_text(json.dumps(AGENT_ROW) + "\n")
    for extra in ([], ["--agent_template=llama3", "--model=" + str(tokenizers_dir / "llama3")]):
        quiet = run_surogate(surogate_bin, "tokenize", config, *extra)
        assert quiet.returncode == 0 and "warning" not in quiet.stderr, quiet.stderr


@pytest.mark.parametrize("config", ["config.yaml", "react.yaml"])
def test_tool_calling_example_configs_preview(surogate_bin, tokenizers_dir, config):
    # The example configs as written, with the test copy of the Qwen3 tokenizer as the model.
    result = run_surogate(surogate_bin, "preview", REPO_ROOT / "examples/tool_calling" / config, "-n", "6",
                          f"--model={tokenizers_dir / 'qwen3'}", cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr
    samples = result.stdout.split("=== sample ")[1:]
    assert len(samples) == 6
    # Rows 1-5 call a tool, whose call weighs 2; row 6 is a plain chat.
    assert ["⟦×2 " in sample for sample in samples] == [True] * 5 + [False]
    if config == "react.yaml":
        assert all("Observation:⟧ {" in sample for sample in samples[:5])


@pytest.mark.parametrize("agent_template, model", [("hermes", "llama3"), ("llama3", "llama3"), ("react_en", "llama3"),
                                                   ("llama3", "qwen3")])
def test_example_dataset_with_each_agent_template(tmp_path, surogate_bin, tokenizers_dir, agent_template, model):
    rows = [json.loads(line) for line in (REPO_ROOT / "examples/tool_calling/train.jsonl").read_text().splitlines()]
    result = preview(tmp_path, surogate_bin, tokenizers_dir, rows, model=model, agent_template=agent_template,
                     loss_scale="react")
    assert result.returncode == 0, result.stderr
    samples = result.stdout.split("=== sample ")[1:]
    assert ["⟦×2 " in sample for sample in samples] == [True] * 5 + [False]
    # Span-wise tokens equal tokenizing the whole text: the loss boundaries fall between tokens.
    tok = tokenizer(tokenizers_dir, model)
    for sample, ids in zip(samples, preview_ids(result.stdout)):
        assert tok(preview_text("--- text ---\n" + sample.split("--- text ---\n")[1]), add_special_tokens=False)[
            "input_ids"] == ids
