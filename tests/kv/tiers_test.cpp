// The offload tiers on their own: the host tier's budget, LRU order, pins and demotion sink; the disk
// tier's files (written asynchronously, read back checked), its budget, a restart that finds them, a
// foreign or corrupt directory, and injected faults (write and read errors, short reads, a full disk,
// flipped bits), each of which loses the block (counted, logged) and never hands out wrong bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "gguf/gguf_test_util.h"
#include "kv/tiers/block_file.h"
#include "kv/tiers/disk_tier.h"
#include "kv/tiers/host_tier.h"
#include "kv/tiers/tier_test_util.h"

namespace kvs {
namespace {

using kvs::testing::TempDir;
using test::FaultyIo;
using test::Logged;

constexpr size_t kBlockBytes = 256;
const TierFormat kFormat{.fingerprint = 0x1234, .description = "test blocks of 256 bytes", .block_bytes = kBlockBytes};

TierBlockKey key_of(uint64_t i, uint64_t format = kFormat.fingerprint) {
  return {.hash = {.low = i * 0x9E3779B97F4A7C15ull + 1, .high = i}, .format = format};
}
std::vector<TokenId> tokens_of(uint64_t i) { return {static_cast<TokenId>(i), 7, static_cast<TokenId>(i * 3)}; }
std::vector<std::byte> bytes_of(uint64_t i) {
  std::vector<std::byte> b(kBlockBytes);
  for (size_t j = 0; j < b.size(); ++j) b[j] = static_cast<std::byte>((i * 131 + j * 7) & 0xFF);
  return b;
}

TEST(HostTier, KeepsLoadsAndDropsTheLeastRecentlyUsedToItsSink) {
  std::vector<uint64_t> demoted;
  HostTier host(3 * kBlockBytes, [&](const TierBlockKey& k, std::span<const TokenId> t, std::span<const std::byte> b) {
    EXPECT_TRUE(std::ranges::equal(b, bytes_of(k.hash.high)));
    EXPECT_TRUE(std::ranges::equal(t, tokens_of(k.hash.high)));
    demoted.push_back(k.hash.high);
  });
  for (uint64_t i = 0; i < 3; ++i) ASSERT_TRUE(host.store(key_of(i), tokens_of(i), bytes_of(i)));
  EXPECT_TRUE(host.contains(key_of(1), tokens_of(1)));
  EXPECT_FALSE(host.contains(key_of(1), tokens_of(2))) << "a hit is confirmed by the tokens";
  EXPECT_FALSE(host.contains(key_of(1, 99), tokens_of(1))) << "another format is another key";
  std::vector<std::byte> out(kBlockBytes);
  ASSERT_TRUE(host.load(key_of(0), out));  // 0 is now the most recently used: 1 goes first
  EXPECT_EQ(out, bytes_of(0));
  ASSERT_TRUE(host.store(key_of(3), tokens_of(3), bytes_of(3)));
  EXPECT_EQ(demoted, (std::vector<uint64_t>{1}));
  ASSERT_TRUE(host.pin(key_of(2)));
  ASSERT_TRUE(host.store(key_of(4), tokens_of(4), bytes_of(4)));
  EXPECT_EQ(demoted, (std::vector<uint64_t>{1, 0})) << "the pinned block 2 is passed over";
  EXPECT_TRUE(host.contains(key_of(2), tokens_of(2)));
  ASSERT_TRUE(host.pin(key_of(3)));
  ASSERT_TRUE(host.pin(key_of(4)));
  const Status full = host.store(key_of(5), tokens_of(5), bytes_of(5));
  EXPECT_EQ(full.code(), ErrorCode::kOutOfMemory);
  EXPECT_NE(full.message().find("3 pinned"), std::string::npos) << full.message();
  host.unpin(key_of(2));
  ASSERT_TRUE(host.store(key_of(5), tokens_of(5), bytes_of(5)));
  const TierStats s = host.stats();
  EXPECT_EQ(s.blocks_held, 3u);
  EXPECT_EQ(s.bytes_held, 3 * kBlockBytes);
  EXPECT_EQ(s.evictions, 3u);
  EXPECT_EQ(s.rejected, 1u);
  EXPECT_EQ(s.loads, 1u);
  EXPECT_TRUE(host.check_invariants());
  EXPECT_FALSE(host.load(key_of(0), out)) << "dropped";
}

// drop_all() (a device lost a move of the tier's bytes): every block goes, none to the sink, and the slots are reused.
TEST(HostTier, DropAllForgetsEveryBlockAndReusesTheSlots) {
  size_t sunk = 0;
  HostTier host(3 * kBlockBytes,
                [&](const TierBlockKey&, std::span<const TokenId>, std::span<const std::byte>) { ++sunk; });
  for (uint64_t i = 0; i < 3; ++i) ASSERT_TRUE(host.store(key_of(i), tokens_of(i), bytes_of(i)));
  host.drop_all();
  EXPECT_EQ(host.stats().blocks_held, 0u);
  EXPECT_EQ(sunk, 0u);
  for (uint64_t i = 0; i < 3; ++i) EXPECT_FALSE(host.contains(key_of(i), tokens_of(i)));
  for (uint64_t i = 3; i < 6; ++i) ASSERT_TRUE(host.store(key_of(i), tokens_of(i), bytes_of(i)));
  EXPECT_EQ(sunk, 0u) << "the dropped blocks' slots took the new ones";
  std::vector<std::byte> out(kBlockBytes);
  ASSERT_TRUE(host.load(key_of(4), out));
  EXPECT_EQ(out, bytes_of(4));
  EXPECT_TRUE(host.check_invariants());
}

std::unique_ptr<DiskTier> open_disk(const std::string& dir, size_t capacity, Logged& logged,
                                    std::shared_ptr<BlockFileIo> io = {}, TierFormat format = kFormat) {
  auto tier = DiskTier::open(
      {.directory = dir, .capacity_bytes = capacity, .format = format, .io = std::move(io), .log = logged.sink()});
  EXPECT_TRUE(tier) << tier.status().message();
  return tier ? std::move(*tier) : nullptr;
}

size_t file_bytes(uint64_t i) {
  return encode_block_file(key_of(i), kFormat.description, tokens_of(i), bytes_of(i)).size();
}

TEST(DiskTier, WritesChecksAndFindsItsBlocksAfterARestart) {
  TempDir dir;
  Logged logged;
  {
    auto disk = open_disk(dir.file("cache"), 10 * file_bytes(0), logged);
    for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(disk->store(key_of(i), tokens_of(i), bytes_of(i)));
    std::vector<std::byte> out(kBlockBytes);
    ASSERT_TRUE(disk->load(key_of(2), out)) << "served while (or after) it is written";
    EXPECT_EQ(out, bytes_of(2));
    disk->flush();
    EXPECT_TRUE(std::filesystem::exists(disk->block_path(key_of(3))));
    const TierStats s = disk->stats();
    EXPECT_EQ(s.stores, 4u);
    EXPECT_EQ(s.blocks_held, 4u);
    EXPECT_EQ(s.bytes_held, 4 * file_bytes(0));
    EXPECT_TRUE(disk->check_invariants());
  }
  auto again = open_disk(dir.file("cache"), 10 * file_bytes(0), logged);
  EXPECT_TRUE(logged.has("4 blocks"));
  for (uint64_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(again->contains(key_of(i), tokens_of(i)));
    std::vector<std::byte> out(kBlockBytes);
    ASSERT_TRUE(again->load(key_of(i), out));
    EXPECT_EQ(out, bytes_of(i));
  }
  ASSERT_TRUE(again->prefetch(key_of(1), tokens_of(1)));
  again->flush();
  const auto loaded = again->take_loaded();
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_TRUE(loaded[0].status);
  EXPECT_EQ(loaded[0].bytes, bytes_of(1));
  EXPECT_FALSE(again->prefetch(key_of(1), tokens_of(2))) << "other tokens: not this block";

  // Another KV format in the same directory sees none of them, and leaves them alone.
  TierFormat other = kFormat;
  other.fingerprint = 0x9999;
  other.description = "other blocks";
  auto foreign_format = open_disk(dir.file("cache"), 10 * file_bytes(0), logged, {}, other);
  EXPECT_EQ(foreign_format->stats().blocks_held, 0u);
  EXPECT_TRUE(std::filesystem::exists(again->block_path(key_of(0))));
}

TEST(DiskTier, BudgetDropsTheLeastRecentlyUsedFiles) {
  TempDir dir;
  Logged logged;
  auto disk = open_disk(dir.file("cache"), 3 * file_bytes(0), logged);
  for (uint64_t i = 0; i < 5; ++i) {
    ASSERT_TRUE(disk->store(key_of(i), tokens_of(i), bytes_of(i)));
    disk->flush();
  }
  EXPECT_FALSE(disk->contains(key_of(0), tokens_of(0)));
  EXPECT_FALSE(disk->contains(key_of(1), tokens_of(1)));
  EXPECT_TRUE(disk->contains(key_of(4), tokens_of(4)));
  EXPECT_FALSE(std::filesystem::exists(disk->block_path(key_of(0))));
  EXPECT_EQ(disk->stats().evictions, 2u);
  EXPECT_TRUE(disk->check_invariants());
  // A restart with a smaller budget keeps the newest.
  disk.reset();
  auto smaller = open_disk(dir.file("cache"), 2 * file_bytes(0), logged);
  EXPECT_EQ(smaller->stats().blocks_held, 2u);
  EXPECT_TRUE(smaller->contains(key_of(4), tokens_of(4)));
  EXPECT_FALSE(smaller->contains(key_of(2), tokens_of(2)));
}

TEST(DiskTier, CorruptOrForeignFilesAreNeverBelieved) {
  TempDir dir;
  Logged logged;
  {
    auto disk = open_disk(dir.file("cache"), 10 * file_bytes(0), logged);
    for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(disk->store(key_of(i), tokens_of(i), bytes_of(i)));
    disk->flush();
    // Block 0 truncated, block 1 with a flipped header byte, block 2 with a flipped payload bit.
    std::filesystem::resize_file(disk->block_path(key_of(0)), file_bytes(0) - 10);
    for (auto [i, offset] : {std::pair<uint64_t, size_t>{1, 30}, {2, file_bytes(2) - 1}}) {
      std::fstream f(disk->block_path(key_of(i)), std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(static_cast<std::streamoff>(offset));
      char c = 0;
      f.read(&c, 1);
      c ^= 0x04;
      f.seekp(static_cast<std::streamoff>(offset));
      f.write(&c, 1);
    }
    std::ofstream(disk->block_path(key_of(0)) + ".tmp7") << "a write that never finished";
  }
  auto disk = open_disk(dir.file("cache"), 10 * file_bytes(0), logged);
  EXPECT_TRUE(logged.has("bytes where the header promises")) << "the truncated file";
  EXPECT_TRUE(logged.has("header's checksum fails"));
  EXPECT_FALSE(disk->contains(key_of(0), tokens_of(0)));
  EXPECT_FALSE(disk->contains(key_of(1), tokens_of(1)));
  EXPECT_FALSE(std::filesystem::exists(disk->block_path(key_of(1))));
  EXPECT_FALSE(std::filesystem::exists(disk->block_path(key_of(0)) + ".tmp7"));
  // The flipped payload bit is found when the block is read: dropped, logged, counted.
  ASSERT_TRUE(disk->contains(key_of(2), tokens_of(2)));
  std::vector<std::byte> out(kBlockBytes);
  const Status bad = disk->load(key_of(2), out);
  EXPECT_EQ(bad.code(), ErrorCode::kCorrupt);
  EXPECT_NE(bad.message().find("checksum"), std::string::npos) << bad.message();
  EXPECT_FALSE(disk->contains(key_of(2), tokens_of(2)));
  EXPECT_EQ(disk->stats().load_failures, 1u);
  ASSERT_TRUE(disk->load(key_of(3), out));
  EXPECT_EQ(out, bytes_of(3));

  // A directory that holds other things is not taken over.
  std::filesystem::create_directories(dir.file("photos"));
  std::ofstream(dir.file("photos/cat.jpg")) << "not a cache";
  auto foreign = DiskTier::open({.directory = dir.file("photos"), .capacity_bytes = 1 << 20, .format = kFormat});
  ASSERT_FALSE(foreign);
  EXPECT_NE(foreign.status().message().find("is not a kvserve KV cache"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(dir.file("photos/cat.jpg")));
}

TEST(DiskTier, InjectedFaultsLoseTheBlockNeverTheTruth) {
  TempDir dir;
  Logged logged;
  auto io = std::make_shared<FaultyIo>();
  auto disk = open_disk(dir.file("cache"), 20 * file_bytes(0), logged, io);
  std::vector<std::byte> out(kBlockBytes);
  for (auto fault : {FaultyIo::Fault::kWriteError, FaultyIo::Fault::kDiskFull}) {
    io->fault = fault;
    const uint64_t i = fault == FaultyIo::Fault::kWriteError ? 0 : 1;
    ASSERT_TRUE(disk->store(key_of(i), tokens_of(i), bytes_of(i)));  // queued
    disk->flush();
    EXPECT_FALSE(disk->contains(key_of(i), tokens_of(i))) << "a block not written is not held";
    EXPECT_FALSE(std::filesystem::exists(disk->block_path(key_of(i))));
  }
  EXPECT_EQ(disk->stats().rejected, 2u);
  EXPECT_TRUE(logged.has("No space left on device"));
  io->fault = FaultyIo::Fault::kNone;
  for (uint64_t i = 2; i < 6; ++i) ASSERT_TRUE(disk->store(key_of(i), tokens_of(i), bytes_of(i)));
  disk->flush();
  uint64_t i = 2;
  for (auto fault : {FaultyIo::Fault::kReadError, FaultyIo::Fault::kShortRead, FaultyIo::Fault::kFlipBit}) {
    io->fault = fault;
    const Status s = disk->load(key_of(i), out);
    EXPECT_FALSE(s) << static_cast<int>(fault);
    EXPECT_FALSE(disk->contains(key_of(i), tokens_of(i)));
    ++i;
  }
  io->fault = FaultyIo::Fault::kFlipBit;  // the same through a prefetch
  ASSERT_TRUE(disk->prefetch(key_of(5), tokens_of(5)));
  disk->flush();
  const auto loaded = disk->take_loaded();
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_FALSE(loaded[0].status);
  EXPECT_TRUE(loaded[0].bytes.empty());
  EXPECT_EQ(disk->stats().load_failures, 4u);
  EXPECT_EQ(disk->stats().blocks_held, 0u);
  EXPECT_TRUE(disk->check_invariants());
}

}  // namespace
}  // namespace kvs
