// model_definition (models/model_definition.h): a model's graph from a JSON IR file. The rules
// that derive each graph a run needs from the file's F32 graph (dtype, lmhead chunks, token
// weights, the evaluation's accuracy output) must give exactly what the built-in builder gives
// for the same options, on every fixture architecture; files that do not fit the run are one
// clear error naming the file and what to change.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "core/error.h"
#include "graph/json_ir.h"
#include "models/decoder_graph.h"
#include "models/model_definition.h"
#include "ops/defs/register_ops.h"
#include "fixture_util.h"
#include "user_error_of.h"

namespace surogate::models {
namespace {

struct Variant {
  const char* label;
  DecoderGraphOptions options;
};

class ModelDefinitionRules : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelDefinitionRules, GiveTheBuiltInGraphForEveryVariant) {
  testing::Fixture fixture = testing::open_fixture(GetParam());
  const graph::OpRegistry registry = ops::make_model_registry();
  const int64_t batch = fixture.batch, sequence = fixture.sequence;
  const graph::Graph ir = build_decoder_graph(fixture.config, registry, {batch, sequence, 1, false}).graph;
  const ModelDefinition definition{"unused.json", "model_definition 'ir.json'"};
  // MoE configs with output_router_logits add the router loss to training graphs (models/ir_router_loss.h).
  auto router_loss = [&](int64_t micro_batches, DType dtype, bool token_weights) {
    DecoderGraphOptions options{batch, sequence, 1, false, dtype, token_weights};
    options.router_aux_loss_micro_batches = micro_batches;
    return options;
  };
  Variant variants[] = {
      {"as written", {batch, sequence, 1, false}},
      {"bf16 (CUDA backend)", {batch, sequence, 1, false, DType::BF16}},
      {"lmhead_chunks 4", {batch, sequence, 4, false}},
      {"evaluation (accuracy output)", {batch, sequence, 1, true}},
      {"bf16 evaluation, 2 chunks", {batch, sequence, 2, true, DType::BF16}},
      {"token weights", {batch, sequence, 1, false, DType::F32, true}},
      {"bf16 token weights", {batch, sequence, 1, false, DType::BF16, true}},
      {"training with the router loss, 3 micro-batches", router_loss(3, DType::F32, false)},
      {"bf16 router loss with token weights", router_loss(2, DType::BF16, true)},
  };
  for (const Variant& variant : variants) {
    const DecoderGraph built = build_decoder_graph(fixture.config, registry, variant.options);
    const DecoderGraph derived = specialize_ir_graph(ir, fixture.config, registry, variant.options, definition);
    EXPECT_EQ(graph::graph_to_json(derived.graph), graph::graph_to_json(built.graph)) << variant.label;
    EXPECT_EQ(derived.graph.tensor(derived.loss).name, built.graph.tensor(built.loss).name) << variant.label;
    EXPECT_EQ(derived.correct == graph::kNoTensor, built.correct == graph::kNoTensor) << variant.label;
    ASSERT_EQ(derived.router_aux_loss == graph::kNoTensor, built.router_aux_loss == graph::kNoTensor) << variant.label;
    if (built.router_aux_loss != graph::kNoTensor) {
      EXPECT_EQ(derived.graph.tensor(derived.router_aux_loss).name, built.graph.tensor(built.router_aux_loss).name);
    }
  }
  // The evaluation's accuracy is chunked as its loss: on the GPU an unchunked one held the whole
  // [rows, V] logits in the evaluator's scratch, past what the memory prediction counts.
  const DecoderGraph evaluation = build_decoder_graph(fixture.config, registry, {batch, sequence, 2, true, DType::BF16});
  int accuracy_nodes = 0;
  for (const graph::Node& node : evaluation.graph.nodes) {
    if (node.op != "lm_head_accuracy") continue;
    ++accuracy_nodes;
    EXPECT_EQ(node.attrs.value("chunks", int64_t{1}), 2);
  }
  EXPECT_EQ(accuracy_nodes, 1);
  if (fixture.config.moe && fixture.config.moe->output_router_logits) {  // the rule did add it
    EXPECT_NE(build_decoder_graph(fixture.config, registry, router_loss(2, DType::F32, false)).router_aux_loss,
              graph::kNoTensor);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ModelDefinitionRules,
                         ::testing::Values("llama_gqa_llama3", "llama_bias_untied", "mistral_sliding",
                                           "qwen2_bias_tied", "qwen3_qknorm", "llama_rope_parameters_yarn",
                                           "qwen3_moe_topk", "qwen2_moe_shared", "mixtral_topk"));

TEST(ModelDefinition, FileIsReadFromDiskAndErrorsNameItAndWhatToChange) {
  testing::Fixture fixture = testing::open_fixture("llama_gqa_llama3");
  const graph::OpRegistry registry = ops::make_model_registry();
  const auto folder = std::filesystem::temp_directory_path() / "surogate_model_definition_test";
  std::filesystem::create_directories(folder);
  const auto file = folder / "model.json";
  graph::save_json_ir(build_decoder_graph(fixture.config, registry, {2, 8, 1, false}).graph, file);
  const ModelDefinition definition{file, "config.yaml:3: model_definition 'model.json'"};

  // The file's [B, T] is the run's: the message names the options that set it.
  EXPECT_NO_THROW(build_model_graph(fixture.config, registry, {2, 8, 1, true}, definition));
  const std::string shape = error_of([&] { build_model_graph(fixture.config, registry, {4, 8, 1, false}, definition); });
  EXPECT_NE(shape.find("config.yaml:3: model_definition"), std::string::npos) << shape;
  EXPECT_NE(shape.find("per_device_train_batch_size / sequence_len"), std::string::npos) << shape;

  // Another model's config.json: the parameters differ.
  testing::Fixture other = testing::open_fixture("qwen3_qknorm");
  const std::string parameters = error_of([&] { build_model_graph(other.config, registry, {2, 8, 1, false}, definition); });
  EXPECT_NE(parameters.find("parameter"), std::string::npos) << parameters;

  // A loss that is not lm_head_loss cannot get the evaluation's accuracy output.
  {
    graph::Graph graph = build_decoder_graph(fixture.config, registry, {2, 8, 1, false}).graph;
    graph::GraphBuilder extend(registry, std::move(graph));
    const graph::TensorId doubled = extend.op("scale", {extend.graph().outputs.at(0)}, {{"factor", 2.0}}, "doubled");
    graph = extend.finish();
    graph.outputs.insert(graph.outputs.begin(), doubled);
    graph.outputs.pop_back();
    const std::string accuracy = error_of([&] {
      specialize_ir_graph(graph, fixture.config, registry, {2, 8, 1, true}, definition);
    });
    EXPECT_NE(accuracy.find("lm_head_loss"), std::string::npos) << accuracy;
    EXPECT_NE(accuracy.find("evaluation"), std::string::npos) << accuracy;
  }

  DecoderGraphOptions fused{2, 8, 1, false};
  fused.fused_rope = true;
  EXPECT_NE(error_of([&] { build_model_graph(fixture.config, registry, fused, definition); }).find("use_fused_rope"),
            std::string::npos);

  const ModelDefinition missing{folder / "absent.json", "model_definition 'absent.json'"};
  EXPECT_NE(error_of([&] { build_model_graph(fixture.config, registry, {2, 8, 1, false}, missing); }).find("not a file"),
            std::string::npos);
  // A Python file is compiled for the model folder it is given (models/python_definition.h): without
  // one it is refused; a file that defines no model is the DSL's error, named by the option.
  std::ofstream(folder / "model.py") << "# a DSL file that defines no model\n";
  ModelDefinition python{folder / "model.py", "model_definition 'model.py'"};
  EXPECT_NE(error_of([&] { build_model_graph(fixture.config, registry, {2, 8, 1, false}, python); }).find("model folder"),
            std::string::npos);
  python.model_dir = folder;
  const std::string compiled = error_of([&] { build_model_graph(fixture.config, registry, {2, 8, 1, false}, python); });
  EXPECT_EQ(compiled.rfind("model_definition 'model.py': ", 0), 0u) << compiled;
  std::filesystem::remove_all(folder);
}

// The engine adds the router loss to an MoE definition's training graphs; a file that already has
// one, or a training loss that is not lm_head_loss, is an error naming what to change.
TEST(ModelDefinition, RouterLossIsTheEnginesToAdd) {
  testing::Fixture fixture = testing::open_fixture("mixtral_topk");
  const graph::OpRegistry registry = ops::make_model_registry();
  const ModelDefinition definition{"unused.json", "model_definition 'moe.json'"};
  DecoderGraphOptions training{2, 8, 1, false};
  training.router_aux_loss_micro_batches = 1;
  const graph::Graph with_loss = build_decoder_graph(fixture.config, registry, training).graph;
  const std::string declared = error_of([&] { specialize_ir_graph(with_loss, fixture.config, registry, training, definition); });
  EXPECT_NE(declared.find("model_definition 'moe.json'"), std::string::npos) << declared;
  EXPECT_NE(declared.find("'router_aux_loss'"), std::string::npos) << declared;
  EXPECT_NE(declared.find("output_router_logits"), std::string::npos) << declared;

  graph::GraphBuilder extend(registry, build_decoder_graph(fixture.config, registry, {2, 8, 1, false}).graph);
  const graph::TensorId doubled = extend.op("scale", {extend.graph().outputs.at(0)}, {{"factor", 2.0}}, "doubled");
  graph::Graph scaled = extend.finish();
  scaled.outputs = {doubled};
  const std::string loss = error_of([&] { specialize_ir_graph(scaled, fixture.config, registry, training, definition); });
  EXPECT_NE(loss.find("lm_head_loss"), std::string::npos) << loss;
  EXPECT_NE(loss.find("router loss"), std::string::npos) << loss;
  // Evaluation graphs take no router loss: the same file is fine there.
  EXPECT_NO_THROW(specialize_ir_graph(scaled, fixture.config, registry, {2, 8, 1, false}, definition));
}

}  // namespace
}  // namespace surogate::models
