// The KV-cache NextTokenModel; kv_cache_model.h says how it is laid out.
#include "generate/kv_cache_model.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "compiler/execution_plan.h"
#include "core/error.h"
#include "generate/decode_graph.h"
#include "generate/decode_run_ahead.h"
#include "generate/device_sampling.h"
#include "generate/feed_checks.h"
#include "generate/step_timing.h"
#include "models/defined_weights.h"
#include "models/model_eval.h"
#include "models/session_loading.h"
#include "ops/defs/register_ops.h"
#include "runtime/cpu_backend.h"
#include "runtime/shared_parameters.h"
#if SUROGATE_WITH_CUDA
#include "cuda/host_buffer.h"
#include "runtime/cuda_backend.h"
#endif

namespace surogate::generate {
namespace {

// One plan of the decode graph, [rows, sequence], loaded on its backend.
struct DecodePlan {
  int64_t rows = 0, sequence = 0;
  compiler::ExecutionPlan plan;
  std::unique_ptr<runtime::Backend> backend;
  graph::TensorId logits = graph::kNoTensor;
  graph::TensorId tokens = graph::kNoTensor;  // greedy_tokens(logits), I32 [rows]
};

// A slot's share of one round: `count` of its feed's tokens from `first` on.
struct RoundRow {
  size_t feed = 0;
  int64_t first = 0, count = 0;
  bool completes = false;  // the round feeds the feed's last token (set after the round ran)
};

// The I32 inputs of one execute, one vector per graph input (decode_graph.h names them).
struct RoundInputs {
  std::vector<int32_t> input_ids, position_ids, document_ids, slot_ids, cache_lengths, new_lengths, last_rows,
      last_row_positions;

  const std::vector<int32_t>& by_name(const std::string& name) const {
    if (name == models::kInputIds) return input_ids;
    if (name == models::kPositionIds) return position_ids;
    if (name == models::kDocumentIds) return document_ids;
    if (name == kSlotIds) return slot_ids;
    if (name == kCacheLengths) return cache_lengths;
    if (name == kNewLengths) return new_lengths;
    if (name == kLastRows) return last_rows;
    SUROGATE_CHECK(name == kLastRowPositions, "the decode graph has an unknown input '{}'", name);
    return last_row_positions;
  }
};

std::unique_ptr<runtime::Backend> make_backend(bool cuda) {
#if SUROGATE_WITH_CUDA
  if (cuda) return std::make_unique<runtime::CudaBackend>();
#endif
  if (cuda) fail_user("device 'cuda': this surogate was built without the CUDA backend; use the CPU");
  return std::make_unique<runtime::CpuBackend>();
}

// Before `shared.load`: its parameters (those `shareable` accepts, when given) are read from
// `owner`'s memory.
void share_parameters(runtime::Backend& shared, const runtime::Backend& owner, bool cuda,
                      runtime::ShareableParameter shareable = {}) {
#if SUROGATE_WITH_CUDA
  if (cuda) {
    static_cast<runtime::CudaBackend&>(shared).share_parameters_with(static_cast<const runtime::CudaBackend&>(owner),
                                                                     std::move(shareable));
    return;
  }
#endif
  (void)cuda;
  static_cast<runtime::CpuBackend&>(shared).share_parameters_with(static_cast<const runtime::CpuBackend&>(owner),
                                                                  std::move(shareable));
}

// What a model with `session`'s adapter reads of a base model's weights: all but the caches and
// its adapter's matrices.
runtime::ShareableParameter base_weights(const models::SessionGraph& session) {
  auto adapter = std::make_shared<std::set<std::string>>();
  for (const models::LoraAdapter& lora : session.adapters) adapter->insert({lora.a.name, lora.b.name});
  return [adapter](const std::string& name) { return !is_kv_cache(name) && !adapter->contains(name); };
}

// Checks that a model reading `base`'s weights holds nothing of its own but its caches and its
// adapter's matrices: anything else would be left unloaded.
void check_only_adapter_own(const compiler::ExecutionPlan& plan, const compiler::ExecutionPlan& base,
                            const runtime::ShareableParameter& shareable) {
  for (const auto& [id, offset] : runtime::share_parameters(plan, base, shareable).own) {
    const std::string& name = plan.graph.tensor(id).name;
    SUROGATE_CHECK(!shareable(name), "the adapter's model holds '{}' apart from the base model it shares", name);
  }
}

class KvCacheModel final : public NextTokenModel {
public:
  // `base` (a model of the same folder, device and definition) present: its decode plan's
  // weights are read in place, and only the adapter's matrices are loaded.
  // `live` present: every weight is read from its backend in place (open_kv_cache_on_weights).
  KvCacheModel(const std::filesystem::path& model_dir, const ModelOptions& options, const PrefillShape& prefill,
               std::shared_ptr<const DecodePlan> base = {}, const LoadedWeights* live = nullptr)
      : cuda_(options.cuda), base_(std::move(base)), live_(live != nullptr ? WeightForms{live->lora, live->qlora, live->fp8} : WeightForms{}), held_(static_cast<size_t>(std::max<int64_t>(options.slots, 0)), 0) {
    if (options.slots < 1 || options.max_context < 1) {
      fail_user("slots and max_context must be positive (got {} and {})", options.slots, options.max_context);
    }
    if (prefill.rows < 0 || prefill.chunk < 0) {
      fail_user("the prefill shape must not be negative (got {} rows of {} tokens)", prefill.rows, prefill.chunk);
    }
    const KvCachePlanShapes shapes = kv_cache_plan_shapes(options, prefill);
    const DecodeShape& cache = shapes.cache;
    config_ = models::load_model_config(model_dir, options.definition);

    const models::SessionGraph session = compile(*decode_, options, cache, options.slots, 1);
    for (size_t id = 0; id < decode_->plan.graph.tensors.size(); ++id) {
      if (is_kv_cache(decode_->plan.graph.tensors[id].name)) cache_tensors_.push_back(static_cast<graph::TensorId>(id));
    }
    if (live != nullptr) {
      read_live_weights(*live);
    } else if (base_) {
      const runtime::ShareableParameter shareable = base_weights(session);
      check_only_adapter_own(decode_->plan, base_->plan, shareable);
      share_parameters(*decode_->backend, *base_->backend, cuda_, shareable);
      decode_->backend->load(decode_->plan, registry_);
      models::load_session_adapter(session, decode_->plan, *decode_->backend);
    } else {
      decode_->backend->load(decode_->plan, registry_);
      models::load_session_weights(model_dir, config_, session, decode_->plan, *decode_->backend);
    }
    if (shapes.prefill) {
      prefill_.emplace();
      load_prefill(*prefill_, options, cache, shapes.prefill_rows, shapes.chunk);
    }
    if (shapes.single) {  // one prompt alone takes a row of rows × chunk tokens: no padding rows
      single_prefill_.emplace();
      load_prefill(*single_prefill_, options, cache, 1, shapes.single_chunk);
    }
#if SUROGATE_WITH_CUDA
    if (cuda_) static_cast<runtime::CudaBackend&>(*decode_->backend).set_cuda_graphs(true);
    // A developer's measurement (docs/generation.md): each plan's GPU milliseconds per op, summed
    // over the run and printed when the model closes; the decode plan then runs without its graph.
    const char* breakdown = std::getenv("SUROGATE_GENERATE_TIME_BREAKDOWN");
    if (cuda_ && breakdown != nullptr && std::string(breakdown) == "1") {
      for (DecodePlan* plan : {decode_.get(), prefill_ ? &*prefill_ : nullptr, single_prefill_ ? &*single_prefill_ : nullptr}) {
        if (plan != nullptr) static_cast<runtime::CudaBackend&>(*plan->backend).set_time_breakdown(true);
      }
      time_breakdown_ = true;
    }
#endif
    if (StepTiming::requested()) timing_.emplace();
#if SUROGATE_WITH_CUDA
    // One sequence's greedy steps run one ahead (decode_run_ahead.h): not on a trainer's live
    // weights (a step left in flight would run beside its optimizer), nor while measuring.
    if (cuda_ && live == nullptr && !time_breakdown_ && !timing_) {
      const graph::TensorId input_ids = decode_->plan.tensor(models::kInputIds);
      SUROGATE_CHECK(decode_->plan.graph.tensor(input_ids).type.size_bytes() ==
                         decode_->plan.graph.tensor(decode_->tokens).type.size_bytes(),
                     "the decode plan's input_ids and greedy ids differ in size");
      run_ahead_.emplace(static_cast<runtime::CudaBackend&>(*decode_->backend), decode_->tokens, input_ids,
                         decode_->rows);
    }
#endif
  }

  ~KvCacheModel() override {
    drop_ahead();
    for (const auto& [name, milliseconds] : breakdown_) {
      std::cerr << fmt::format("time breakdown: {:<40} {:10.1f} ms\n", name, milliseconds);
    }
    if (timing_) std::cerr << timing_->summary();
  }

  std::span<float> feed_in_place(std::span<const SlotFeed> feeds) override {
    check_feeds(feeds, *this);
    drop_ahead();
    const size_t vocab = static_cast<size_t>(vocab_size());
    logits_.resize(feeds.size() * vocab);
    std::span<float> whole;  // set when one round fed every feed whole
    feed_rounds(feeds, [&](const DecodePlan& step, const std::vector<RoundRow>& rows, bool in_one_round) {
      const std::span<float> round = read_logits(step);
      // The usual decode step: one round whose row r is feed r, every feed complete. Its logits
      // are the answer as they stand (no copy).
      if (in_one_round) {
        whole = round.first(feeds.size() * vocab);
        return;
      }
      for (size_t r = 0; r < rows.size(); ++r) {
        if (rows[r].completes) {
          std::copy_n(round.begin() + static_cast<std::ptrdiff_t>(r * vocab), vocab,
                      logits_.begin() + static_cast<std::ptrdiff_t>(rows[r].feed * vocab));
        }
      }
    });
    return whole.data() != nullptr ? whole : std::span<float>(logits_);
  }

  // The plans' greedy_tokens output: the ids alone are read back (on CUDA, no logits leave the GPU).
  std::vector<int32_t> feed_greedy(std::span<const SlotFeed> feeds) override {
    check_feeds(feeds, *this);
#if SUROGATE_WITH_CUDA
    if (run_ahead_ && runs_ahead(feeds)) return {feed_ahead(feeds[0])};
#endif
    drop_ahead();
    std::vector<int32_t> tokens(feeds.size(), 0);
    feed_rounds(feeds, [&](const DecodePlan& step, const std::vector<RoundRow>& rows, bool) {
      std::vector<int32_t> round(static_cast<size_t>(step.rows));
      step.backend->read(step.tokens, std::as_writable_bytes(std::span<int32_t>(round)));
      for (size_t r = 0; r < rows.size(); ++r) {
        if (rows[r].completes) tokens[rows[r].feed] = round[r];
      }
    });
    return tokens;
  }

  // On CUDA the op runs over each round's logits on the GPU (device_sampling.h); on the CPU the
  // default's host op over feed_in_place's logits.
  std::vector<int32_t> feed_sampled(std::span<const SlotFeed> feeds, std::span<const RowChoice> choices) override {
#if SUROGATE_WITH_CUDA
    if (cuda_) {
      check_feeds(feeds, *this);
      drop_ahead();
      SUROGATE_CHECK(choices.size() == feeds.size(), "feed_sampled: {} choices for {} feeds", choices.size(), feeds.size());
      std::vector<int32_t> tokens(feeds.size(), 0);
      feed_rounds(feeds, [&](const DecodePlan& step, const std::vector<RoundRow>& rows, bool) {
        std::vector<RowSampling> params(static_cast<size_t>(step.rows), RowSampling{.temperature = -1.0f});  // skipped
        std::vector<std::span<const int32_t>> contexts(static_cast<size_t>(step.rows));
        bool any = false;
        for (size_t r = 0; r < rows.size(); ++r) {
          if (!rows[r].completes) continue;
          params[r] = choices[rows[r].feed].sampling;
          contexts[r] = choices[rows[r].feed].context;
          any = true;
        }
        if (!any) return;
        const std::vector<int32_t> chosen = sampling_.choose(static_cast<runtime::CudaBackend&>(*step.backend), step.logits,
                                                             step.plan.graph.tensor(step.logits).type.dtype,
                                                             config_.vocab_size, params, contexts);
        for (size_t r = 0; r < rows.size(); ++r) {
          if (rows[r].completes) tokens[rows[r].feed] = chosen[r];
        }
      });
      return tokens;
    }
#endif
    return NextTokenModel::feed_sampled(feeds, choices);
  }

  // Every layer's key and value rows of the copied tokens, in one call on the decode plan's
  // backend (whose caches the prefill plans share).
  bool copies_prefixes() const override { return true; }
  void copy_prefixes(std::span<const PrefixCopy> copies) override {
    check_prefix_copies(copies, *this);
    drop_ahead();
    std::vector<runtime::ByteMove> moves;
    moves.reserve(copies.size() * cache_tensors_.size());
    for (graph::TensorId tensor : cache_tensors_) {
      const graph::TensorType& type = decode_->plan.graph.tensor(tensor).type;  // [slots, capacity, Hkv, D]
      const size_t slot_bytes = type.size_bytes() / held_.size();
      const size_t token_bytes = slot_bytes / static_cast<size_t>(capacity_);
      for (const PrefixCopy& copy : copies) {
        moves.push_back({tensor, static_cast<size_t>(copy.from) * slot_bytes, static_cast<size_t>(copy.to) * slot_bytes,
                         static_cast<size_t>(copy.tokens) * token_bytes});
      }
    }
    decode_->backend->copy_within(moves);
    for (const PrefixCopy& copy : copies) held_[static_cast<size_t>(copy.to)] = copy.tokens;
  }
  void clear(int64_t slot) override {
    check_slot(slot, slots());
    drop_ahead();
    held_[static_cast<size_t>(slot)] = 0;  // what the cache holds past held() is never read
  }
  int64_t held(int64_t slot) const override {
    check_slot(slot, slots());
    return held_[static_cast<size_t>(slot)];
  }
  int64_t slots() const override { return static_cast<int64_t>(held_.size()); }
  int64_t max_context() const override { return capacity_; }
  int64_t vocab_size() const override { return config_.vocab_size; }
  int64_t prefill_chunk() const override { return prefill_ ? prefill_->sequence : 0; }

  // What a model sharing this one's weights reads (kept alive by it, whichever is closed first).
  std::shared_ptr<const DecodePlan> shared_weights() const { return base_ ? base_ : decode_; }
  bool cuda() const { return cuda_; }

private:
  // The decode graph of [rows, sequence] compiled into `target` with its (unloaded) backend.
  models::SessionGraph compile(DecodePlan& target, const ModelOptions& options, const DecodeShape& cache, int64_t rows,
                               int64_t sequence) {
    DecodeGraph decode = build_kv_cache_graph(config_, registry_, options, live_, cache, rows, sequence);
    target.rows = rows;
    target.sequence = sequence;
    target.plan = compiler::compile_forward(std::move(decode.graph), registry_);
    target.logits = target.plan.tensor(kDecodeLogits);
    target.tokens = target.plan.tensor(kDecodeGreedyTokens);
    SUROGATE_CHECK(target.plan.graph.tensor(target.logits).type.numel() == rows * config_.vocab_size,
                   "the decode logits are {}", format_type(target.plan.graph.tensor(target.logits).type));
    target.backend = make_backend(options.cuda);
    capacity_ = cache.capacity;
    return std::move(decode.session);
  }

  // The decode plan reads every weight from `live`'s backend; only the caches are its own.
  void read_live_weights(const LoadedWeights& live) {
    SUROGATE_CHECK(live.plan != nullptr && live.backend != nullptr, "open_kv_cache_on_weights: no weights given");
    const runtime::Backend& owner = *live.backend;
#if SUROGATE_WITH_CUDA
    SUROGATE_CHECK(cuda_ == (dynamic_cast<const runtime::CudaBackend*>(&owner) != nullptr),
                   "open_kv_cache_on_weights: the weights live on another kind of backend");
#else
    SUROGATE_CHECK(dynamic_cast<const runtime::CpuBackend*>(&owner) != nullptr,
                   "open_kv_cache_on_weights: the weights live on another kind of backend");
#endif
    const runtime::ShareableParameter shareable = [](const std::string& name) { return !is_kv_cache(name); };
    for (const auto& [id, offset] : runtime::share_parameters(decode_->plan, *live.plan, shareable).own) {
      const graph::TensorInfo& tensor = decode_->plan.graph.tensor(id);
      SUROGATE_CHECK(is_kv_cache(tensor.name), "open_kv_cache_on_weights: the owner holds no '{}' of {}", tensor.name,
                     format_type(tensor.type));
    }
    share_parameters(*decode_->backend, owner, cuda_, shareable);
    decode_->backend->load(decode_->plan, registry_);
  }

  // A prefill plan of [rows, chunk] reading the decode plan's weights and caches.
  void load_prefill(DecodePlan& target, const ModelOptions& options, const DecodeShape& cache, int64_t rows,
                    int64_t chunk) {
    compile(target, options, cache, rows, chunk);
    share_parameters(*target.backend, *decode_->backend, cuda_);
    target.backend->load(target.plan, registry_);
    const runtime::SharedParameters shared = runtime::share_parameters(target.plan, decode_->plan);
    SUROGATE_CHECK(shared.own.empty(), "the prefill plan holds '{}' apart from the decode plan",
                   target.plan.graph.tensor(shared.own.empty() ? 0 : shared.own.front().first).name);
  }

  // Runs `feeds` as rounds (the top of kv_cache_model.h): prefill rounds while some fed slot has
  // more than one token left, then one decode round. After each round, `collect(step, rows,
  // in_one_round)` takes the results of the rows that complete their feed (`completes`);
  // in_one_round: this round is the only one and its row r is feed r.
  template <typename Collect>
  void feed_rounds(std::span<const SlotFeed> feeds, Collect&& collect) {
    if (timing_) timing_->call_started();
    int rounds = 0;
    bool decode_round = false;
    std::vector<int64_t> done(feeds.size(), 0);
    std::vector<size_t> pending(feeds.size());
    for (size_t i = 0; i < feeds.size(); ++i) pending[i] = i;
    while (!pending.empty()) {
      // Slots with more than one token left go through the prefill plan, first; its spare rows
      // take slots with one token left. When only those remain, one decode round feeds them all.
      auto left = [&](size_t i) { return static_cast<int64_t>(feeds[i].tokens.size()) - done[i]; };
      std::stable_partition(pending.begin(), pending.end(), [&](size_t i) { return left(i) > 1; });
      const auto prompts = std::count_if(pending.begin(), pending.end(), [&](size_t i) { return left(i) > 1; });
      DecodePlan& step = prompts == 0 || !prefill_ ? *decode_
                         : prompts == 1 && single_prefill_ ? *single_prefill_
                                                           : *prefill_;
      std::vector<RoundRow> rows;
      for (size_t i : pending) {
        if (static_cast<int64_t>(rows.size()) == step.rows) break;
        rows.push_back({i, done[i], std::min(left(i), step.sequence)});
      }
      run(step, feeds, rows);
      ++rounds;
      decode_round = &step == decode_.get();
      const bool in_one_round = pending.size() == feeds.size() && rows.size() == feeds.size() && done_in_one(feeds, rows);
      for (RoundRow& row : rows) {
        done[row.feed] += row.count;
        held_[static_cast<size_t>(feeds[row.feed].slot)] += row.count;
        row.completes = done[row.feed] == static_cast<int64_t>(feeds[row.feed].tokens.size());
      }
      collect(step, rows, in_one_round);
      std::erase_if(pending, [&](size_t i) { return done[i] == static_cast<int64_t>(feeds[i].tokens.size()); });
    }
    if (timing_) timing_->call_returned(rounds == 1 && decode_round);
  }

  // A step launched ahead that the engine did not ask for: waited for and dropped (its cache write
  // lies past held(), never read; nothing else runs beside it after this).
  void drop_ahead() {
#if SUROGATE_WITH_CUDA
    if (ahead_) run_ahead_->settle();
#endif
    ahead_.reset();
  }

#if SUROGATE_WITH_CUDA
  // One slot fed one token, with room in its cache for the step after: that step may run ahead.
  bool runs_ahead(std::span<const SlotFeed> feeds) const {
    return feeds.size() == 1 && feeds[0].tokens.size() == 1 &&
           held_[static_cast<size_t>(feeds[0].slot)] + 2 <= capacity_;
  }

  // The step `feed` asks for — already in flight when the last call launched it on the id the
  // engine now feeds — and, before its id is read, the next one on that id (decode_run_ahead.h).
  int32_t feed_ahead(const SlotFeed& feed) {
    const std::vector<RoundRow> rows{RoundRow{.feed = 0, .first = 0, .count = 1}};
    const std::span<const SlotFeed> feeds(&feed, 1);
    int buffer = 0;
    if (ahead_ && ahead_->slot == feed.slot && ahead_->token == feed.tokens[0]) {
      buffer = ahead_->buffer;
    } else {
      drop_ahead();
      run(*decode_, feeds, rows);
      run_ahead_->read_ids(buffer);
    }
    ahead_.reset();
    ++held_[static_cast<size_t>(feed.slot)];
    run_ahead_->feed_ids_forward();
    run(*decode_, feeds, rows, true);
    run_ahead_->read_ids(1 - buffer);
    const int32_t id = run_ahead_->wait(buffer)[0];
    ahead_ = Ahead{.slot = feed.slot, .token = id, .buffer = 1 - buffer};
    return id;
  }
#endif

  // Whether `rows` (the first round of `feeds`) feeds every one whole, row r being feed r.
  static bool done_in_one(std::span<const SlotFeed> feeds, const std::vector<RoundRow>& rows) {
    for (size_t r = 0; r < rows.size(); ++r) {
      if (rows[r].feed != r || rows[r].first != 0 ||
          rows[r].count != static_cast<int64_t>(feeds[rows[r].feed].tokens.size())) {
        return false;
      }
    }
    return true;
  }

  // Runs one round on `step`: row r of `rows` feeds its slot's tokens; the plan's other rows are
  // padding (no new tokens) over slots no row names.
  // `ids_on_device`: input_ids is not given (the step run ahead: DecodeRunAhead::feed_ids_forward
  // put the previous step's ids there).
  void run(DecodePlan& step, std::span<const SlotFeed> feeds, const std::vector<RoundRow>& rows,
           bool ids_on_device = false) {
    const int64_t width = step.sequence, cells = step.rows * width;
    RoundInputs in;
    in.input_ids.assign(static_cast<size_t>(cells), 0);
    in.position_ids.assign(static_cast<size_t>(cells), 0);
    in.document_ids.assign(static_cast<size_t>(cells), 1);  // padding: a document of its own
    in.last_rows.assign(static_cast<size_t>(cells), 0);
    in.last_row_positions.assign(static_cast<size_t>(cells), 0);
    std::vector<bool> named(held_.size(), false);
    for (const RoundRow& row : rows) named[static_cast<size_t>(feeds[row.feed].slot)] = true;
    size_t spare = 0;  // the next slot a padding row may name
    for (int64_t r = 0; r < step.rows; ++r) {
      int64_t slot = 0, count = 0;
      if (r < static_cast<int64_t>(rows.size())) {
        const RoundRow& row = rows[static_cast<size_t>(r)];
        slot = feeds[row.feed].slot;
        count = row.count;
        for (int64_t t = 0; t < count; ++t) {
          const size_t cell = static_cast<size_t>(r * width + t);
          in.input_ids[cell] = feeds[row.feed].tokens[static_cast<size_t>(row.first + t)];
          in.position_ids[cell] = static_cast<int32_t>(held_[static_cast<size_t>(slot)] + t);
          in.document_ids[cell] = 0;
        }
      } else {
        while (named[spare]) ++spare;
        slot = static_cast<int64_t>(spare++);
      }
      in.slot_ids.push_back(static_cast<int32_t>(slot));
      in.cache_lengths.push_back(static_cast<int32_t>(held_[static_cast<size_t>(slot)]));
      in.new_lengths.push_back(static_cast<int32_t>(count));
      in.last_rows[static_cast<size_t>(r)] = static_cast<int32_t>(r * width + std::max<int64_t>(count, 1) - 1);
    }
    std::vector<runtime::InputBinding> bindings;
    for (graph::TensorId id : step.plan.graph.inputs) {
      if (ids_on_device && step.plan.graph.tensor(id).name == models::kInputIds) continue;
      const std::vector<int32_t>& values = in.by_name(step.plan.graph.tensor(id).name);
      bindings.push_back({id, std::as_bytes(std::span<const int32_t>(values))});
    }
    if (timing_) timing_->execute_started();
    step.backend->execute(bindings);
    if (timing_) timing_->execute_returned();
#if SUROGATE_WITH_CUDA
    if (time_breakdown_) {
      const std::string plan = fmt::format("[{}, {}] ", step.rows, step.sequence);
      for (const auto& [name, milliseconds] : static_cast<runtime::CudaBackend&>(*step.backend).time_breakdown()) {
        breakdown_[plan + name] += milliseconds;
      }
    }
#endif
  }

  // The logits of the round `step` ran, [step.rows × vocab] in round_, which the next round overwrites.
  std::span<float> read_logits(const DecodePlan& step) {
    const std::span<float> round = round_buffer(static_cast<size_t>(step.rows * config_.vocab_size));
    if (step.plan.graph.tensor(step.logits).type.dtype == DType::F32) {
      step.backend->read(step.logits, std::as_writable_bytes(round));
    } else {
      const std::vector<float> values = models::read_float32(*step.backend, step.plan, step.logits);
      std::copy(values.begin(), values.end(), round.begin());
    }
    return round;
  }

  // Where a round's logits land, kept from round to round: pages already mapped (and on CUDA
  // page-locked, so the copy off the GPU runs at the link's speed) rather than a fresh allocation's.
  std::span<float> round_buffer(size_t count) {
#if SUROGATE_WITH_CUDA
    if (cuda_) {
      if (pinned_round_.size() < count) pinned_round_ = cuda::PinnedHostBuffer<float>(count);
      return {pinned_round_.data(), count};
    }
#endif
    round_.resize(count);
    return round_;
  }

  bool cuda_ = false;
  std::shared_ptr<const DecodePlan> base_;  // whose weights this model reads, if another's
  WeightForms live_;  // how the live owner holds its weights (open_kv_cache_on_weights)
  graph::OpRegistry registry_ = ops::make_model_registry();
  io::ModelConfig config_;
  int64_t capacity_ = 0;
  std::shared_ptr<DecodePlan> decode_ = std::make_shared<DecodePlan>();
  std::optional<DecodePlan> prefill_;  // absent when prompts go a token at a time
  std::optional<DecodePlan> single_prefill_;  // [1, rows × chunk]: a round with one prompt in it
  std::vector<int64_t> held_;          // tokens each slot's cache holds
  std::vector<graph::TensorId> cache_tensors_;  // the decode plan's k_cache / v_cache, every layer
  // Kept from step to step: a decode step's logits (tens of MB at a large vocabulary) land in
  // pages already mapped instead of a fresh allocation's.
  std::vector<float> round_, logits_;
#if SUROGATE_WITH_CUDA
  cuda::PinnedHostBuffer<float> pinned_round_;
  DeviceSampling sampling_;  // feed_sampled's buffers on the GPU
#endif
#if SUROGATE_WITH_CUDA
  std::optional<DecodeRunAhead> run_ahead_;  // one sequence's greedy steps run one ahead (after decode_)
#endif
  // The step launched ahead: the slot it feeds, the id it was given (the engine's next token, if
  // the engine asks for that step) and the host buffer its ids will reach.
  struct Ahead {
    int64_t slot = 0;
    int32_t token = 0;
    int buffer = 0;
  };
  std::optional<Ahead> ahead_;
  bool time_breakdown_ = false;               // SUROGATE_GENERATE_TIME_BREAKDOWN=1
  std::optional<StepTiming> timing_;          // SUROGATE_GENERATE_STEP_TIMING=1
  std::map<std::string, double> breakdown_;   // "[rows, sequence] op" -> GPU milliseconds
};

}  // namespace

std::unique_ptr<NextTokenModel> open_kv_cache_model(const std::filesystem::path& model_dir, const ModelOptions& options,
                                                    const PrefillShape& prefill) {
  return std::make_unique<KvCacheModel>(model_dir, options, prefill);
}

std::unique_ptr<NextTokenModel> open_kv_cache_model(const std::filesystem::path& model_dir,
                                                    const ModelOptions& options) {
  return open_kv_cache_model(model_dir, options, PrefillShape{});
}

std::unique_ptr<NextTokenModel> open_kv_cache_adapter(const NextTokenModel& base,
                                                      const std::filesystem::path& model_dir,
                                                      const ModelOptions& options, const PrefillShape& prefill) {
  const auto* kv = dynamic_cast<const KvCacheModel*>(&base);
  SUROGATE_CHECK(kv != nullptr, "open_kv_cache_adapter: the base is not a KV cache model");
  SUROGATE_CHECK(kv->cuda() == options.cuda, "open_kv_cache_adapter: the base runs on another device");
  return std::make_unique<KvCacheModel>(model_dir, options, prefill, kv->shared_weights());
}

std::unique_ptr<NextTokenModel> open_kv_cache_on_weights(const LoadedWeights& weights,
                                                         const std::filesystem::path& model_dir,
                                                         const ModelOptions& options, const PrefillShape& prefill) {
  SUROGATE_CHECK(options.adapter.empty(), "open_kv_cache_on_weights: the adapter is the owner's (weights.lora)");
  return std::make_unique<KvCacheModel>(model_dir, options, prefill, nullptr, &weights);
}

}  // namespace surogate::generate
