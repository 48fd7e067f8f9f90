// The filters that walk sequences: join, first, last, list, map, select/reject(attr), unique,
// sort, reverse, sum, min, max, dictsort, batch. Attribute paths ("a.b", "items.0") resolve
// like jinja2's attribute getter.
#pragma once

#include "chat_template/ast.h"

namespace surogate::chat_template {

#define DECLARE_FILTER(name) Value name(Evaluator& evaluator, const Value& value, CallArguments& arguments, int line);
DECLARE_FILTER(filter_join)
DECLARE_FILTER(filter_first)
DECLARE_FILTER(filter_last)
DECLARE_FILTER(filter_list)
DECLARE_FILTER(filter_map)
DECLARE_FILTER(filter_select)
DECLARE_FILTER(filter_reject)
DECLARE_FILTER(filter_selectattr)
DECLARE_FILTER(filter_rejectattr)
DECLARE_FILTER(filter_unique)
DECLARE_FILTER(filter_sort)
DECLARE_FILTER(filter_reverse)
DECLARE_FILTER(filter_sum)
DECLARE_FILTER(filter_min)
DECLARE_FILTER(filter_max)
DECLARE_FILTER(filter_dictsort)
DECLARE_FILTER(filter_batch)
#undef DECLARE_FILTER

}  // namespace surogate::chat_template
