#include "tensor/weight_view.h"

#include "tensor/packed_q8.h"

namespace kvs {

size_t WeightView::bytes() const {
  switch (layout) {
    case WeightLayout::kRows: return rows * row_bytes();
    case WeightLayout::kQ8_0x16: return PackedQ8Layout{.rows = rows, .cols = cols}.bytes();
  }
  return 0;
}

}  // namespace kvs
