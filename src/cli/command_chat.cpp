// `surogate chat --model DIR [--adapter DIR] [--system TEXT] [sampling options]`: a conversation in
// the terminal. Each line typed is a user message; the reply, rendered through the folder's chat
// template with the whole conversation so far, streams as it is generated. `/reset` starts over,
// `/exit` (or end of input) quits. The model stays loaded between turns; a turn that does not fit
// the context says so and the conversation can be reset.
#include <unistd.h>

#include <iostream>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "chat_template/chat_template.h"
#include "cli/commands.h"
#include "cli/generation_flags.h"
#include "core/error.h"
#include "generate/generation_defaults.h"
#include "generate/generator.h"
#include "generate/prompts.h"
#include "io/model_config.h"

namespace surogate::cli {
namespace {
namespace fs = std::filesystem;

struct ChatArguments {
  ModelFlags model;
  SamplingFlags sampling;
  std::string system;
  int64_t max_context = 0;  // 0: config.json's max_position_embeddings, capped at 8192
};

int run_chat(const ChatArguments& arguments) {
  const fs::path model_dir(arguments.model.model);
  if (!fs::is_directory(model_dir)) fail_user("--model {}: not a folder; give a Hugging Face model folder", model_dir.string());
  refuse_vision_language_folder("chat", model_dir);
  const generate::GenerationDefaults defaults = generate::read_generation_defaults(model_dir);
  const generate::SamplingOptions sampling = sampling_options(arguments.sampling, defaults);
  generate::PromptBuilder prompts(model_dir, arguments.sampling.enable_thinking);
  const tokenizer::Tokenizer& codec = prompts.tokenizer();
  chat_template::ChatTemplate::from_tokenizer_directory(model_dir);  // no template: one error before loading
  const int64_t positions = io::load_model_config(model_dir).max_position_embeddings;
  const int64_t context = arguments.max_context > 0 ? arguments.max_context
                                                     : (positions > 0 ? std::min<int64_t>(positions, 8192) : 8192);
  std::unique_ptr<generate::NextTokenModel> model = open_model(arguments.model, 1, context);

  const bool interactive = ::isatty(STDIN_FILENO) != 0;
  if (interactive) std::cout << "Chat with " << model_dir.string() << " (/reset starts over, /exit quits)\n";
  chat_template::OrderedJson messages = chat_template::OrderedJson::array();
  auto start_over = [&] {
    messages = chat_template::OrderedJson::array();
    if (!arguments.system.empty()) messages.push_back({{"role", "system"}, {"content", arguments.system}});
  };
  start_over();
  std::string line;
  for (uint64_t turn = 0;; ++turn) {
    if (interactive) std::cout << "> " << std::flush;
    if (!std::getline(std::cin, line) || line == "/exit") break;
    if (line == "/reset") {
      start_over();
      if (interactive) std::cout << "(conversation cleared)\n";
      continue;
    }
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    messages.push_back({{"role", "user"}, {"content", line}});
    try {
      const std::vector<int32_t> prompt = prompts.from_messages(messages);
      const int64_t budget = new_token_budget(arguments.sampling, defaults, static_cast<int64_t>(prompt.size()), context,
                                              fmt::format("turn {}", turn + 1));
      const generate::GenerationRequest request{prompt, sampling, static_cast<uint64_t>(arguments.sampling.seed) + turn,
                                                budget, defaults.eos_token_ids, arguments.sampling.stop};
      const std::vector<generate::GenerationResult> reply = generate::generate(
          *model, std::span<const generate::GenerationRequest>(&request, 1), &codec,
          [](size_t, const std::string& delta) { std::cout << delta << std::flush; });
      std::cout << "\n" << std::flush;
      messages.push_back({{"role", "assistant"}, {"content", reply.front().completion}});
    } catch (const UserError& error) {
      messages.erase(messages.size() - 1);  // the turn did not happen
      std::cout << std::flush;
      std::cerr << "error: " << error.what() << " (/reset starts over)\n";
      if (!interactive) return 2;
    }
  }
  return 0;
}

}  // namespace

Command register_chat_command(CLI::App& parent) {
  auto arguments = std::make_shared<ChatArguments>();
  CLI::App* app = parent.add_subcommand("chat", "Chat with a model folder (and a LoRA adapter) in the terminal");
  add_model_flags(*app, arguments->model);
  app->add_option("--system", arguments->system, "A system message opening the conversation");
  app->add_option("--max_context,--max-context", arguments->max_context,
                  "Tokens the conversation may hold (default: max_position_embeddings, at most 8192)")
      ->check(positive_count());
  add_sampling_flags(*app, arguments->sampling);
  return Command{app, [arguments] { return run_chat(*arguments); }};
}

const CommandRegistration kChatRegistration{106, register_chat_command};

}  // namespace surogate::cli
