// A parsed Jinja template: statements (Node) and expressions (Expr), as parser.cpp builds them and renderer.cpp
// walks them. One struct per tree, its fields used by kind (named in the comments).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace kvs::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,    // value
    kName,       // name
    kList,       // items
    kTuple,      // items
    kDict,       // items: key, value, key, value, ...
    kAttribute,  // a.name
    kIndex,      // a[b]
    kSlice,      // a[b:c:d] (absent parts are null)
    kCall,       // a(items, keywords)
    kFilter,     // a | name(items, keywords)
    kTest,       // a is [not] name(items)  (negated)
    kNegate,     // -a
    kNot,        // not a
    kBinary,     // a name b: + - * / // % ** ~ == != < > <= >= in (negated: not in)
    kAnd,        // a and b
    kOr,         // a or b
    kCondition,  // a if b else c (c may be null)
  };
  Kind kind;
  size_t line = 0;
  Value value;
  std::string name;
  bool negated = false;
  ExprPtr a, b, c;
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> keywords;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
  enum class Kind {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // branches (condition, body) ..., otherwise
    kFor,          // for targets in expr [if condition]: body, otherwise (when nothing was iterated)
    kSet,          // set targets = expr, or set object.attribute = expr (attribute non-empty: targets[0] is object)
    kSetBlock,     // set targets[0] %} body {% endset
    kMacro,        // macro name(parameters) body
    kCallBlock,    // call expr: body, as caller()
    kFilterBlock,  // filter expr (the filter applied to body's text): the filter expression's input is body
    kBreak,
    kContinue,
  };
  Kind kind;
  size_t line = 0;
  std::string text;
  ExprPtr expr, condition;
  std::vector<std::string> targets;
  std::string attribute;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body, otherwise;
  std::vector<std::pair<std::string, ExprPtr>> parameters;  // macros: name and default (null: none)
};

}  // namespace kvs::jinja
