// One visitor from several lambdas, for std::visit over a variant: std::visit(Overloaded{[](const A&) {...},
// [](const B&) {...}}, v).
#pragma once

namespace kvs {

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};

}  // namespace kvs
