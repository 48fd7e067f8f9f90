// Bounds on the work and memory one render may take. A chat template comes from a model folder,
// i.e. from the user, and Jinja can loop (`{% for i in range(10**6) %}` nested, a macro recursing
// through call blocks) or grow values without end (`{% set ns.s = ns.s ~ ns.s %}`, `'x' * 10**9`).
// Without a bound such a template hangs the data pipeline or exhausts memory instead of failing
// with a message naming the template and line. The bounds sit far above what real chat templates
// need: a render is a few statements per message, and its text is a few times the conversation.
#pragma once

#include <cstddef>
#include <cstdint>

namespace surogate::chat_template::detail {

// Steps one render may take: one per statement executed and per expression evaluated, plus one
// per KiB of every string and per 16 items of every list an expression builds (so a loop that
// copies a long string every iteration is bounded by the bytes it moves, not just its count;
// looking a value up shares it and costs one step).
// Every built-in template renders a 10 000-message conversation well inside it
// (tests/chat_template/test_render_limits.cpp). Fuzz builds define a lower bound so a looping
// template fails within libFuzzer's -timeout under the sanitizers.
#ifdef SUROGATE_CHAT_TEMPLATE_MAX_STEPS
inline constexpr uint64_t kMaxRenderSteps = SUROGATE_CHAT_TEMPLATE_MAX_STEPS;
#else
inline constexpr uint64_t kMaxRenderSteps = 20'000'000;
#endif
// The longest string a render may build, the rendered text included (64 MiB).
inline constexpr size_t kMaxTextBytes = size_t{64} << 20;
// The most items a list built by the template may hold (range() has the same bound).
inline constexpr size_t kMaxListItems = 1'000'000;

}  // namespace surogate::chat_template::detail
