// Python's semantics for what templates do with values: operators (+ on numbers, strings and lists, // and % with
// floor rounding, comparisons, in), iteration (lists, dict keys, string characters), indexing and slicing
// (negative indices, steps), attributes (dict keys, then the methods of str, dict and list templates call:
// strip, split, startswith, items, get, ...). Errors are TemplateError with Python's wording.
#pragma once

#include <string>
#include <vector>

#include "jinja/value.h"

namespace kvs::jinja {

Value binary_operator(const std::string& op, const Value& a, const Value& b);
Value negate(const Value& a);
// Python's a < b for numbers, strings and lists.
bool less_than(const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);
// The items a for loop walks: a list's items, a dict's keys, a string's characters; undefined is empty.
std::vector<Value> iterate(const Value& v);
size_t length(const Value& v);
Value subscript(const Value& container, const Value& key);
Value slice(const Value& container, const Value& start, const Value& stop, const Value& step);
// a.name: a dict's key, else a method bound to a (undefined when there is neither; an error on undefined).
Value attribute(const Value& object, const std::string& name);

// Python's str.strip/lstrip/rstrip (whitespace, or the characters of `chars`).
std::string strip(const std::string& s, const Value& chars, bool left, bool right);
std::string title_case(const std::string& s);
std::string upper(std::string s);
std::string lower(std::string s);

}  // namespace kvs::jinja
