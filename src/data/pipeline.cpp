// Orchestration of the data path; see pipeline.h. Formatting, truncation, packing and the cache
// format live in their own files; this file wires them to the config, tokenizer and template.
#include "data/pipeline.h"

#include <exception>
#include <fstream>
#include <numeric>
#include <random>

#include <xxhash.h>

#include "chat_template/chat_template.h"
#include "core/error.h"
#include "data/dataset_files.h"
#include "data/dataset_formatter.h"
#include "data/format_workers.h"
#include "data/grounding.h"
#include "data/kto_rows.h"
#include "data/row_reader.h"
#include "data/truncation.h"
#include "io/hf_hub.h"
#include "tokenizer/tokenizer.h"
#include "vision/vision_model_folder.h"

namespace surogate::data {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json read_json_file(const fs::path& path) {
  std::ifstream stream(path);
  if (!stream) return json();
  return json::parse(stream, nullptr, false);
}

std::string file_bytes(const fs::path& path) {
  std::ifstream stream(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(stream), {});
}

json dataset_json(const DatasetConfig& d) {
  json j;
  j["path"] = d.path;
  j["type"] = static_cast<int>(d.type);
  j["subset"] = d.subset.value_or("");
  j["split"] = d.split;
  j["samples"] = d.samples.value_or(-1);
  j["text_field"] = d.text_field;
  j["instruction_field"] = d.instruction_field.value_or("");
  j["output_field"] = d.output_field.value_or("");
  j["input_field"] = d.input_field.value_or("");
  j["system_prompt_type"] = d.system_prompt_type ? static_cast<int>(*d.system_prompt_type) : -1;
  j["system_prompt_field"] = d.system_prompt_field.value_or("");
  j["system_prompt"] = d.system_prompt.value_or("");
  j["prompt_format"] = d.prompt_format.value_or("");
  j["prompt_format_no_input"] = d.prompt_format_no_input.value_or("");
  j["messages_field"] = d.messages_field;
  j["system_field"] = d.system_field.value_or("");
  j["tools_field"] = d.tools_field.value_or("");
  j["message_property_mappings"] = d.message_property_mappings;
  if (d.type == DatasetType::Preference || d.type == DatasetType::Kto) {  // only then: other caches keep their key
    j["preference_fields"] = {d.prompt_field, d.chosen_field, d.rejected_field, d.completion_field, d.label_field};
  }
  json files = json::array();
  for (const auto& file : select_dataset_files(d)) {
    files.push_back({file.string(), fs::file_size(file),
                     static_cast<int64_t>(fs::last_write_time(file).time_since_epoch().count())});
  }
  j["files"] = files;
  return j;
}

// Formats and length-fits every row of one dataset entry; documents are grouped per row so the
// validation split never separates the pieces of one row.
std::vector<std::vector<TokenizedSample>> read_dataset(const DatasetConfig& dataset, const DataSettings& settings,
                                                       const TextTools& tools, DatasetReport& report,
                                                       const ProgressFn& progress) {
  std::vector<fs::path> files = select_dataset_files(dataset);
  report.path = dataset.path;
  report.files = files.size();
  DatasetFormatter formatter(dataset, settings, tools);
  auto reader = open_row_reader(files);
  LengthStats length_stats;
  std::vector<std::vector<TokenizedSample>> rows;
  // Everything after formatting runs here, in row order (data/format_workers.h).
  auto take = [&](FormattedRow formatted) {
    ++report.rows_read;
    if (progress && report.rows_read % 256 == 0) progress(dataset.path, report.rows_read);
    if (!formatted.sample) {
      ++report.dropped[formatted.drop_reason];
      return;
    }
    report.tokenization_differs += formatted.tokenization_differs ? 1 : 0;
    report.weighted_rows += formatted.sample->weights.empty() ? 0 : 1;
    if (formatted.sample->images && formatted.sample->input_ids.size() > settings.max_length) {
      ++report.dropped["longer than max_length with images (a row with images is never cut)"];
      return;
    }
    std::vector<TokenizedSample> documents;
    fit_to_length(std::move(*formatted.sample), settings.max_length, settings.truncation_strategy, documents,
                  length_stats);
    report.documents += documents.size();
    if (!documents.empty()) rows.push_back(std::move(documents));
  };
  auto wanted = [&](uint64_t read) { return !dataset.samples || read < static_cast<uint64_t>(*dataset.samples); };
  // The first row on this thread: it resolves an `auto` dataset's type for every worker's copy.
  Row row;
  if (wanted(0) && reader->next(row)) take(formatter.format(row));
  const size_t batch_rows = 256 * settings.workers;
  std::vector<Row> batch;
  for (bool more = true; more;) {
    batch.clear();
    std::exception_ptr read_error;  // raised after the rows before it, as one thread would
    try {
      while (batch.size() < batch_rows && wanted(report.rows_read + batch.size()) && (more = reader->next(row))) {
        batch.push_back(std::move(row));
      }
    } catch (...) {
      read_error = std::current_exception();
    }
    if (batch.size() < batch_rows) more = false;
    for (FormattedRow& formatted : formatter.format_rows(batch, settings.workers)) take(std::move(formatted));
    if (read_error) std::rethrow_exception(read_error);
  }
  if (progress) progress(dataset.path, report.rows_read);
  report.type = formatter.resolved_type();
  report.truncated = length_stats.truncated;
  report.split = length_stats.split;
  for (const auto& [reason, count] : length_stats.dropped) report.dropped[reason] += count;
  return rows;
}

void flatten(std::vector<std::vector<TokenizedSample>>& rows, std::vector<TokenizedSample>& out) {
  for (auto& documents : rows) {
    for (auto& document : documents) out.push_back(std::move(document));
  }
}

// The image processor's settings: what the cached images and positions depend on.
json vision_key(const VisionData& vision) {
  const vision::ImageProcessorConfig& p = vision.processor;
  return {{"architecture", vision.architecture},
          {"patch", p.patch_size},
          {"temporal_patch", p.temporal_patch_size},
          {"merge", p.merge_size},
          {"min_pixels", p.min_pixels},
          {"max_pixels", p.max_pixels},
          {"resample_order", static_cast<int>(p.resample_order)},
          {"norm_bbox", vision.norm_bbox == NormBbox::None ? "none" : "norm1000"}};
}

json packing_json(const PackingStats& stats) {
  return {{"documents", stats.documents}, {"rows", stats.rows},   {"tokens", stats.tokens},
          {"loss_tokens", stats.loss_tokens}, {"slots", stats.slots}, {"efficiency", stats.efficiency()}};
}

// An agent loss_scale strategy weighs tool calls; a training dataset where it found none trains
// exactly as with `default`, which is worth saying.
std::optional<std::string> unweighted_agent_warning(const FormatOptions& format, const DatasetReport& report) {
  if (format.train_on_inputs || !loss_scale_is_agent(format.loss_scale)) return std::nullopt;
  if (report.documents == 0 || report.weighted_rows > 0) return std::nullopt;
  const bool hermes = format.loss_scale == LossScale::Hermes;
  std::string where = format.agent_template ? fmt::format("written by agent_template {}",
                                                          agent_template_name(*format.agent_template))
                      : hermes              ? "as <tool_call> blocks in the rendered text"
                                            : "as Action: / Action Input: lines in the rendered text";
  return fmt::format("loss_scale {} weighs tool calls, but dataset {} has none ({} rows read, no tool call {}): its "
                     "tokens all weigh 1, as with loss_scale default (docs/data.md, \"Loss scale\")",
                     hermes ? "hermes" : "react", report.path, report.rows_read, where);
}

// `train_on_inputs` is read once Config has it (it is not in the configuration reference yet).
template <typename ConfigType>
bool train_on_inputs_of(const ConfigType& config) {
  if constexpr (requires { config.train_on_inputs; }) {
    return config.train_on_inputs;
  } else {
    return false;
  }
}

}  // namespace

namespace {

// surogate dpo, or (preview, tokenize) datasets of preference pairs.
bool preference_data(const Config& config) {
  if (config.loss.preference) return true;
  for (const auto* list : {&config.data.datasets, &config.eval.validation_datasets}) {
    for (const DatasetConfig& dataset : *list) {
      if (dataset.type == DatasetType::Preference || dataset.type == DatasetType::Kto) return true;
    }
  }
  return false;
}

// The image processor of a vision-language model folder with the config's max_pixels; max_pixels
// for any other model is a UserError naming it.
std::optional<VisionData> vision_data(const Config& config, const fs::path& model_dir) {
  std::optional<std::string> architecture = vision::vision_language_architecture(model_dir);
  if (!architecture) {
    for (const auto& [set, key] : {std::pair{config.data.max_pixels.has_value(), "max_pixels"},
                                   std::pair{config.data.norm_bbox.has_value(), "norm_bbox"}}) {
      if (!set) continue;
      fail_user("{}: {} applies to vision-language models (Qwen2_5_VLForConditionalGeneration, "
                "Qwen3VLForConditionalGeneration); {} is not one: remove the option",
                config.sources.of(key), key, (model_dir / "config.json").string());
    }
    return std::nullopt;
  }
  VisionData data{*architecture, vision::ImageProcessorConfig::from_folder(model_dir),
                  config.data.norm_bbox.value_or(default_norm_bbox(*architecture))};
  if (config.data.max_pixels) {
    if (*config.data.max_pixels < data.processor.min_pixels) {
      fail_user("{}: max_pixels ({}) is below the image processor's min_pixels ({}, {}): raise it",
                config.sources.of("max_pixels"), *config.data.max_pixels, data.processor.min_pixels,
                (model_dir / "preprocessor_config.json").string());
    }
    data.processor.max_pixels = *config.data.max_pixels;
  }
  return data;
}

bool has_kto_data(const Config& config) {
  for (const auto* list : {&config.data.datasets, &config.eval.validation_datasets}) {
    for (const DatasetConfig& dataset : *list) {
      if (dataset.type == DatasetType::Kto) return true;
    }
  }
  return false;
}

}  // namespace

DataSettings data_settings_from_config(const Config& config) {
  DataSettings settings;
  settings.datasets = config.data.datasets;
  settings.validation_datasets = config.eval.validation_datasets;
  settings.validation_split_ratio = config.eval.validation_split_ratio;
  settings.train_seed = config.data.train_seed;
  settings.eval_seed = config.eval.eval_seed;
  if (settings.datasets.empty()) fail_user("no `datasets` in the config: add at least one dataset entry");
  if (config.model.name_or_path.empty()) fail_user("`model` is not set: the tokenizer is read from the model folder");
  settings.tokenizer_dir = io::resolve_model(config.model.name_or_path);
  settings.model_vocabulary = read_model_vocabulary(settings.tokenizer_dir);
  int64_t sequence_len = 0;
  if (config.model.sequence_len) {
    sequence_len = *config.model.sequence_len;
  } else {
    json model_config = read_json_file(settings.tokenizer_dir / "config.json");
    const json* limit = model_config.is_object() && model_config.contains("max_position_embeddings")
                            ? &model_config["max_position_embeddings"]
                            : nullptr;
    if (limit != nullptr && limit->is_number_integer() && limit->get<int64_t>() > 0) {
      sequence_len = limit->get<int64_t>();
    } else {
      fail_user("sequence_len is not set and {} gives no max_position_embeddings: set sequence_len",
                (settings.tokenizer_dir / "config.json").string());
    }
  }
  if (sequence_len <= 0) fail_user("sequence_len must be positive (got {})", sequence_len);
  int64_t max_length = config.data.max_length.value_or(sequence_len);
  if (max_length <= 0 || max_length > sequence_len) {
    fail_user("max_length ({}) must be between 1 and sequence_len ({})", max_length, sequence_len);
  }
  settings.sequence_len = static_cast<size_t>(sequence_len);
  settings.max_length = static_cast<size_t>(max_length);
  if (preference_data(config)) {
    // One pair per row: the chosen sequence, then the rejected one, each at most max_length
    // (data/preference_formatter.h); the row is twice that, and nothing is packed beside it.
    settings.format.preference_max_length = settings.max_length;
    settings.sequence_len = settings.max_length = 2 * static_cast<size_t>(max_length);
  }
  if (has_kto_data(config)) settings.kto_batch = static_cast<size_t>(config.schedule.per_device_train_batch_size);
  settings.truncation_strategy = config.data.truncation_strategy;
  settings.pad_left = config.data.padding_side == PaddingSide::Left;
  settings.padding_free = config.data.padding_free;
  settings.sample_packing = config.data.sample_packing && !preference_data(config);  // a pair's row holds it alone
  settings.format.use_chat_template = config.data.use_chat_template;
  settings.format.system = config.data.system;
  settings.format.train_on_inputs = train_on_inputs_of(config);
  auto loss_scale = parse_loss_scale(config.data.loss_scale);
  if (!loss_scale) fail_user("{}: unknown loss_scale '{}'", config.sources.of("loss_scale"), config.data.loss_scale);
  settings.format.loss_scale = *loss_scale;
  settings.format.response_prefix = config.data.response_prefix;
  if (config.data.agent_template) {
    settings.format.agent_template = parse_agent_template(*config.data.agent_template);
    if (!settings.format.agent_template) {
      fail_user("{}: unknown agent_template '{}'", config.sources.of("agent_template"), *config.data.agent_template);
    }
  }
  settings.template_name = config.data.template_name;
  settings.cache_path = fs::path(config.run.output_dir) / "tokenized" / "dataset.surotok";
  settings.workers = format_worker_count(config.data.dataloader_num_workers);
  settings.vision = vision_data(config, settings.tokenizer_dir);
  return settings;
}

TextTools load_text_tools(const DataSettings& settings) {
  auto tokenizer = std::make_shared<tokenizer::Tokenizer>(tokenizer::Tokenizer::load(settings.tokenizer_dir));
  if (settings.model_vocabulary) {
    check_tokenizer_fits_model(*tokenizer, settings.tokenizer_dir / "tokenizer.json", *settings.model_vocabulary);
  }
  check_special_tokens_exist(*tokenizer, settings.tokenizer_dir);
  TextTools tools;
  if (settings.vision) {
    tools.image_pad_id = tokenizer->token_to_id("<|image_pad|>");
    if (!tools.image_pad_id) {
      fail_user("{}: the tokenizer has no <|image_pad|> token, which {} needs for images",
                (settings.tokenizer_dir / "tokenizer.json").string(), settings.vision->architecture);
    }
  }
  tools.codec.encode = [tokenizer](std::string_view text, bool special) { return tokenizer->encode(text, special); };
  tools.codec.decode = [tokenizer](std::span<const int32_t> ids) { return tokenizer->decode(ids, false); };
  tools.codec.eos_id = tokenizer->eos_token_id();
  tools.codec.pad_id = tokenizer->pad_token_id();
  if (!settings.format.use_chat_template) return tools;
  std::shared_ptr<chat_template::ChatTemplate> chat;
  if (settings.template_name && *settings.template_name != "auto") {
    chat = std::make_shared<chat_template::ChatTemplate>(chat_template::ChatTemplate::builtin(*settings.template_name));
    tools.template_identity = "builtin:" + *settings.template_name;
  } else if (tokenizer->config().contains("chat_template")) {
    chat = std::make_shared<chat_template::ChatTemplate>(
        chat_template::ChatTemplate::from_tokenizer_config(tokenizer->config(), (settings.tokenizer_dir / "tokenizer_config.json").string()));
    tools.template_identity = "tokenizer_config";
  } else {
    return tools;  // no template: conversation rows will say how to configure one
  }
  tools.renderer = [chat](const RowValue& messages, const RowValue& tool_list, bool generation_prompt) {
    chat_template::ChatRenderInput input;
    input.messages = messages;
    input.tools = tool_list;
    input.add_generation_prompt = generation_prompt;
    return chat->render(input);
  };
  return tools;
}

PreparedData prepare_data(const DataSettings& settings, const TextTools& tools, const ProgressFn& progress) {
  PreparedData prepared;
  std::vector<TokenizedSample> train_documents;
  std::vector<TokenizedSample> eval_documents;
  for (const auto& dataset : settings.datasets) {
    prepared.datasets.emplace_back();
    auto rows = read_dataset(dataset, settings, tools, prepared.datasets.back(), progress);
    if (auto warning = unweighted_agent_warning(settings.format, prepared.datasets.back())) {
      prepared.warnings.push_back(*warning);
    }
    if (settings.validation_datasets.empty() && settings.validation_split_ratio > 0.0) {
      // Hold out whole rows, chosen by a permutation seeded with eval_seed.
      std::vector<size_t> order(rows.size());
      std::iota(order.begin(), order.end(), 0);
      std::mt19937_64 generator(static_cast<uint64_t>(settings.eval_seed));
      for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[generator() % i]);
      auto held_out = static_cast<size_t>(static_cast<double>(rows.size()) * settings.validation_split_ratio);
      for (size_t k = 0; k < order.size(); ++k) {
        auto& target = k < held_out ? eval_documents : train_documents;
        for (auto& document : rows[order[k]]) target.push_back(std::move(document));
      }
    } else {
      flatten(rows, train_documents);
    }
  }
  for (const auto& dataset : settings.validation_datasets) {
    DatasetReport report;
    auto rows = read_dataset(dataset, settings, tools, report, progress);
    report.path = "validation: " + report.path;
    prepared.datasets.push_back(report);
    flatten(rows, eval_documents);
  }
  if (train_documents.empty()) {
    // Say per dataset what happened to its rows: none read (an empty file), or why each was dropped.
    std::string details;
    for (const DatasetReport& report : prepared.datasets) {
      if (report.path.starts_with("validation: ")) continue;
      std::string reasons;
      for (const auto& [reason, count] : report.dropped) reasons += fmt::format("; {} dropped: {}", count, reason);
      details += fmt::format("\n  {}: {} rows read{}", report.path, report.rows_read,
                             report.rows_read == 0 ? " (the dataset is empty)" : reasons);
    }
    fail_user("no training documents are left after reading the datasets:{}\nFix the data, or the dataset fields, "
              "max_length / sequence_len ({} / {}) and truncation_strategy",
              details, settings.max_length, settings.sequence_len);
  }
  if (settings.kto_batch > 0) {
    // KTO: each row with its KL sequence; the rows keep this order (data/kto_rows.h).
    add_kl_completions(train_documents, settings.kto_batch, settings.format.preference_max_length);
    add_kl_completions(eval_documents, settings.kto_batch, settings.format.preference_max_length);
    prepared.kto_labels = {{"train", kto_label_string(train_documents)}, {"eval", kto_label_string(eval_documents)}};
  }
  PackingOptions options;
  options.sequence_length = settings.sequence_len;
  options.keep_order = settings.kto_batch > 0;
  options.mode = settings.sample_packing ? PackingMode::BestFit
                 : settings.padding_free ? PackingMode::Sequential
                                         : PackingMode::OnePerRow;
  options.pad_left = settings.pad_left;
  options.pad_id = tools.codec.pad_id.value_or(tools.codec.eos_id.value_or(0));
  options.seed = static_cast<uint64_t>(settings.train_seed);
  options.vision = settings.vision.has_value();
  prepared.train = pack_documents(std::move(train_documents), options, prepared.train_packing);
  options.seed = static_cast<uint64_t>(settings.eval_seed);
  prepared.eval = pack_documents(std::move(eval_documents), options, prepared.eval_packing);
  return prepared;
}

json PreparedData::report() const {
  json report;
  report["datasets"] = json::array();
  for (const auto& d : datasets) {
    report["datasets"].push_back({{"path", d.path}, {"type", d.type}, {"files", d.files}, {"rows_read", d.rows_read},
                                  {"documents", d.documents}, {"dropped", d.dropped}, {"truncated", d.truncated},
                                  {"split", d.split}, {"tokenization_differs", d.tokenization_differs},
                                  {"weighted_rows", d.weighted_rows}});
  }
  report["warnings"] = warnings;
  if (!kto_labels.is_null()) report["kto_labels"] = kto_labels;
  report["train"] = packing_json(train_packing);
  report["eval"] = packing_json(eval_packing);
  return report;
}

uint64_t cache_key(const DataSettings& settings, const TextTools& tools) {
  json key;
  key["format_version"] = kTokenCacheVersion;
  // How labels are derived from the same text; raised when that changes (2: a template's epilogue,
  // such as the original Llama 3 template's last assistant header, carries no loss).
  key["labelling"] = 2;
  key["datasets"] = json::array();
  for (const auto& d : settings.datasets) key["datasets"].push_back(dataset_json(d));
  key["validation_datasets"] = json::array();
  for (const auto& d : settings.validation_datasets) key["validation_datasets"].push_back(dataset_json(d));
  key["validation_split_ratio"] = settings.validation_split_ratio;
  key["train_seed"] = settings.train_seed;
  key["eval_seed"] = settings.eval_seed;
  key["sequence_len"] = settings.sequence_len;
  key["max_length"] = settings.max_length;
  key["truncation_strategy"] = static_cast<int>(settings.truncation_strategy);
  key["pad_left"] = settings.pad_left;
  key["padding_free"] = settings.padding_free;
  key["sample_packing"] = settings.sample_packing;
  if (settings.kto_batch > 0) key["kto_batch"] = settings.kto_batch;  // only then: other caches keep their key
  key["use_chat_template"] = settings.format.use_chat_template;
  key["system"] = settings.format.system.value_or("");
  key["train_on_inputs"] = settings.format.train_on_inputs;
  key["loss_scale"] = static_cast<int>(settings.format.loss_scale);
  key["response_prefix"] = settings.format.response_prefix.value_or("");
  if (settings.format.agent_template) key["agent_template"] = agent_template_name(*settings.format.agent_template);
  key["template"] = tools.template_identity;
  if (settings.vision) key["vision"] = vision_key(*settings.vision);  // only then: text caches keep their key
  std::string tokenizer_json = file_bytes(settings.tokenizer_dir / "tokenizer.json");
  std::string tokenizer_config = file_bytes(settings.tokenizer_dir / "tokenizer_config.json");
  key["tokenizer_json"] = XXH3_64bits(tokenizer_json.data(), tokenizer_json.size());
  key["tokenizer_config"] = XXH3_64bits(tokenizer_config.data(), tokenizer_config.size());
  std::string text = key.dump();
  return XXH3_64bits(text.data(), text.size());
}

std::shared_ptr<TokenCache> load_or_build_cache(const DataSettings& settings, const ProgressFn& progress,
                                                const std::function<void(const std::string&)>& log) {
  TextTools tools = load_text_tools(settings);
  uint64_t key = cache_key(settings, tools);
  TokenCache::Problem problem;
  auto say_warnings = [&](const TokenCache& cache) {
    if (!log) return;
    for (const auto& warning : cache.report().value("warnings", json::array())) {
      log("warning: " + warning.get<std::string>());
    }
  };
  if (auto cache = TokenCache::open(settings.cache_path, key, problem)) {
    if (log) log(fmt::format("token cache {} is up to date; reusing it", settings.cache_path.string()));
    say_warnings(*cache);
    return cache;
  }
  if (log) {
    log(fmt::format("token cache {} is {}; tokenizing the datasets", settings.cache_path.string(), problem.reason));
  }
  PreparedData prepared = prepare_data(settings, tools, progress);
  json report = prepared.report();
  report["pad_id"] = tools.codec.pad_id.value_or(tools.codec.eos_id.value_or(0));
  write_token_cache(settings.cache_path, key, prepared.train, prepared.eval, report);
  auto cache = TokenCache::open(settings.cache_path, key, problem);
  SUROGATE_CHECK(cache != nullptr, "the token cache just written does not read back: {}", problem.reason);
  say_warnings(*cache);
  return cache;
}

std::vector<std::string> describe_report(const json& report) {
  std::vector<std::string> lines;
  for (const auto& d : report.value("datasets", json::array())) {
    lines.push_back(fmt::format("{} ({}): {} files, {} rows read, {} documents, {} truncated, {} split",
                                d.value("path", ""), d.value("type", ""), d.value("files", 0), d.value("rows_read", 0),
                                d.value("documents", 0), d.value("truncated", 0), d.value("split", 0)));
    // A named copy: items() of the temporary value() returns would iterate a destroyed object.
    const json dropped = d.value("dropped", json::object());
    for (const auto& [reason, count] : dropped.items()) {
      lines.push_back(fmt::format("  dropped {}: {}", count.get<uint64_t>(), reason));
    }
    if (d.value("tokenization_differs", 0) > 0) {
      lines.push_back(fmt::format("  {} rows tokenize differently span by span than as a whole (masks follow the "
                                  "spans)",
                                  d.value("tokenization_differs", 0)));
    }
  }
  for (const char* split : {"train", "eval"}) {
    const json& p = report.value(split, json::object());
    lines.push_back(fmt::format("{}: {} documents packed into {} rows, {} tokens ({} with loss), packing efficiency "
                                "{:.1f}%",
                                split, p.value("documents", 0), p.value("rows", 0), p.value("tokens", 0),
                                p.value("loss_tokens", 0), 100.0 * p.value("efficiency", 0.0)));
  }
  return lines;
}

}  // namespace surogate::data
