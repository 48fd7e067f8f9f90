// A vision-language folder's NextTokenModel; see vl_generation_model.h.
#include "train/vl_generation_model.h"

#include <algorithm>
#include <numeric>
#include <variant>

#include <fmt/format.h>

#include "compiler/execution_plan.h"
#include "core/bfloat16.h"
#include "core/error.h"
#include "data/packing.h"
#include "generate/feed_checks.h"
#include "graph/builder.h"
#include "io/safetensors.h"
#include "models/adapter_io.h"
#include "models/lora.h"
#include "models/session_loading.h"
#include "ops/defs/register_ops.h"
#include "runtime/cpu_backend.h"
#include "train/batch_inputs.h"
#include "train/vision_batch_inputs.h"
#include "train/vision_outputs.h"
#include "train/vision_stage.h"
#include "vision/mrope_positions.h"
#if SUROGATE_WITH_CUDA
#include "runtime/cuda_backend.h"
#endif

namespace surogate::train {
namespace {

constexpr const char* kLastRow = "generation_last_row";  // I32 [1]: the history's last token
constexpr const char* kGenerationLogits = "logits";  // [1, vocab]

// The text model's parameters as PEFT names them for this folder (model.language_model.*).
std::vector<models::ParameterSpec> peft_text_specs(const io::ModelConfig& text, const std::filesystem::path& model_dir) {
  std::vector<models::ParameterSpec> specs = models::vision_model_text_parameters(text, model_dir);
  for (models::ParameterSpec& spec : specs) spec.hf_name = vision_peft_module_path(spec.hf_name);
  return specs;
}

// An adapter that reaches the vision tower (a freeze_vision: false run's) is not applied here: one
// error naming its first tower tensor and the way out, before load_peft_adapter's generic refusal.
void refuse_tower_adapter(const std::filesystem::path& adapter_dir) {
  const std::filesystem::path weights = adapter_dir / "adapter_model.safetensors";
  if (!std::filesystem::exists(weights)) return;  // load_peft_adapter names what is missing
  const io::SafetensorsFile file = io::SafetensorsFile::open(weights);
  for (const io::SafetensorsTensor& tensor : file.tensors()) {
    if (tensor.name.find(".visual.") != std::string::npos) {
      fail_user("--adapter {}: tensor '{}' adapts the vision tower; `surogate generate` and `surogate eval` apply "
                "adapters of the text model only. Merge it (`surogate merge`) and use the merged folder", adapter_dir.string(),
                tensor.name);
    }
  }
}

// The forward graph with the logits of one row's token (kLastRow) beside the loss: the loss node's
// hidden states [T, H] gathered at that row, times its head.
graph::Graph with_last_row_logits(graph::Graph graph, const graph::OpRegistry& registry, int64_t batch,
                                  int64_t sequence, int64_t hidden_size) {
  const graph::Node& loss = graph.node(graph.tensor(graph.outputs.at(0)).producer);
  SUROGATE_CHECK(loss.op == "lm_head_loss", "the vision-language graph's loss is lm_head_loss, not '{}'", loss.op);
  const graph::TensorId hidden = loss.inputs.at(0), head = loss.inputs.at(1);
  graph::GraphBuilder builder(registry, std::move(graph));
  const graph::TensorId last = builder.input(kLastRow, DType::I32, {batch});
  const graph::TensorId rows =
      builder.op("reshape", {hidden}, {{"shape", {batch * sequence, hidden_size}}}, "generation.hidden_rows");
  const graph::TensorId row = builder.op("embedding", {last, rows}, nlohmann::json::object(), "generation.last_hidden");
  builder.mark_output(builder.op("linear", {row, head}, nlohmann::json::object(), kGenerationLogits));
  return builder.finish();
}

std::vector<uint16_t> rounded_to_bf16(std::span<const float> values) {
  std::vector<uint16_t> rounded(values.size());
  std::transform(values.begin(), values.end(), rounded.begin(), float_to_bf16);
  return rounded;
}

}  // namespace

struct VisionGenerationModel::State {
  struct GenerationSlot {
    std::vector<int32_t> history;
    std::vector<vision::RgbImage> images;
    std::vector<std::array<int64_t, 3>> grid_thw;  // the images'
    int64_t image_tokens = 0;                      // their <|image_pad|> count (merged patches)
  };

  std::filesystem::path model_dir;
  VisionLanguageModel model;
  vision::ImageProcessor processor;
  VisionGenerationOptions options;
  graph::OpRegistry registry = ops::make_model_registry();
  compiler::ExecutionPlan plan;
  std::unique_ptr<runtime::Backend> backend;
  std::vector<GenerationSlot> slots;
  std::vector<float> logits;  // the last feed's, [feeds × vocab]

  State(const std::filesystem::path& dir, VisionLanguageModel folder, const vision::ImageProcessorConfig& config,
        const VisionGenerationOptions& given)
      : model_dir(dir), model(std::move(folder)), processor(config), options(given),
        slots(static_cast<size_t>(given.slots)) {}

  const io::ModelConfig& text() const { return vision_text_config(model); }
  int64_t merge_unit() const {
    return std::visit([](const auto& config) { return config.vision.merge_unit(); }, model);
  }
  int64_t merge_size() const {
    return std::visit([](const auto& config) { return config.vision.spatial_merge_size; }, model);
  }
  int32_t image_token_id() const {
    return std::visit([](const auto& config) { return config.image_token_id; }, model);
  }
  // The plan's patch count: the tower runs on at least one merged patch (padding when no image).
  int64_t plan_patches() const { return std::max(options.plan_patches, merge_unit()); }

  void build() {
    models::DecoderGraphOptions graph_options;
    graph_options.batch = options.slots;
    graph_options.sequence = options.max_context;
    if (options.cuda) graph_options.dtype = DType::BF16;
    graph::Graph graph;
    if (const auto* qwen3 = std::get_if<models::Qwen3VLModelConfig>(&model)) {
      graph = models::build_qwen3_vl_model_graph(*qwen3, registry, graph_options, plan_patches(), false).graph;
    } else {
      graph = models::build_vision_model_graph(std::get<models::VisionModelConfig>(model), registry, graph_options,
                                               plan_patches(), false).graph;
    }
    models::SessionGraph adapter;
    if (!options.adapter.empty()) {
      refuse_tower_adapter(options.adapter);
      adapter.adapter = models::load_peft_adapter(options.adapter, text(), peft_text_specs(text(), model_dir));
      const models::LoraOptions lora = models::peft_lora_options(*adapter.adapter, options.adapter);
      adapter.adapters = models::lora_adapters(text(), lora);
      graph = models::apply_lora(graph, registry, adapter.adapters, lora, false);
    }
    graph = with_last_row_logits(std::move(graph), registry, options.slots, options.max_context, text().hidden_size);
    plan = compiler::compile_forward(std::move(graph), registry);
#if SUROGATE_WITH_CUDA
    if (options.cuda) backend = std::make_unique<runtime::CudaBackend>();
#endif
    if (!backend) backend = std::make_unique<runtime::CpuBackend>();
    backend->load(plan, registry);
    load_weights();
    models::load_session_adapter(adapter, plan, *backend);
  }

  void load_weights() {
    auto* cpu = dynamic_cast<runtime::CpuBackend*>(backend.get());
    const auto write = [&](const std::string& name, const io::SafetensorsTensor& tensor) {
      const graph::TensorId id = plan.tensor(name);
      if (cpu != nullptr) {
        cpu->write_converted(id, tensor.dtype, tensor.bytes);
      } else {
        models::write_float32(*backend, plan, id, io::read_tensor_as_float32(tensor));
      }
    };
    models::load_vision_model_text_weights(model_dir, text(), [&](const models::ParameterSpec& spec,
                                                                  const io::SafetensorsTensor& tensor) {
      write(spec.name, tensor);
    });
    models::load_visual_weights(model_dir, vision_tower_parameter_list(model),
                                [&](const models::VisionTowerParameter& parameter, const io::SafetensorsTensor& tensor) {
                                  write(parameter.name, tensor);
                                });
  }

  // One row of a forward: a token sequence, its unshifted labels (empty: nothing scored), its
  // images and their grids.
  struct RowView {
    std::span<const int32_t> ids;
    std::span<const int32_t> labels;
    std::span<const vision::RgbImage> images;
    std::span<const std::array<int64_t, 3>> grid_thw;
    std::string name;  // for errors
  };

  // `views` (at most the plan's rows) as a batch of max_context-token rows (the rest of each row,
  // and rows past them, padding), their images in row order, and each sequence's M-RoPE positions
  // (transformers' get_rope_index, [3, B, T] axis-major).
  data::PackedBatch batch_of(std::span<const RowView> views) const {
    const int64_t rows = options.slots, sequence = options.max_context, cells = rows * sequence;
    data::PackedBatch batch;
    batch.batch_size = rows;
    batch.sequence_length = sequence;
    batch.input_ids.assign(static_cast<size_t>(cells), 0);
    batch.labels.assign(static_cast<size_t>(cells), -100);
    batch.position_ids.assign(static_cast<size_t>(cells), 0);
    batch.document_ids.assign(static_cast<size_t>(cells), -1);
    batch.mrope_position_ids.assign(static_cast<size_t>(3 * cells), 0);
    batch.cu_seqlens = {0};
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t length = row < static_cast<int64_t>(views.size()) ? static_cast<int64_t>(views[row].ids.size()) : 0;
      if (length > 0) {
        const RowView& view = views[static_cast<size_t>(row)];
        const vision::MropePositions positions = vision::mrope_positions(
            view.ids, image_token_id(), view.grid_thw, static_cast<int>(merge_size()),
            {}, view.name);
        for (int64_t t = 0; t < length; ++t) {
          const size_t cell = static_cast<size_t>(row * sequence + t);
          batch.input_ids[cell] = view.ids[static_cast<size_t>(t)];
          if (!view.labels.empty()) {
            batch.labels[cell] = view.labels[static_cast<size_t>(t)];
            if (batch.labels[cell] != -100) ++batch.num_loss_tokens;
          }
          batch.position_ids[cell] = static_cast<int32_t>(t);
          batch.document_ids[cell] = static_cast<int32_t>(row);
          for (int64_t axis = 0; axis < 3; ++axis) {
            batch.mrope_position_ids[static_cast<size_t>(axis * cells) + cell] =
                positions.ids[static_cast<size_t>(axis * length + t)];
          }
        }
        batch.images.insert(batch.images.end(), view.images.begin(), view.images.end());
        batch.cu_seqlens.push_back(static_cast<int32_t>(row * sequence + length));
        batch.num_tokens += length;
      }
      if (length < sequence) batch.cu_seqlens.push_back(static_cast<int32_t>((row + 1) * sequence));
      batch.max_seqlen = static_cast<int32_t>(std::max({static_cast<int64_t>(batch.max_seqlen), length, sequence - length}));
    }
    return batch;
  }

  std::vector<RowView> slot_views(std::span<const int64_t> fed) const {
    std::vector<RowView> views;
    for (int64_t index : fed) {
      const GenerationSlot& slot = slots[static_cast<size_t>(index)];
      views.push_back({slot.history, {}, slot.images, slot.grid_thw, fmt::format("slot {}", index)});
    }
    return views;
  }

  // One forward over the histories of `fed`: the logits after each one's last token, [B × vocab]
  // (rows past fed.size() are padding).
  std::vector<float> run(std::span<const int64_t> fed) {
    const std::vector<RowView> views = slot_views(fed);
    std::vector<int32_t> last(static_cast<size_t>(options.slots), 0);
    for (size_t row = 0; row < views.size(); ++row) {
      last[row] = static_cast<int32_t>(static_cast<int64_t>(row) * options.max_context +
                                       static_cast<int64_t>(views[row].ids.size()) - 1);
    }
    execute(batch_of(views), last, fmt::format("{}: slots {}", model_dir.string(), fmt::join(fed, ", ")));
    return models::read_float32(*backend, plan, plan.tensor(kGenerationLogits));
  }

  // Executes the plan on `batch` (`last`: each row's logits row); returns its scored tokens.
  int64_t execute(const data::PackedBatch& batch, std::span<const int32_t> last, const std::string& where) {
    BatchInputs text_inputs(plan);
    std::vector<runtime::InputBinding> text_bindings = text_inputs.bind(batch, 1.0f);
    const bool bf16 = options.cuda;
    std::vector<uint16_t> pixels_bf16, weights_bf16;
    VisionBatchTensors tensors;
    std::vector<runtime::InputBinding> bindings;
    if (const auto* qwen3 = std::get_if<models::Qwen3VLModelConfig>(&model)) {
      tensors = vision_batch_tensors(batch, processor, *qwen3, where, plan_patches());
      std::span<const std::byte> pixels = std::as_bytes(std::span<const float>(tensors.pixel_values));
      std::span<const std::byte> weights = std::as_bytes(std::span<const float>(tensors.qwen3_tower.interpolation_weights));
      if (bf16) {  // the CUDA plan reads them in bf16
        pixels_bf16 = rounded_to_bf16(tensors.pixel_values);
        weights_bf16 = rounded_to_bf16(tensors.qwen3_tower.interpolation_weights);
        pixels = std::as_bytes(std::span<const uint16_t>(pixels_bf16));
        weights = std::as_bytes(std::span<const uint16_t>(weights_bf16));
      }
      bindings = qwen3_vl_batch_bindings(plan, std::move(text_bindings), tensors, batch.mrope_position_ids, pixels,
                                         weights);
    } else {
      tensors = vision_batch_tensors(batch, processor, std::get<models::VisionModelConfig>(model), where, plan_patches());
      bindings = vision_batch_bindings(plan, std::move(text_bindings), tensors, batch.mrope_position_ids);
      if (bf16) {
        pixels_bf16 = rounded_to_bf16(tensors.pixel_values);
        const graph::TensorId pixel_values = plan.tensor(models::kVisionPixelValues);
        for (runtime::InputBinding& binding : bindings) {
          if (binding.tensor == pixel_values) binding.data = std::as_bytes(std::span<const uint16_t>(pixels_bf16));
        }
      }
    }
    bindings.push_back({plan.tensor(kLastRow), std::as_bytes(last)});
    backend->execute(bindings);
    return std::count_if(text_inputs.targets().begin(), text_inputs.targets().end(),
                         [](int32_t target) { return target >= 0; });
  }
};

VisionGenerationModel::VisionGenerationModel(const std::filesystem::path& model_dir, const std::string& architecture,
                                             const vision::ImageProcessorConfig& processor,
                                             const VisionGenerationOptions& options) {
  if (options.slots < 1 || options.max_context < 1) {
    fail_user("slots and max_context must be positive (got {} and {})", options.slots, options.max_context);
  }
#if !SUROGATE_WITH_CUDA
  if (options.cuda) fail_user("--device cuda: this surogate was built without the CUDA backend; use --device cpu");
#endif
  state_ = std::make_unique<State>(model_dir, read_vision_language_model(model_dir.string(), architecture), processor,
                                   options);
  state_->build();
}

VisionGenerationModel::~VisionGenerationModel() = default;

void VisionGenerationModel::set_images(int64_t slot, std::vector<vision::RgbImage> images) {
  generate::check_slot(slot, slots());
  const vision::ProcessedImages processed = state_->processor.patches(images);
  const int64_t patches = static_cast<int64_t>(processed.pixel_values.size()) / processed.patch_dim;
  if (patches > state_->plan_patches()) {
    fail_user("the images of slot {} have {} patches, more than the {} the model was opened for", slot, patches,
              state_->plan_patches());
  }
  state_->slots[static_cast<size_t>(slot)].images = std::move(images);
  state_->slots[static_cast<size_t>(slot)].grid_thw = processed.grid_thw;
  state_->slots[static_cast<size_t>(slot)].image_tokens =
      std::accumulate(processed.tokens_per_image.begin(), processed.tokens_per_image.end(), int64_t{0});
}

SequenceLoss VisionGenerationModel::score(std::span<const ScoredSequence> sequences) {
  if (static_cast<int64_t>(sequences.size()) > slots()) {
    fail_user("{} sequences scored at once, more than the {} rows the model was opened for", sequences.size(), slots());
  }
  std::vector<std::vector<std::array<int64_t, 3>>> grids;
  int64_t patches = 0;
  for (const ScoredSequence& sequence : sequences) {
    if (sequence.labels.size() != sequence.input_ids.size()) {
      fail_user("{}: {} labels for {} tokens", sequence.name, sequence.labels.size(), sequence.input_ids.size());
    }
    if (static_cast<int64_t>(sequence.input_ids.size()) > max_context()) {
      fail_user("{}: {} tokens, more than the {} a row holds", sequence.name, sequence.input_ids.size(), max_context());
    }
    const vision::ProcessedImages processed =
        state_->processor.patches({sequence.images.begin(), sequence.images.end()});
    if (processed.patch_dim > 0) patches += static_cast<int64_t>(processed.pixel_values.size()) / processed.patch_dim;
    grids.push_back(processed.grid_thw);
  }
  if (patches > state_->plan_patches()) {
    fail_user("{}: the images hold {} patches, more than the {} the model was opened for", sequences.front().name,
              patches, state_->plan_patches());
  }
  std::vector<State::RowView> views;
  for (size_t index = 0; index < sequences.size(); ++index) {
    const ScoredSequence& sequence = sequences[index];
    views.push_back({sequence.input_ids, sequence.labels, sequence.images, grids[index], sequence.name});
  }
  const std::vector<int32_t> last(static_cast<size_t>(slots()), 0);
  SequenceLoss result;
  result.tokens = state_->execute(state_->batch_of(views), last,
                                  sequences.empty() ? state_->model_dir.string() : sequences.front().name);
  result.loss_sum = models::read_float32(*state_->backend, state_->plan, state_->plan.tensor("loss")).at(0);
  return result;
}

std::span<float> VisionGenerationModel::feed_in_place(std::span<const generate::SlotFeed> feeds) {
  generate::check_feeds(feeds, *this);
  std::vector<int64_t> fed;
  for (const generate::SlotFeed& feed : feeds) {
    State::GenerationSlot& slot = state_->slots[static_cast<size_t>(feed.slot)];
    const int32_t pad = state_->image_token_id();
    const auto pads = std::count(slot.history.begin(), slot.history.end(), pad) +
                      std::count(feed.tokens.begin(), feed.tokens.end(), pad);
    if (pads > slot.image_tokens) {
      fail_user("slot {}: {} image tokens <|image_pad|> (id {}) but its images give {}; an image token after the "
                "prompt (a completion that writes one) has no image to stand for", feed.slot, pads, pad,
                slot.image_tokens);
    }
    fed.push_back(feed.slot);
  }
  for (const generate::SlotFeed& feed : feeds) {
    std::vector<int32_t>& history = state_->slots[static_cast<size_t>(feed.slot)].history;
    history.insert(history.end(), feed.tokens.begin(), feed.tokens.end());
  }
  std::vector<float> logits = state_->run(fed);
  logits.resize(feeds.size() * static_cast<size_t>(vocab_size()));  // the fed rows'
  state_->logits = std::move(logits);
  return state_->logits;
}

void VisionGenerationModel::clear(int64_t slot) {
  generate::check_slot(slot, slots());
  state_->slots[static_cast<size_t>(slot)].history.clear();
}

int64_t VisionGenerationModel::held(int64_t slot) const {
  generate::check_slot(slot, slots());
  return static_cast<int64_t>(state_->slots[static_cast<size_t>(slot)].history.size());
}

int64_t VisionGenerationModel::slots() const { return state_->options.slots; }
int64_t VisionGenerationModel::max_context() const { return state_->options.max_context; }
int64_t VisionGenerationModel::vocab_size() const { return state_->text().vocab_size; }

}  // namespace surogate::train
