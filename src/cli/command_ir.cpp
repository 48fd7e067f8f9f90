// `surogate ir MODEL_DIR [--batch B] [--seq T] [--lmhead-chunks N] [--output FILE]`: builds the
// forward graph of an HF model folder (config.json only; no weights are read) and prints it as
// JSON IR, so a model can be inspected, edited and fed back with `surogate eval --ir FILE`.
// `surogate ir --dsl-queries` instead answers the Python DSL's questions (ops, shape rules, model
// facts) as JSON lines on stdin / stdout (models/dsl_queries.h): the DSL without the extension.
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "graph/json_ir.h"
#include "io/model_config.h"
#include "core/error.h"
#include "models/decoder_graph.h"
#include "models/dsl_queries.h"
#include "ops/defs/register_ops.h"

namespace surogate::cli {
namespace {

struct IrOptions {
  std::string model_dir;
  int64_t batch = 1;
  int64_t sequence = 128;
  int64_t lmhead_chunks = 1;
  std::string output;
  bool dsl_queries = false;
};

int run_ir(const IrOptions& options) {
  if (options.dsl_queries) {
    models::serve_dsl_queries(std::cin, std::cout);
    return 0;
  }
  if (options.model_dir.empty()) fail_user("surogate ir: give the model folder (MODEL_DIR)");
  io::ModelConfig config = io::load_model_config(options.model_dir);
  const graph::OpRegistry registry = ops::make_model_registry();
  graph::Graph forward = models::build_decoder_graph(config, registry,
                                                    {.batch = options.batch,
                                                     .sequence = options.sequence,
                                                     .lmhead_chunks = options.lmhead_chunks})
                             .graph;
  if (options.output.empty()) {
    std::cout << graph::graph_to_json(forward).dump(1) << "\n";
  } else {
    graph::save_json_ir(forward, options.output);
  }
  return 0;
}

}  // namespace

Command register_ir_command(CLI::App& parent) {
  auto options = std::make_shared<IrOptions>();
  CLI::App* app = parent.add_subcommand("ir", "Print a model's forward graph as JSON IR");
  app->add_option("model_dir", options->model_dir, "HF model folder (its config.json is read)");
  app->add_option("--batch", options->batch, "Batch size B of the graph's inputs")->check(positive_count());
  app->add_option("--seq", options->sequence, "Sequence length T of the graph's inputs")->check(positive_count());
  app->add_option("--lmhead-chunks", options->lmhead_chunks, "Row chunks of the fused lm head + loss")
      ->check(positive_count());
  app->add_option("--output,-o", options->output, "Write the JSON IR to this file instead of stdout");
  app->add_flag("--dsl-queries", options->dsl_queries,
                "Answer the Python DSL's questions as JSON lines on stdin / stdout (surogate.dsl without the "
                "extension module; docs/python.md)");
  return Command{app, [options] { return run_ir(*options); }};
}

const CommandRegistration kIrRegistration{110, register_ir_command};

}  // namespace surogate::cli
