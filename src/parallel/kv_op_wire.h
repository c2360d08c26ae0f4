// The KV op log (kv/kv_ops.h) on the wire: tensor parallelism sends rank 0's log to every rank in its step message
// (parallel/tensor_parallel.h), and each applies it with its own executor. A count, then each op as its kind and
// fields.
#pragma once

#include <span>
#include <vector>

#include "kv/kv_ops.h"
#include "parallel/byte_stream.h"

namespace kvs {

void write_kv_ops(ByteWriter& out, std::span<const KvOp> ops);
// Replaces `ops` with the log `in` holds next.
void read_kv_ops(ByteReader& in, std::vector<KvOp>& ops);

}  // namespace kvs
