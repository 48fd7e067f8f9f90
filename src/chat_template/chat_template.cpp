// ChatTemplate: picks the template (tokenizer config variant or built-in), prepares the
// variables exactly as transformers' apply_chat_template does (special tokens, messages with
// reasoning aliases, tools, documents, add_generation_prompt, extra kwargs) and renders.
#include "chat_template/chat_template.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "chat_template/builtin_templates.h"
#include "chat_template/evaluator.h"
#include "chat_template/lexer.h"
#include "chat_template/parser.h"
#include "chat_template/template_program.h"
#include "core/error.h"
#include "core/strings.h"

namespace surogate::chat_template {
namespace {

std::shared_ptr<const detail::CompiledTemplate> compile(std::string_view source, std::string source_name) {
  auto compiled = std::make_shared<detail::CompiledTemplate>();
  compiled->source_name = std::move(source_name);
  compiled->body = parse_template(tokenize_template(source, compiled->source_name), compiled->source_name);
  return compiled;
}

// transformers' special_tokens_map: the named special tokens that are set.
constexpr std::string_view kSpecialTokenNames[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                                   "pad_token", "cls_token", "mask_token"};

void set_variable(std::vector<std::pair<std::string, Value>>& variables, const std::string& name, Value value) {
  for (auto& entry : variables) {
    if (entry.first == name) {
      entry.second = std::move(value);
      return;
    }
  }
  variables.emplace_back(name, std::move(value));
}

// transformers fills `reasoning_content` (and `thinking`) from whichever of reasoning_content,
// thinking, reasoning is set, so templates reading either name see the reasoning.
OrderedJson alias_reasoning_fields(const OrderedJson& messages) {
  if (!messages.is_array()) return messages;
  OrderedJson out = OrderedJson::array();
  for (const auto& message : messages) {
    const OrderedJson* reasoning = nullptr;
    if (message.is_object()) {
      for (const char* key : {"reasoning_content", "thinking", "reasoning"}) {
        auto found = message.find(key);
        if (found != message.end() && !found->is_null()) {
          reasoning = &*found;
          break;
        }
      }
    }
    if (!reasoning) {
      out.push_back(message);
      continue;
    }
    OrderedJson aliased = OrderedJson::object();
    aliased["thinking"] = *reasoning;
    for (const auto& [key, value] : message.items()) aliased[key] = value;
    aliased["thinking"] = message.contains("thinking") ? message["thinking"] : *reasoning;
    aliased["reasoning_content"] = *reasoning;
    out.push_back(std::move(aliased));
  }
  return out;
}

}  // namespace

ChatTemplate ChatTemplate::from_tokenizer_config(const nlohmann::json& tokenizer_config, std::string source_name) {
  ChatTemplate result;
  result.source_name_ = source_name;
  if (!tokenizer_config.is_object()) fail_user("{}: expected a JSON object", source_name);
  auto found = tokenizer_config.find("chat_template");
  if (found == tokenizer_config.end() || found->is_null()) {
    std::string names;
    for (const auto& name : builtin_template_names()) names += (names.empty() ? "" : ", ") + name;
    fail_user("{} has no chat_template; choose a built-in one with the config option `template:` ({})", source_name,
              names);
  }
  if (found->is_string()) {
    result.variants_["default"] = compile(found->get<std::string>(), source_name);
  } else if (found->is_array()) {
    for (const auto& entry : *found) {
      if (!entry.is_object() || !entry.contains("name") || !entry.contains("template") || !entry["name"].is_string() ||
          !entry["template"].is_string())
        fail_user("{}: each entry of the chat_template list needs a string 'name' and 'template'", source_name);
      std::string name = entry["name"].get<std::string>();
      result.variants_[name] =
          compile(entry["template"].get<std::string>(), fmt::format("{} (template '{}')", source_name, name));
    }
    if (result.variants_.empty()) fail_user("{}: the chat_template list is empty", source_name);
  } else {
    fail_user("{}: chat_template must be a string or a list of {{name, template}}", source_name);
  }
  for (std::string_view name : kSpecialTokenNames) {
    auto token = tokenizer_config.find(std::string(name));
    if (token == tokenizer_config.end()) continue;
    if (token->is_string()) {
      result.special_tokens_.emplace_back(name, token->get<std::string>());
    } else if (token->is_object() && token->contains("content") && (*token)["content"].is_string()) {
      result.special_tokens_.emplace_back(name, (*token)["content"].get<std::string>());
    }
  }
  return result;
}

ChatTemplate ChatTemplate::from_tokenizer_directory(const std::filesystem::path& directory) {
  std::filesystem::path config_path = directory / "tokenizer_config.json";
  std::ifstream config_file(config_path);
  if (!config_file) fail_user("cannot read {} (is {} a tokenizer directory?)", config_path.string(), directory.string());
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(config_file);
  } catch (const nlohmann::json::exception& error) {
    fail_user("{} is not valid JSON: {}", config_path.string(), error.what());
  }
  // Newer checkpoints store the template next to the config, in chat_template.jinja, which wins.
  std::filesystem::path jinja_path = directory / "chat_template.jinja";
  if (std::filesystem::exists(jinja_path)) {
    std::ifstream jinja_file(jinja_path);
    std::stringstream text;
    text << jinja_file.rdbuf();
    config["chat_template"] = text.str();
    return from_tokenizer_config(config, jinja_path.string());
  }
  return from_tokenizer_config(config, config_path.string());
}

ChatTemplate ChatTemplate::from_source(std::string_view template_source, std::string source_name) {
  ChatTemplate result;
  result.source_name_ = source_name;
  result.variants_["default"] = compile(template_source, std::move(source_name));
  return result;
}

ChatTemplate ChatTemplate::builtin(std::string_view name) {
  for (const auto& entry : builtin_templates()) {
    if (entry.name != name) continue;
    ChatTemplate result = from_source(entry.source, fmt::format("built-in '{}'", name));
    result.special_tokens_ = entry.default_tokens;
    return result;
  }
  auto names = builtin_template_names();
  auto suggestion = closest_match(name, names);
  std::string listed;
  for (const auto& known : names) listed += (listed.empty() ? "" : ", ") + known;
  fail_user("unknown chat template '{}'{}; the built-in templates are: {}", name,
            suggestion ? fmt::format(" (did you mean '{}'?)", *suggestion) : std::string(), listed);
}

ChatTemplate ChatTemplate::select(std::string_view template_option, const std::filesystem::path& tokenizer_directory) {
  if (template_option.empty() || template_option == "auto") return from_tokenizer_directory(tokenizer_directory);
  return builtin(template_option);
}

std::vector<std::string> ChatTemplate::builtin_template_names() {
  std::vector<std::string> names;
  for (const auto& entry : builtin_templates()) names.emplace_back(entry.name);
  return names;
}

std::vector<std::string> ChatTemplate::variant_names() const {
  std::vector<std::string> names;
  for (const auto& entry : variants_) names.push_back(entry.first);
  return names;
}

const detail::CompiledTemplate& ChatTemplate::pick_variant(const ChatRenderInput& input) const {
  if (variants_.size() == 1 && variants_.count("default")) return *variants_.at("default");
  if (!input.tools.is_null() && variants_.count("tool_use")) return *variants_.at("tool_use");
  if (variants_.count("default")) return *variants_.at("default");
  std::string names;
  for (const auto& entry : variants_) names += (names.empty() ? "" : ", ") + entry.first;
  fail_user("{} has several chat templates ({}) and none is named 'default'", source_name_, names);
}

RenderedChat ChatTemplate::render_with_spans(const ChatRenderInput& input) const {
  if (!input.messages.is_array()) fail_user("chat template input: 'messages' must be a JSON array");
  for (const auto& message : input.messages)
    if (!message.is_object()) fail_user("chat template input: every message must be a JSON object, got {}", message.dump());
  if (!input.extra_variables.is_object()) fail_user("chat template input: extra variables must be a JSON object");
  const detail::CompiledTemplate& compiled = pick_variant(input);

  std::vector<std::pair<std::string, Value>> variables;
  for (const auto& [name, token] : special_tokens_) set_variable(variables, name, Value(token));
  if (input.bos_token) set_variable(variables, "bos_token", Value(*input.bos_token));
  if (input.eos_token) set_variable(variables, "eos_token", Value(*input.eos_token));
  set_variable(variables, "messages", Value::from_json(alias_reasoning_fields(input.messages)));
  set_variable(variables, "tools", Value::from_json(input.tools));
  set_variable(variables, "documents", Value::none());
  set_variable(variables, "add_generation_prompt", Value(input.add_generation_prompt));
  for (const auto& [name, value] : input.extra_variables.items()) set_variable(variables, name, Value::from_json(value));

  RenderedChat rendered;
  Evaluator evaluator(compiled.source_name, std::move(variables));
  rendered.text = evaluator.render(compiled.body, &rendered.generation_spans);
  return rendered;
}

std::string ChatTemplate::render(const ChatRenderInput& input) const { return render_with_spans(input).text; }

OrderedJson apply_system_prompt(const OrderedJson& messages, std::string_view system_prompt) {
  if (!messages.is_array()) fail_user("chat template input: 'messages' must be a JSON array");
  OrderedJson out = messages;
  if (!out.empty() && out[0].is_object() && out[0].value("role", "") == "system") {
    out[0]["content"] = std::string(system_prompt);
    return out;
  }
  OrderedJson system = OrderedJson::object();
  system["role"] = "system";
  system["content"] = std::string(system_prompt);
  out.insert(out.begin(), std::move(system));
  return out;
}

}  // namespace surogate::chat_template
