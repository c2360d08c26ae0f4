#include "tensor/weight_view.h"

#include "tensor/packed_weights.h"

namespace kvs {

size_t WeightView::bytes() const {
  if (is_packed(layout)) return PackedLayout::of(*this).bytes();
  return rows * row_bytes();
}

const char* weight_layout_name(WeightLayout layout) {
  switch (layout) {
    case WeightLayout::kRows: return "rows";
    case WeightLayout::kQ8_0x16: return "q8_0x16";
    case WeightLayout::kQ8_0x8: return "q8_0x8";
    case WeightLayout::kQ4_0x16: return "q4_0x16";
    case WeightLayout::kQ4_0x8: return "q4_0x8";
    case WeightLayout::kQ4_Kx16: return "q4_kx16";
    case WeightLayout::kQ4_Kx8: return "q4_kx8";
    case WeightLayout::kQ5_Kx16: return "q5_kx16";
    case WeightLayout::kQ5_Kx8: return "q5_kx8";
    case WeightLayout::kQ6_Kx16: return "q6_kx16";
    case WeightLayout::kQ6_Kx8: return "q6_kx8";
  }
  return "unknown";
}

}  // namespace kvs
