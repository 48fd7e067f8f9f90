// `surogate template render|list`: renders conversations with a chat template, for checking what
// a model will be trained on. Input is JSON lines on stdin,
//   {"messages": [...], "tools": [...], "add_generation_prompt": bool, "enable_thinking": bool, ...}
// and each line prints {"text": "..."} (plus "generation_spans" with --spans). Keys other than
// messages, tools, add_generation_prompt, bos_token and eos_token become template variables.
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "chat_template/chat_template.h"
#include "chat_template/builtin_templates.h"
#include "cli/commands.h"
#include "core/error.h"

namespace surogate::cli {
namespace {

using chat_template::ChatRenderInput;
using chat_template::ChatTemplate;
using chat_template::OrderedJson;

struct TemplateOptions {
  std::string tokenizer_directory;
  std::string template_name;
  std::string template_file;
  std::optional<std::string> system_prompt;
  bool add_generation_prompt = false;
  bool spans = false;
};

ChatTemplate load_template(const TemplateOptions& options) {
  int chosen = !options.tokenizer_directory.empty() + !options.template_name.empty() + !options.template_file.empty();
  if (chosen != 1) fail_user("give exactly one of --tokenizer DIR, --template NAME or --template-file PATH");
  if (!options.tokenizer_directory.empty()) return ChatTemplate::from_tokenizer_directory(options.tokenizer_directory);
  if (!options.template_name.empty()) return ChatTemplate::builtin(options.template_name);
  std::ifstream file(options.template_file);
  if (!file) fail_user("cannot read the template file {}", options.template_file);
  std::string source((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  return ChatTemplate::from_source(source, options.template_file);
}

ChatRenderInput parse_request(const std::string& line, const TemplateOptions& options) {
  OrderedJson request = OrderedJson::parse(line);
  if (!request.is_object()) fail_user("expected a JSON object");
  if (!request.contains("messages")) fail_user("the object has no \"messages\"");
  ChatRenderInput input;
  input.add_generation_prompt = options.add_generation_prompt;
  for (const auto& [key, value] : request.items()) {
    if (key == "messages") {
      input.messages = value;
    } else if (key == "tools") {
      input.tools = value;
    } else if (key == "add_generation_prompt") {
      if (!value.is_boolean()) fail_user("\"add_generation_prompt\" must be true or false");
      input.add_generation_prompt = value.get<bool>();
    } else if (key == "bos_token" || key == "eos_token") {
      if (!value.is_string()) fail_user("\"{}\" must be a string", key);
      (key == "bos_token" ? input.bos_token : input.eos_token) = value.get<std::string>();
    } else {
      input.extra_variables[key] = value;
    }
  }
  if (options.system_prompt) input.messages = chat_template::apply_system_prompt(input.messages, *options.system_prompt);
  return input;
}

int run_render(const TemplateOptions& options) {
  ChatTemplate chat = load_template(options);
  std::string line;
  size_t line_number = 0;
  while (std::getline(std::cin, line)) {
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      ChatRenderInput input = parse_request(line, options);
      chat_template::RenderedChat rendered = chat.render_with_spans(input);
      OrderedJson out = OrderedJson::object();
      out["text"] = rendered.text;
      if (options.spans) {
        out["generation_spans"] = OrderedJson::array();
        for (const auto& span : rendered.generation_spans) out["generation_spans"].push_back({span.begin, span.end});
      }
      std::cout << out.dump(-1, ' ', false, OrderedJson::error_handler_t::replace) << '\n';
    } catch (const OrderedJson::exception& error) {
      fail_user("stdin line {}: not valid JSON: {}", line_number, error.what());
    } catch (const UserError& error) {
      fail_user("stdin line {}: {}", line_number, error.what());
    }
  }
  std::cout.flush();
  return 0;
}

int run_list() {
  for (const auto& entry : chat_template::builtin_templates()) fmt::print("{:<8} {}\n", entry.name, entry.description);
  return 0;
}

}  // namespace

Command register_template_command(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand("template", "Render conversations with a chat template (debugging aid)");
  app->require_subcommand(1);
  auto options = std::make_shared<TemplateOptions>();
  CLI::App* render = app->add_subcommand(
      "render", "Read JSON lines {\"messages\": [...], \"tools\": [...], ...} on stdin, print {\"text\": ...} per line");
  render->add_option("--tokenizer", options->tokenizer_directory,
                     "Model/tokenizer directory whose tokenizer_config.json holds the chat template");
  render->add_option("--template", options->template_name, "Built-in template name (see `surogate template list`)");
  render->add_option("--template-file", options->template_file, "A Jinja chat template file");
  render->add_flag("--add-generation-prompt", options->add_generation_prompt,
                   "Append the assistant prompt (lines may override with \"add_generation_prompt\")");
  render->add_option("--system", options->system_prompt,
                     "Replace the system message (or insert one), like the config's `system:`");
  render->add_flag("--spans", options->spans, "Also print the {% generation %} spans (assistant text)");
  CLI::App* list = app->add_subcommand("list", "List the built-in chat templates");
  return Command{app, [options, render, list]() {
                   if (render->parsed()) return run_render(*options);
                   if (list->parsed()) return run_list();
                   return 2;
                 }};
}

const CommandRegistration kTemplateRegistration{40, register_template_command};

}  // namespace surogate::cli
