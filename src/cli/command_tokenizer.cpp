// `surogate tokenizer encode|decode`: JSON lines in, JSON lines out, for scripting and for the
// parity tests against HF `tokenizers`. Lines are read in batches and encoded on all cores;
// output order is input order. Raw input bytes that are not UTF-8 are replaced by U+FFFD before
// the JSON is parsed (the tokenizer's UTF-8 contract). A malformed line stops the command with
// exit code 2 and names the line.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace surogate::cli {
namespace {

constexpr size_t kBatchLines = 8192;
constexpr size_t kBatchBytes = 16u << 20;

struct TokenizerOptions {
  std::string tokenizer_dir;
  bool add_special_tokens = false;
  bool skip_special_tokens = false;
  bool stats = false;
};

nlohmann::json parse_line(std::string& line, size_t line_number) {
  if (!tokenizer::is_valid_utf8(line)) line = tokenizer::replace_invalid_utf8(line);
  try {
    return nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    fail_user("stdin line {}: not valid JSON ({}); each line must be one JSON object", line_number,
              e.what());
  }
}

// Reads up to one batch of lines; returns false at end of input with nothing read.
bool read_batch(std::vector<std::string>& lines) {
  lines.clear();
  size_t bytes = 0;
  std::string line;
  while (lines.size() < kBatchLines && bytes < kBatchBytes && std::getline(std::cin, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    bytes += line.size();
    lines.push_back(std::move(line));
  }
  return !lines.empty();
}

void write_out(const fmt::memory_buffer& buffer) {
  if (std::fwrite(buffer.data(), 1, buffer.size(), stdout) != buffer.size()) {
    fail_user("cannot write to stdout (closed pipe or full disk)");
  }
}

int run_encode(const TokenizerOptions& options) {
  const tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::load(options.tokenizer_dir);
  std::ios::sync_with_stdio(false);
  std::vector<std::string> lines;
  std::vector<std::string> texts;
  size_t line_number = 0, total_bytes = 0, total_tokens = 0, total_texts = 0;
  double encode_seconds = 0;
  fmt::memory_buffer out;
  while (read_batch(lines)) {
    texts.clear();
    for (std::string& line : lines) {
      ++line_number;
      nlohmann::json value = parse_line(line, line_number);
      if (!value.is_object() || !value.contains("text") || !value["text"].is_string()) {
        fail_user(
            "stdin line {}: expected an object with a string \"text\", e.g. {{\"text\": "
            "\"Hello\"}}",
            line_number);
      }
      texts.push_back(std::move(value["text"].get_ref<std::string&>()));
      total_bytes += texts.back().size();
    }
    const auto start = std::chrono::steady_clock::now();
    const auto encoded = tokenizer.encode_batch(texts, options.add_special_tokens);
    encode_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    out.clear();
    for (const auto& ids : encoded) {
      out.append(std::string_view("{\"ids\": ["));
      for (size_t i = 0; i < ids.size(); ++i) {
        if (i > 0) out.append(std::string_view(", "));
        fmt::format_to(std::back_inserter(out), "{}", ids[i]);
      }
      out.append(std::string_view("]}\n"));
      total_tokens += ids.size();
    }
    total_texts += encoded.size();
    write_out(out);
  }
  std::fflush(stdout);
  if (options.stats) {
    fmt::print(stderr,
               "encoded {} texts, {} bytes, {} tokens in {:.6f} s ({:.2f} MB/s in encode_batch)\n",
               total_texts, total_bytes, total_tokens, encode_seconds,
               encode_seconds > 0 ? static_cast<double>(total_bytes) / 1e6 / encode_seconds : 0.0);
  }
  return 0;
}

int run_decode(const TokenizerOptions& options) {
  const tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::load(options.tokenizer_dir);
  std::ios::sync_with_stdio(false);
  std::vector<std::string> lines;
  std::vector<int32_t> ids;
  size_t line_number = 0;
  fmt::memory_buffer out;
  while (read_batch(lines)) {
    out.clear();
    for (std::string& line : lines) {
      ++line_number;
      const nlohmann::json value = parse_line(line, line_number);
      if (!value.is_object() || !value.contains("ids") || !value["ids"].is_array()) {
        fail_user("stdin line {}: expected an object with a list \"ids\", e.g. {{\"ids\": [1, 2]}}",
                  line_number);
      }
      ids.clear();
      for (const auto& id : value["ids"]) {
        if (!id.is_number_integer() || id.get<int64_t>() < INT32_MIN ||
            id.get<int64_t>() > INT32_MAX) {
          fail_user("stdin line {}: every id must be a 32-bit integer, found {}", line_number,
                    id.dump());
        }
        // As Hugging Face's tokenizers: a negative id is an error (its decode raises), not "".
        if (id.get<int64_t>() < 0) {
          fail_user("stdin line {}: id {} is negative; token ids are 0 to {}", line_number, id.get<int64_t>(),
                    tokenizer.vocab_size() - 1);
        }
        ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
      }
      const nlohmann::json text = {{"text", tokenizer.decode(ids, options.skip_special_tokens)}};
      out.append(text.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      out.push_back('\n');
    }
    write_out(out);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

Command register_tokenizer_command(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand(
      "tokenizer", "Encode or decode JSON lines with a tokenizer.json tokenizer");
  app->require_subcommand(1);
  auto options = std::make_shared<TokenizerOptions>();

  CLI::App* encode = app->add_subcommand(
      "encode", "Read {\"text\": ...} lines on stdin, write {\"ids\": [...]} lines");
  encode
      ->add_option("--tokenizer", options->tokenizer_dir,
                   "Folder with tokenizer.json (+ tokenizer_config.json)")
      ->required();
  encode->add_flag("--add-special-tokens", options->add_special_tokens,
                   "Add the post-processor's special tokens (e.g. <s> for Llama 2)");
  encode->add_flag("--stats", options->stats,
                   "Print texts, bytes, tokens and encode throughput to stderr");

  CLI::App* decode = app->add_subcommand(
      "decode", "Read {\"ids\": [...]} lines on stdin, write {\"text\": ...} lines");
  decode
      ->add_option("--tokenizer", options->tokenizer_dir,
                   "Folder with tokenizer.json (+ tokenizer_config.json)")
      ->required();
  decode->add_flag("--skip-special-tokens", options->skip_special_tokens,
                   "Leave special tokens out of the text");

  return Command{app, [options, encode] {
                   return encode->parsed() ? run_encode(*options) : run_decode(*options);
                 }};
}

const CommandRegistration kTokenizerRegistration{30, register_tokenizer_command};

}  // namespace surogate::cli
