#include "parallel/kv_op_wire.h"

#include "core/overloaded.h"

namespace kvs {
namespace {

// The kinds on the wire are the variant's indices: a new op goes at the end of KvOp and gets a case below.
static_assert(std::variant_size_v<KvOp> == 5);

}  // namespace

void write_kv_ops(ByteWriter& out, std::span<const KvOp> ops) {
  out.put<uint64_t>(ops.size());
  for (const KvOp& op : ops) {
    out.put<uint8_t>(static_cast<uint8_t>(op.index()));
    std::visit(Overloaded{
                   [&](const KvCopySlots& c) { out.put(c); },
                   [&](const KvCompact& c) {
                     out.put(c.group);
                     out.put_array(std::span<const BlockId>(c.blocks));
                     out.put<uint64_t>(c.kept.size());
                     for (const std::vector<uint32_t>& row : c.kept) out.put_array(std::span<const uint32_t>(row));
                   },
                   [&](const KvBlockToHost& m) { out.put(m); },
                   [&](const KvHostToBlock& m) { out.put(m); },
                   [&](const KvBlockToDisk& m) {
                     out.put(m.block);
                     out.put(m.hash);
                     out.put_array(std::span<const TokenId>(m.tokens));
                   },
               },
               op);
  }
}

void read_kv_ops(ByteReader& in, std::vector<KvOp>& ops) {
  ops.resize(in.get<uint64_t>());
  for (KvOp& op : ops) {
    switch (in.get<uint8_t>()) {
      case 0: op = in.get<KvCopySlots>(); break;
      case 1: {
        KvCompact c{.group = in.get<uint32_t>()};
        in.get_array(c.blocks);
        c.kept.resize(in.get<uint64_t>());
        for (std::vector<uint32_t>& row : c.kept) in.get_array(row);
        op = std::move(c);
        break;
      }
      case 2: op = in.get<KvBlockToHost>(); break;
      case 3: op = in.get<KvHostToBlock>(); break;
      case 4: {
        KvBlockToDisk m{.block = in.get<BlockId>(), .hash = in.get<BlockHash>()};
        in.get_array(m.tokens);
        op = std::move(m);
        break;
      }
      default: KVS_ASSERT(false, "a KV op of unknown kind in a step message");
    }
  }
}

}  // namespace kvs
