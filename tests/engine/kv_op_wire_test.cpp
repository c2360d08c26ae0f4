// The KV op log on the wire (parallel/kv_op_wire.h): every kind of op, with its fields, comes back as written, in
// order, and a message holds nothing after the log it was given.
#include "parallel/kv_op_wire.h"

#include <gtest/gtest.h>

namespace kvs {
namespace {

TEST(KvOpWire, EveryKindOfOpComesBackAsWritten) {
  const std::vector<KvOp> ops = {
      KvCopySlots{.group = 1, .from = BlockId{7}, .to = BlockId{9}, .num_slots = 5, .from_tail = 2, .to_tail = 3},
      KvCompact{.group = 0, .blocks = {BlockId{4}, BlockId{1}}, .kept = {{0, 2, 5}, {}, {1}}},
      KvBlockToHost{.block = BlockId{11}, .host_slot = 1234567},
      KvHostToBlock{.host_slot = 42, .block = BlockId{3}},
      KvBlockToDisk{.block = BlockId{8}, .hash = BlockHash{.low = 0x1122, .high = 0x3344}, .tokens = {5, 6, 7}},
      KvCopySlots{.group = 0, .from = BlockId{1}, .to = BlockId{2}, .num_slots = 16},
  };
  std::vector<std::byte> message;
  ByteWriter out(message);
  write_kv_ops(out, ops);
  ByteReader in(message);
  std::vector<KvOp> back = {KvHostToBlock{}};  // replaced, not appended to
  read_kv_ops(in, back);
  EXPECT_TRUE(in.done());
  ASSERT_EQ(back.size(), ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_EQ(back[i].index(), ops[i].index());
  }
  const auto& copy = std::get<KvCopySlots>(back[0]);
  EXPECT_EQ(copy.group, 1u);
  EXPECT_EQ(copy.from, BlockId{7});
  EXPECT_EQ(copy.to, BlockId{9});
  EXPECT_EQ(copy.num_slots, 5u);
  EXPECT_EQ(copy.from_tail, 2u);
  EXPECT_EQ(copy.to_tail, 3u);
  const auto& compact = std::get<KvCompact>(back[1]);
  EXPECT_EQ(compact.blocks, (std::vector<BlockId>{BlockId{4}, BlockId{1}}));
  EXPECT_EQ(compact.kept, (std::vector<std::vector<uint32_t>>{{0, 2, 5}, {}, {1}}));
  EXPECT_EQ(std::get<KvBlockToHost>(back[2]).host_slot, 1234567u);
  EXPECT_EQ(std::get<KvBlockToHost>(back[2]).block, BlockId{11});
  EXPECT_EQ(std::get<KvHostToBlock>(back[3]).host_slot, 42u);
  EXPECT_EQ(std::get<KvHostToBlock>(back[3]).block, BlockId{3});
  const auto& disk = std::get<KvBlockToDisk>(back[4]);
  EXPECT_EQ(disk.block, BlockId{8});
  EXPECT_EQ(disk.hash, (BlockHash{.low = 0x1122, .high = 0x3344}));
  EXPECT_EQ(disk.tokens, (std::vector<TokenId>{5, 6, 7}));
  EXPECT_EQ(std::get<KvCopySlots>(back[5]).from_tail, kNoKeyTail) << "the defaults travel too";
}

}  // namespace
}  // namespace kvs
