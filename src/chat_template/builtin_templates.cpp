// Sources of the built-in templates (see builtin_templates.h). `qwen` renders exactly what
// Qwen3's own template renders (tools, tool calls and responses, thinking blocks,
// enable_thinking); `llama3` what Llama 3's does, except that the assistant header at the end
// is only added with add_generation_prompt. tests/python checks both against transformers.
#include "chat_template/builtin_templates.h"

namespace surogate::chat_template {
namespace {

constexpr std::string_view kChatml = R"JINJA(
{%- for message in messages %}
    {{- '<|im_start|>' + message.role + '\n' }}
    {%- if message.role == 'assistant' %}
        {%- generation %}{{- message.content ~ '<|im_end|>' }}{%- endgeneration %}
    {%- else %}
        {{- message.content ~ '<|im_end|>' }}
    {%- endif %}
    {{- '\n' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
)JINJA";

constexpr std::string_view kQwen = R"JINJA(
{%- set first_is_system = messages and messages[0].role == 'system' %}
{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if first_is_system %}
        {{- messages[0].content + '\n\n' }}
    {%- endif %}
    {{- '# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>' }}
    {%- for tool in tools %}
        {{- '\n' }}{{- tool | tojson }}
    {%- endfor %}
    {{- '\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' }}
{%- elif first_is_system %}
    {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
{%- endif %}
{#- The last user turn that is not a wrapped tool response starts the current query. #}
{%- set query = namespace(index=messages|length - 1, found=false) %}
{%- for message in messages|reverse %}
    {%- if not query.found and message.role == 'user' %}
        {%- set text = message.content %}
        {%- if not (text.startswith('<tool_response>') and text.endswith('</tool_response>')) %}
            {%- set query.found = true %}
            {%- set query.index = messages|length - loop.index %}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}
    {%- elif message.role == 'assistant' %}
        {%- set content = message.content %}
        {%- set reasoning = '' %}
        {%- if message.reasoning_content is defined and message.reasoning_content is not none %}
            {%- set reasoning = message.reasoning_content %}
        {%- elif '</think>' in message.content %}
            {%- set content = message.content.split('</think>')[-1].lstrip('\n') %}
            {%- set reasoning = message.content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
        {%- endif %}
        {{- '<|im_start|>assistant\n' }}
        {%- generation %}
            {%- if loop.index0 > query.index and (loop.last or reasoning) %}
                {{- '<think>\n' + reasoning.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
            {%- else %}
                {{- content }}
            {%- endif %}
            {%- if message.tool_calls %}
                {%- for call in message.tool_calls %}
                    {%- if content or not loop.first %}
                        {{- '\n' }}
                    {%- endif %}
                    {%- set function = call.function if call.function else call %}
                    {{- '<tool_call>\n{"name": "' }}{{- function.name }}{{- '", "arguments": ' }}
                    {%- if function.arguments is string %}
                        {{- function.arguments }}
                    {%- else %}
                        {{- function.arguments | tojson }}
                    {%- endif %}
                    {{- '}\n</tool_call>' }}
                {%- endfor %}
            {%- endif %}
            {{- '<|im_end|>' }}
        {%- endgeneration %}
        {{- '\n' }}
    {%- elif message.role == 'tool' %}
        {%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}{{- message.content }}{{- '\n</tool_response>' }}
        {%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %}
)JINJA";

constexpr std::string_view kLlama3 = R"JINJA(
{%- for message in messages %}
    {%- if loop.first %}
        {{- bos_token }}
    {%- endif %}
    {{- '<|start_header_id|>' + message.role + '<|end_header_id|>\n\n' }}
    {%- if message.role == 'assistant' %}
        {%- generation %}{{- message.content | trim + '<|eot_id|>' }}{%- endgeneration %}
    {%- else %}
        {{- message.content | trim + '<|eot_id|>' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
)JINJA";

constexpr std::string_view kLlama2 = R"JINJA(
{%- if messages and messages[0].role == 'system' %}
    {%- set system = messages[0].content %}
    {%- set conversation = messages[1:] %}
{%- else %}
    {%- set system = none %}
    {%- set conversation = messages %}
{%- endif %}
{%- for message in conversation %}
    {%- if message.role == 'user' %}
        {{- bos_token + '[INST] ' }}
        {%- if loop.first and system is not none %}
            {{- '<<SYS>>\n' + system + '\n<</SYS>>\n\n' }}
        {%- endif %}
        {{- message.content | trim + ' [/INST]' }}
    {%- elif message.role == 'assistant' %}
        {%- generation %}{{- ' ' + message.content | trim + ' ' + eos_token }}{%- endgeneration %}
    {%- else %}
        {{- raise_exception("the llama2 template supports a first system message, then user and assistant messages; got the role '" ~ message.role ~ "'") }}
    {%- endif %}
{%- endfor %}
)JINJA";

constexpr std::string_view kMistral = R"JINJA(
{%- if messages and messages[0].role == 'system' %}
    {%- set system = messages[0].content %}
    {%- set conversation = messages[1:] %}
{%- else %}
    {%- set system = none %}
    {%- set conversation = messages %}
{%- endif %}
{{- bos_token }}
{%- for message in conversation %}
    {%- if message.role == 'user' %}
        {{- '[INST] ' }}
        {%- if loop.first and system is not none %}
            {{- system + '\n\n' }}
        {%- endif %}
        {{- message.content + ' [/INST]' }}
    {%- elif message.role == 'assistant' %}
        {%- generation %}{{- message.content + eos_token }}{%- endgeneration %}
    {%- else %}
        {{- raise_exception("the mistral template supports a first system message, then user and assistant messages; got the role '" ~ message.role ~ "'") }}
    {%- endif %}
{%- endfor %}
)JINJA";

constexpr std::string_view kAlpaca = R"JINJA(
{%- for message in messages %}
    {%- if message.role == 'system' %}
        {{- message.content + '\n\n' }}
    {%- elif message.role == 'user' %}
        {{- '### Instruction:\n' + message.content + '\n\n' }}
    {%- elif message.role == 'assistant' %}
        {{- '### Response:\n' }}
        {%- generation %}{{- message.content + eos_token }}{%- endgeneration %}
        {{- '\n\n' }}
    {%- else %}
        {{- raise_exception("the alpaca template supports the roles system, user and assistant; got '" ~ message.role ~ "'") }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '### Response:\n' }}
{%- endif %}
)JINJA";

}  // namespace

const std::vector<BuiltinTemplate>& builtin_templates() {
  static const std::vector<BuiltinTemplate> templates = {
      {"chatml", "<|im_start|>role\\ncontent<|im_end|> turns (OpenAI ChatML)", kChatml, {{"eos_token", "<|im_end|>"}}},
      {"qwen", "Qwen3's format: ChatML plus tools, tool calls/responses and <think> blocks", kQwen,
       {{"eos_token", "<|im_end|>"}}},
      {"llama3", "Llama 3 header/eot turns, with <|begin_of_text|> first", kLlama3,
       {{"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|eot_id|>"}}},
      {"llama2", "Llama 2 chat: <s>[INST] <<SYS>>...<</SYS>> user [/INST] assistant </s>", kLlama2,
       {{"bos_token", "<s>"}, {"eos_token", "</s>"}}},
      {"mistral", "Mistral instruct: <s>[INST] user [/INST]assistant</s>", kMistral,
       {{"bos_token", "<s>"}, {"eos_token", "</s>"}}},
      {"alpaca", "Alpaca-style plain text: ### Instruction: / ### Response:", kAlpaca, {{"eos_token", "</s>"}}},
  };
  return templates;
}

}  // namespace surogate::chat_template
