// `surogate eval --model DIR --data FILE [--batch-size N] [--seq-len T] [--device cpu|cuda]
//  [--ir FILE.json | --model_definition MODEL.py] [--adapter DIR]`: token-weighted mean next-token cross-entropy of a model on
// JSONL data, printed as one JSON line {"loss", "perplexity", "tokens"}. Rows with "input_ids"
// are used as they are; other rows (text, instruction, conversation) are formatted and
// tokenized by the data pipeline's formatter with the model folder's tokenizer, exactly as
// training would see them. Sequences are packed into rows with per-document positions and
// attention (see models/token_batches.h), so the result equals every sequence evaluated alone.
// --adapter merges a PEFT LoRA adapter into the fp32 weights first (models/model_eval.h).
// A vision-language folder (Qwen2.5-VL, Qwen3-VL) is evaluated by command_eval_vision.cpp.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <filesystem>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/command_eval.h"
#include "cli/commands.h"
#include "config/config.h"
#include "core/error.h"
#include "core/system_info.h"
#include "data/dataset_formatter.h"
#include "data/pipeline.h"
#include "graph/json_ir.h"
#include "io/model_config.h"
#include "models/defined_weights.h"
#include "models/model_eval.h"
#include "models/python_definition.h"
#include "models/token_batches.h"
#include "models/decoder_graph.h"
#include "ops/defs/register_ops.h"
#include "vision/vision_model_folder.h"

namespace surogate::cli {

// command_eval_cuda.cpp: the built-in decoder graph in BF16 on the CUDA backend.
models::EvalResult evaluate_on_cuda(const graph::OpRegistry& registry, const io::ModelConfig& config,
                                    const std::filesystem::path& model_dir,
                                    const std::vector<models::TokenBatch>& batches, int64_t batch_size,
                                    int64_t sequence_length, int64_t lmhead_chunks);

models::RowTokenizer pipeline_row_tokenizer(const std::filesystem::path& model_dir, int64_t vocab_size,
                                            std::optional<data::VisionData> vision,
                                            std::shared_ptr<RowImagesByLine> images) {
  auto settings = std::make_shared<data::DataSettings>();
  settings->tokenizer_dir = model_dir;
  settings->model_vocabulary = data::ModelVocabulary{vocab_size, model_dir / "config.json"};
  settings->vision = std::move(vision);
  auto tools = std::make_shared<std::optional<data::TextTools>>();
  return [settings, tools, images](const nlohmann::json& row, const std::filesystem::path& path, int64_t line) {
    const data::RowOrigin origin{path.string(), static_cast<uint64_t>(line), true};
    if (!tools->has_value()) {
      if (!std::filesystem::exists(settings->tokenizer_dir / "tokenizer.json")) {
        fail_user("{}: the row has no \"input_ids\", and {} has no tokenizer.json to tokenize it with; add the "
                  "model's tokenizer files or pre-tokenize the data ({{\"input_ids\": [...]}}).",
                  origin.describe(), settings->tokenizer_dir.string());
      }
      *tools = data::load_text_tools(*settings);
    }
    // A formatter per row: a dataset of type auto decides each row's type (text, instruction, conversation).
    data::DatasetFormatter formatter(DatasetConfig{}, *settings, **tools);
    data::FormattedRow formatted = formatter.format(data::Row{row, origin});
    if (!formatted.sample) fail_user("{}: the row cannot be evaluated: {}.", origin.describe(), formatted.drop_reason);
    if (images && formatted.sample->images) (*images)[line] = formatted.sample->images->resized;
    return models::TokenSequence{std::move(formatted.sample->input_ids), std::move(formatted.sample->labels)};
  };
}

namespace {

// Refuses --seq-len / --batch-size that cannot fit in the host's memory before anything of that
// size is allocated: with --seq-len 2000000000 the packed inputs alone grew to 24 GB before the
// out-of-memory killer ended the process. What is counted is a lower bound (the packed inputs of
// one batch; on the CPU device also the fp32 weights, one hidden state and one chunk of logits),
// so a refusal is never wrong; the rest is left to the allocator.
void check_eval_fits_host(const EvalOptions& options, const io::ModelConfig& config, int64_t batch_size,
                          int64_t sequence_length, int64_t longest_row) {
  const double cells = static_cast<double>(batch_size) * static_cast<double>(sequence_length);
  double bytes = cells * 4.0 * sizeof(int32_t);  // input ids, positions, documents, targets
  if (options.device == "cpu") {
    const double hidden = static_cast<double>(config.hidden_size), vocab = static_cast<double>(config.vocab_size);
    bytes += 4.0 * (cells * hidden + cells * vocab / static_cast<double>(options.lmhead_chunks) + vocab * hidden);
  }
  const double available = static_cast<double>(query_host_info().memory_available_bytes);
  if (available <= 0 || bytes <= available) return;
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  fail_user("--seq-len {} with --batch-size {}: the evaluation needs at least {:.1f} GiB of host memory ({}), but "
            "{:.1f} GiB are available. Lower --seq-len (the longest row of {} has {} tokens; without --seq-len "
            "that is the length used) or --batch-size{}",
            sequence_length, batch_size, bytes / kGiB,
            options.device == "cpu" ? "the packed inputs, the fp32 weights, one hidden state and one chunk of logits"
                                    : "the packed inputs of one batch",
            available / kGiB, options.data, longest_row,
            options.device == "cpu" ? ", or raise --lmhead-chunks" : "");
}

int run_eval(const EvalOptions& options) {
  if (std::optional<std::string> architecture = vision::vision_language_architecture(options.model_dir)) {
    return run_vision_eval(options, *architecture);
  }
  if (options.max_pixels) {
    fail_user("--max_pixels applies to vision-language folders (Qwen2_5_VLForConditionalGeneration, "
              "Qwen3VLForConditionalGeneration); {} is not one: remove the option",
              (std::filesystem::path(options.model_dir) / "config.json").string());
  }
  if (options.device == "cuda" && !options.ir.empty()) {
    fail_user("--device cuda with --ir {}: the CUDA backend evaluates the built-in decoder graph (in BF16); run JSON "
              "IR graphs with --device cpu.", options.ir);
  }
  if (options.device == "cuda" && !options.adapter.empty()) {
    fail_user("--device cuda with --adapter {}: the CUDA eval path does not merge adapters yet; use --device cpu, "
              "or `surogate merge` the adapter into the model first.", options.adapter);
  }
  if (!options.adapter.empty() && !std::filesystem::is_directory(options.adapter)) {
    fail_user("--adapter {}: not a folder; give a PEFT adapter folder (adapter_config.json + "
              "adapter_model.safetensors).", options.adapter);
  }
  // An IR file that names its weights (the Python DSL's) brings its own weight table.
  // A Python DSL file is compiled for the [B, T] of this evaluation once that is known (below).
  const bool python_file = !options.ir.empty() && models::is_python_definition(options.ir);
  models::ModelDefinition definition{options.ir, "--ir " + options.ir};
  definition.model_dir = options.model_dir;
  io::ModelConfig config = options.ir.empty() ? io::load_model_config(options.model_dir)
                                              : models::load_model_config(options.model_dir, definition);
  const graph::OpRegistry registry = ops::make_model_registry();
  graph::Graph forward;
  int64_t batch_size = options.batch_size, sequence_length = options.sequence_length;
  if (!options.ir.empty() && !python_file) {
    // The graph's shapes are fixed: they are the defaults of --batch-size / --seq-len.
    forward = graph::load_json_ir(options.ir, registry);
    if (std::optional<graph::TensorId> ids = forward.find_tensor(models::kInputIds);
        ids && forward.tensor(*ids).type.shape.size() == 2) {
      if (batch_size == 0) batch_size = forward.tensor(*ids).type.shape[0];
      if (sequence_length == 0) sequence_length = forward.tensor(*ids).type.shape[1];
    }
  }
  if (batch_size == 0) batch_size = 1;
  std::vector<models::TokenSequence> sequences =
      models::read_token_jsonl(options.data, config.vocab_size, pipeline_row_tokenizer(options.model_dir, config.vocab_size));
  int64_t longest_row = 0;
  for (const models::TokenSequence& sequence : sequences) {
    longest_row = std::max<int64_t>(longest_row, static_cast<int64_t>(sequence.input_ids.size()));
  }
  if (sequence_length == 0) sequence_length = longest_row;
  check_eval_fits_host(options, config, batch_size, sequence_length, longest_row);
  std::vector<models::TokenBatch> batches = models::pack_token_batches(sequences, batch_size, sequence_length, options.data);
  if (python_file) {
    forward = graph::load_json_ir(models::compile_python_definition(options.ir, options.model_dir, batch_size,
                                                                    sequence_length, options.lmhead_chunks,
                                                                    "--ir " + options.ir),
                                  registry);
  }
  if (options.ir.empty()) {
    forward = models::build_decoder_graph(config, registry,
                                          {.batch = batch_size, .sequence = sequence_length,
                                           .lmhead_chunks = options.lmhead_chunks})
                  .graph;
  } else {
    models::check_model_graph(forward, config, {batch_size, sequence_length}, options.ir);
  }
  models::EvalResult result =
      options.device == "cuda"
          ? evaluate_on_cuda(registry, config, options.model_dir, batches, batch_size, sequence_length,
                             options.lmhead_chunks)
          : models::evaluate_on_cpu(registry, std::move(forward), config, options.model_dir, batches, options.adapter);
  if (result.tokens == 0) fail_user("{}: no token has a label to score (every target is -100).", options.data);
  const double loss = result.loss_sum / static_cast<double>(result.tokens);
  nlohmann::json line = {{"loss", loss}, {"perplexity", std::exp(loss)}, {"tokens", result.tokens}};
  std::cout << line.dump() << "\n";
  return 0;
}

}  // namespace

Command register_eval_command(CLI::App& parent) {
  auto options = std::make_shared<EvalOptions>();
  CLI::App* app = parent.add_subcommand("eval", "Loss and perplexity of a model on JSONL data (token ids, or text / chat rows)");
  app->add_option("--model", options->model_dir, "HF model folder (config.json + safetensors)")->required();
  app->add_option("--data", options->data,
                  "JSONL: {\"input_ids\": [...], \"labels\"?: [...]} or a text / instruction / conversation row per line")
      ->required();
  app->add_option("--adapter", options->adapter, "PEFT LoRA adapter folder, merged into the weights before evaluating");
  app->add_option("--device", options->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app->add_option("--batch-size", options->batch_size, "Rows per batch (default: the --ir graph's, else 1)")->check(positive_count());
  app->add_option("--seq-len", options->sequence_length, "Tokens per row (default: the --ir graph's, else the longest sequence)")
      ->check(positive_count());
  app->add_option("--lmhead-chunks", options->lmhead_chunks, "Row chunks of the fused lm head + loss")
      ->check(positive_count());
  app->add_option("--ir,--model_definition", options->ir,
                  "Build the model from this JSON IR file (see `surogate ir`) or Python DSL file (model.py)");
  app->add_option("--max_pixels,--max-pixels", options->max_pixels,
                  "Vision-language folders: the image processor's max_pixels (default: the folder's)")
      ->check(positive_count());
  return Command{app, [options] { return run_eval(*options); }};
}

const CommandRegistration kEvalRegistration{100, register_eval_command};

}  // namespace surogate::cli
