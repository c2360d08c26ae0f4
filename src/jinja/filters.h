// Jinja's built-in filters and tests as chat templates use them, with Hugging Face's tojson (json.dumps with
// ensure_ascii off, indent, separators and sort_keys).
//   filters: abs, capitalize, count, default/d, dictsort, first, float, indent, int, items, join, last, length,
//            list, lower, map, max, min, reject, rejectattr, replace, reverse, round, safe, select, selectattr,
//            sort, string, sum, title, tojson, trim, unique, upper, wordcount
//   tests:   defined, undefined, none, boolean, true, false, integer, float, number, string, mapping, iterable,
//            sequence, callable, even, odd, divisibleby, eq/equalto/==, ne/!=, lt/<, le/<=, gt/>, ge/>=, in,
//            sameas, lower, upper
#pragma once

#include <string>

#include "jinja/value.h"

namespace kvs::jinja {

bool has_filter(const std::string& name);
bool has_test(const std::string& name);
Value apply_filter(const std::string& name, const Value& input, const Arguments& args);
bool apply_test(const std::string& name, const Value& input, const Arguments& args);

}  // namespace kvs::jinja
