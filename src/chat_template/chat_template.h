// Chat templates: turn a conversation (a JSON list of messages) into the exact text a model was
// trained on. A template is either the Jinja template shipped in a model's tokenizer_config.json
// (rendered by our own interpreter for the Jinja subset that Hugging Face chat templates use, with
// Hugging Face's settings: trim_blocks, lstrip_blocks, loop controls, `tojson` without ASCII
// escaping, `raise_exception`, `strftime_now`, `{% generation %}`) or one of the named built-ins
// selectable with the config's `template:` option. Templates are parsed once; `render` only walks
// the parsed tree, so rendering many prefixes of one conversation (for loss masks) is cheap and
// deterministic (`strftime_now` is the only clock-dependent function).
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace surogate::chat_template {

// Messages and tools keep the key order they were written in, because `tools | tojson` must print
// keys in that order to match Hugging Face. Convert a `nlohmann::json` with `OrderedJson(value)`
// (keys then come out sorted, which is what such a value holds anyway).
using OrderedJson = nlohmann::ordered_json;

namespace detail {
struct CompiledTemplate;  // the parsed template (see template_program.h)
}

struct ChatRenderInput {
  // [{"role": "system"|"user"|"assistant"|"tool", "content": ..., optional "tool_calls",
  //   "reasoning_content", "name", ...}, ...]
  OrderedJson messages = OrderedJson::array();
  // Tool (function) JSON schemas; null means "no tools" (the template sees `tools` as none).
  OrderedJson tools = nullptr;
  bool add_generation_prompt = false;
  // Override the special tokens read from tokenizer_config.json (bos_token, eos_token).
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  // More template variables, e.g. {"enable_thinking": false}. They override everything above.
  OrderedJson extra_variables = OrderedJson::object();
};

// A character span [begin, end) of rendered text.
struct TextSpan {
  size_t begin = 0;
  size_t end = 0;
  bool operator==(const TextSpan&) const = default;
};

struct RenderedChat {
  std::string text;
  // The spans the template wrapped in `{% generation %}...{% endgeneration %}` (the assistant's
  // tokens, where the template marks them; all built-in templates do).
  std::vector<TextSpan> generation_spans;
};

class ChatTemplate {
public:
  // The template of a tokenizer_config.json: `chat_template` is either a string or a list of
  // {"name", "template"}; from a list, "default" is used, and "tool_use" when tools are passed
  // (as transformers does). Special tokens (bos_token, eos_token, pad_token, unk_token, ... as
  // strings or {"content": ...}) become template variables. `source_name` names the file in
  // error messages. Throws UserError when there is no chat template or it does not parse.
  static ChatTemplate from_tokenizer_config(const nlohmann::json& tokenizer_config,
                                            std::string source_name = "tokenizer_config.json");
  // Reads `<directory>/tokenizer_config.json`.
  static ChatTemplate from_tokenizer_directory(const std::filesystem::path& directory);
  // One Jinja template text, e.g. a user's own template file.
  static ChatTemplate from_source(std::string_view template_source, std::string source_name);
  // A named built-in template (see builtin_template_names()); UserError for an unknown name.
  static ChatTemplate builtin(std::string_view name);
  // The config's `template:` option: "auto" (or empty) uses the tokenizer directory's own
  // template, any other value names a built-in.
  static ChatTemplate select(std::string_view template_option, const std::filesystem::path& tokenizer_directory);
  static std::vector<std::string> builtin_template_names();

  std::string render(const ChatRenderInput& input) const;
  RenderedChat render_with_spans(const ChatRenderInput& input) const;

  // Where the template came from, as used in error messages.
  const std::string& source_name() const { return source_name_; }
  // The names of the template variants ("default" for a single template).
  std::vector<std::string> variant_names() const;

private:
  ChatTemplate() = default;
  const detail::CompiledTemplate& pick_variant(const ChatRenderInput& input) const;

  std::string source_name_;
  std::map<std::string, std::shared_ptr<const detail::CompiledTemplate>> variants_;
  // Special tokens from the tokenizer config, passed to the template as variables.
  std::vector<std::pair<std::string, std::string>> special_tokens_;
};

// The config's `system:` option: returns `messages` with the first message's content replaced by
// `system_prompt` when that message is a system message, or with a system message inserted first
// otherwise.
OrderedJson apply_system_prompt(const OrderedJson& messages, std::string_view system_prompt);

}  // namespace surogate::chat_template
