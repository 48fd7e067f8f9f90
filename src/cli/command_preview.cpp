// `surogate preview config.yaml [-n 3]`: the first N rows of the first dataset exactly as the
// model sees them: the rendered text, the token ids, and which tokens carry loss (green on a
// terminal, ⟦…⟧ around loss tokens otherwise); a preference pair (type: preference) as its chosen
// and its rejected sequence; a vision-language model's image rows with their images' sizes and each
// image's <|image_pad|> run summarised ("<|image_pad|>×48"). Reads the files directly; no cache is
// written.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <optional>

#include <fmt/format.h>

#include "cli/commands.h"
#include "config/config_loader.h"
#include "core/error.h"
#include "data/dataset_files.h"
#include "data/dataset_formatter.h"
#include "data/pipeline.h"
#include "data/row_reader.h"
#include "data/truncation.h"

namespace surogate::cli {
namespace {

struct PreviewArguments {
  std::string config_path;
  int count = 3;
};

// Token pieces joined, loss runs marked. With token weights (loss_scale hermes / react) a run of
// weight w != 1 opens with "×w " inside the marker (yellow on a terminal instead of green).
// The length of the run of `image_pad` starting at token i (0 when token i is another).
size_t image_run(const std::vector<int32_t>& ids, size_t i, std::optional<int32_t> image_pad) {
  size_t end = i;
  while (image_pad && end < ids.size() && ids[end] == *image_pad) ++end;
  return end - i;
}

std::string mark_loss(const data::TokenizedSample& sample, const data::TextCodec& codec, bool colour,
                      std::optional<int32_t> image_pad) {
  std::string out;
  float current = 0.0f;  // weight of the open run; 0 = outside loss
  auto close = [&] {
    if (current != 0.0f) out += colour ? "\x1b[0m" : "⟧";
  };
  for (size_t i = 0; i < sample.input_ids.size(); ++i) {
    const bool loss = sample.labels[i] != data::kIgnoreLabel;
    const float weight = !loss ? 0.0f : sample.weights.empty() ? 1.0f : sample.weights[i];
    if (weight != current) {
      close();
      if (weight != 0.0f) {
        out += colour ? (weight == 1.0f ? "\x1b[32m" : "\x1b[33m") : "⟦";
        if (weight != 1.0f) out += fmt::format("×{:g} ", weight);
      }
      current = weight;
    }
    if (const size_t run = image_run(sample.input_ids, i, image_pad); run > 0) {
      out += fmt::format("{}×{}", codec.decode(std::span<const int32_t>(&sample.input_ids[i], 1)), run);
      i += run - 1;  // image tokens carry no loss: the run is one piece
      continue;
    }
    out += codec.decode(std::span<const int32_t>(&sample.input_ids[i], 1));
  }
  close();
  return out;
}

// The ids with each image's <|image_pad|> run as "id×count".
std::string join_ids(const std::vector<int32_t>& ids, std::optional<int32_t> image_pad) {
  std::vector<std::string> pieces;
  for (size_t i = 0; i < ids.size(); ++i) {
    const size_t run = image_run(ids, i, image_pad);
    pieces.push_back(run > 0 ? fmt::format("{}×{}", ids[i], run) : std::to_string(ids[i]));
    i += run > 0 ? run - 1 : 0;
  }
  return fmt::format("{}", fmt::join(pieces, " "));
}

// One document's ids and its loss marks; `label` names a part of a preference pair ("chosen ").
void print_document(const data::TokenizedSample& document, const std::string& label, const data::TextCodec& codec,
                    bool colour, std::optional<int32_t> image_pad = std::nullopt) {
  if (document.images) {
    std::vector<std::string> sizes;
    for (const auto& image : document.images->resized) sizes.push_back(fmt::format("{}×{}", image.width, image.height));
    fmt::print("--- {} image(s), resized to {} (width × height) ---\n", sizes.size(), fmt::join(sizes, ", "));
  }
  fmt::print("{}ids: {}\n", label, join_ids(document.input_ids, image_pad));
  size_t loss_tokens = 0;
  for (int32_t label_id : document.labels) loss_tokens += label_id != data::kIgnoreLabel ? 1 : 0;
  fmt::print("--- {}loss on {} of {} tokens ({}) ---\n{}\n", label, loss_tokens, document.input_ids.size(),
             colour ? "green" : "inside ⟦ ⟧", mark_loss(document, codec, colour, image_pad));
}

int run_preview(const PreviewArguments& arguments, const std::vector<std::string>& extras) {
  if (arguments.count <= 0) fail_user("-n must be positive (got {})", arguments.count);
  Config config = load_config(arguments.config_path, collect_overrides(extras));
  data::DataSettings settings = data::data_settings_from_config(config);
  data::TextTools tools = data::load_text_tools(settings);
  const bool colour = isatty(fileno(stdout)) != 0;
  const DatasetConfig& dataset = settings.datasets.front();
  data::DatasetFormatter formatter(dataset, settings, tools);
  auto reader = data::open_row_reader(data::select_dataset_files(dataset));
  data::Row row;
  int shown = 0;
  while (shown < arguments.count && reader->next(row)) {
    data::FormattedRow formatted = formatter.format(row);
    fmt::print("=== sample {} ({}, type {}) ===\n", shown + 1, row.origin.describe(), formatter.resolved_type());
    if (!formatted.sample) {
      fmt::print("dropped: {}\n\n", formatted.drop_reason);
      ++shown;
      continue;
    }
    std::vector<data::TokenizedSample> documents;
    data::LengthStats stats;
    size_t tokens = formatted.sample->input_ids.size();
    if (formatted.sample->images && tokens > settings.max_length) {
      fmt::print("dropped: {} tokens with images, longer than max_length {} (a row with images is never cut)\n\n",
                 tokens, settings.max_length);
      ++shown;
      continue;
    }
    data::fit_to_length(*formatted.sample, settings.max_length, settings.truncation_strategy, documents, stats);
    fmt::print("--- text ---\n{}\n", formatted.text);
    fmt::print("--- {} tokens{} ---\n", tokens,
               tokens > settings.max_length ? fmt::format(" (longer than max_length {}: {} document(s) after truncation)",
                                                          settings.max_length, documents.size())
                                            : "");
    for (auto& document : documents) {
      if (document.kto_label >= 0) {
        // A kto row (surogate dpo, loss.type kto): its sequence as trained, cut to max_length; its KL
        // sequence pairs it with a neighbour's completion when the split is built (data/kto_rows.h).
        const size_t trained = std::min(document.input_ids.size(), settings.format.preference_max_length);
        document.input_ids.resize(trained);
        document.labels.resize(trained);
        print_document(document, document.kto_label > 0 ? "desirable " : "undesirable ", tools.codec, colour);
        continue;
      }
      if (document.first_part == 0) {
        print_document(document, "", tools.codec, colour, tools.image_pad_id);
        continue;
      }
      // A preference pair (surogate dpo): the chosen sequence, then the rejected one.
      const auto split = static_cast<long>(document.first_part);
      for (const bool chosen : {true, false}) {
        data::TokenizedSample part;
        const auto begin = chosen ? 0 : split;
        const auto end = chosen ? split : static_cast<long>(document.input_ids.size());
        part.input_ids.assign(document.input_ids.begin() + begin, document.input_ids.begin() + end);
        part.labels.assign(document.labels.begin() + begin, document.labels.begin() + end);
        print_document(part, chosen ? "chosen " : "rejected ", tools.codec, colour);
      }
    }
    fmt::print("\n");
    ++shown;
  }
  if (shown == 0) fmt::print("the dataset has no rows\n");
  return 0;
}

}  // namespace

Command register_preview_command(CLI::App& parent) {
  auto arguments = std::make_shared<PreviewArguments>();
  CLI::App* app = parent.add_subcommand("preview", "Show the first samples as the model sees them, with loss tokens marked");
  app->add_option("config", arguments->config_path, "YAML configuration file")->required();
  app->add_option("-n,--count", arguments->count, "How many samples to show")->default_val(3);
  app->allow_extras();
  return Command{app, [arguments, app] { return run_preview(*arguments, app->remaining()); }};
}

const CommandRegistration kPreviewRegistration{60, register_preview_command};

}  // namespace surogate::cli
