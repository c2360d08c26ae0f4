#include "tensor/weight_view.h"

#include "tensor/float_panels.h"
#include "tensor/packed_weights.h"

namespace kvs {

size_t WeightView::bytes() const {
  if (in_float_panels(*this)) return FloatPanelLayout::of(*this).bytes();
  if (is_packed(layout)) return PackedLayout::of(*this).bytes();
  return rows * row_bytes();
}

const char* weight_layout_name(WeightLayout layout) {
  switch (layout) {
    case WeightLayout::kRows: return "rows";
    case WeightLayout::kPackedX16: return "packed x16";
    case WeightLayout::kPackedX8: return "packed x8";
  }
  return "unknown";
}

}  // namespace kvs
