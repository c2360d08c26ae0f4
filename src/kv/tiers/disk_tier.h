// The disk tier: one file per block (kv/tiers/block_file.h) in a directory of its own, under a byte
// budget, least recently used dropped first; it outlives the process, so a restarted engine with the
// same model and KV format finds its blocks again (the model is in every block's chained hash, the
// format in the key and in each file's header).
//
//   DIR/kvserve-kv-cache          marks the directory as a kvserve cache (a directory without it that
//                                 holds anything else is not used: open() says so)
//   DIR/<format>/<hash>.kvb       one block of the format with that fingerprint (16 hex digits)
//
// Writes (store) and prefetches are asynchronous, on one I/O thread that sleeps when there is nothing
// to do; reads go before writes. A store is held in memory until its file is written, so a load or a
// prefetch of it is served from there meanwhile. Every read checks the header, the tokens and the
// payload checksum: a block that fails any check (an I/O error, a short read, flipped bits) or that
// cannot be written (an I/O error, a full disk) is dropped and counted, never handed out: the caller
// recomputes it. open() forgets (and removes) files whose header is corrupt or truncated, with a log line.
//
// Thread-safe: the engine thread calls it while the I/O thread works.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "kv/tiers/block_file_io.h"
#include "kv/tiers/kv_tier.h"

namespace kvs {

using LogSink = std::function<void(const std::string&)>;
// One line to `sink`, or to stderr (prefixed "kvserve: ") when it is null.
void log_line(const LogSink& sink, const std::string& line);

struct DiskTierConfig {
  std::string directory;
  size_t capacity_bytes = 0;  // block files (headers and payloads) together
  TierFormat format = {};
  std::shared_ptr<BlockFileIo> io = {};               // null: POSIX files
  LogSink log = {};                                   // null: lines to stderr
  size_t max_queued_write_bytes = size_t{256} << 20;  // stores beyond this while the disk is behind are rejected
};

class DiskTier final : public KvTier {
 public:
  // Opens (or creates) the directory and indexes the block files of config.format found there.
  static Expected<std::unique_ptr<DiskTier>> open(DiskTierConfig config);
  // Finishes the writes queued so far (so a clean shutdown keeps them), then stops the I/O thread.
  ~DiskTier() override;

  std::string_view name() const override { return "disk"; }
  Status store(const TierBlockKey& key, std::span<const TokenId> tokens, std::span<const std::byte> bytes) override;
  bool contains(const TierBlockKey& key, std::span<const TokenId> tokens) const override;
  // Synchronous read and check (any thread).
  Status load(const TierBlockKey& key, std::span<std::byte> out) override;
  void drop(const TierBlockKey& key) override;
  TierStats stats() const override;

  // Reads a held block on the I/O thread; its result comes back through take_loaded(). False when the
  // tier does not hold it (with these tokens) or its read is already on the way.
  bool prefetch(const TierBlockKey& key, std::span<const TokenId> tokens);
  struct Loaded {
    TierBlockKey key;
    std::vector<TokenId> tokens = {};
    std::vector<std::byte> bytes = {};  // empty when the read failed (status says why)
    Status status = {};
  };
  // Prefetches finished since the last call, in the order they finished.
  std::vector<Loaded> take_loaded();
  size_t num_in_flight() const;  // prefetches not yet taken
  // Waits until a prefetch finishes (or none is on the way), at most `timeout`.
  void wait_for_loaded(std::chrono::milliseconds timeout);
  // Waits until every queued write, removal and prefetch is done.
  void flush();
  std::string block_path(const TierBlockKey& key) const;
  Status check_invariants() const;

 private:
  explicit DiskTier(DiskTierConfig config);
  enum class State { kWriting, kOnDisk };
  struct Entry {
    std::vector<TokenId> tokens;
    size_t file_bytes = 0;
    State state = State::kOnDisk;
    uint64_t generation = 0;                                  // which store wrote it: a finished write checks it
    std::shared_ptr<const std::vector<std::byte>> file = {};  // while writing: the whole file
    bool reading = false;                                     // a prefetch is on the way
    std::list<TierBlockKey>::iterator lru = {};
  };
  struct Job {
    enum class Kind { kWrite, kRemove, kRead } kind = Kind::kWrite;
    TierBlockKey key = {};
    uint64_t generation = 0;
    std::string path = {};
    std::shared_ptr<const std::vector<std::byte>> file = {};
  };

  Status scan();
  void run();  // the I/O thread
  void do_write(const Job& job);
  void do_read(const Job& job);
  // Reads and checks one block file: the payload, or why it is not to be believed.
  Expected<std::vector<std::byte>> read_block_file(const std::string& path, const TierBlockKey& key,
                                                   std::span<const TokenId> tokens);
  // Drops unpinned, unread blocks (least recently used first) until `bytes` more fit. Lock held.
  bool make_room_locked(size_t bytes);
  void forget_locked(const TierBlockKey& key, bool remove_file);
  void enqueue_locked(Job job);
  void log(const std::string& line) const;

  DiskTierConfig config_;
  std::string format_dir_;
  mutable std::mutex mutex_;
  std::condition_variable work_;       // the I/O thread waits for jobs
  std::condition_variable idle_;       // flush() waits for none
  std::condition_variable loaded_cv_;  // a prefetch finished
  std::deque<Job> reads_, writes_;
  size_t queued_write_bytes_ = 0;
  size_t busy_ = 0;  // jobs taken but not finished
  bool stopping_ = false;
  std::unordered_map<TierBlockKey, Entry, TierBlockKeyHash> entries_;
  std::list<TierBlockKey> lru_;
  size_t bytes_held_ = 0;
  uint64_t next_generation_ = 1;
  std::vector<Loaded> loaded_;
  TierStats stats_;
  std::thread thread_;  // last: started when everything it reads exists
};

}  // namespace kvs
