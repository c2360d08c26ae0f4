#include "kv/tiers/disk_tier.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "kv/tiers/block_file.h"

namespace kvs {
namespace {

constexpr const char* kManifest = "kvserve-kv-cache";
constexpr const char* kManifestText = "kvserve KV block cache, format 1: DIR/<format>/<block hash>.kvb\n";

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Expected<std::unique_ptr<DiskTier>> DiskTier::open(DiskTierConfig config) {
  if (config.directory.empty()) return Status::invalid_argument("the KV disk tier needs a directory");
  if (config.format.block_bytes == 0) return Status::invalid_argument("the KV disk tier needs a block format");
  if (!config.io) config.io = make_posix_block_file_io();
  auto listed = config.io->list(config.directory);
  if (!listed) return listed.status();
  const std::string manifest = (std::filesystem::path(config.directory) / kManifest).string();
  const bool marked = std::ranges::any_of(*listed, [&](const BlockFileEntry& f) { return f.path == manifest; });
  if (!marked && !listed->empty()) {
    return Status::invalid_argument(fmt::format(
        "{} holds {} files but is not a kvserve KV cache (no {} file in it): not used, to leave those files alone",
        config.directory, listed->size(), kManifest));
  }
  if (!marked) {
    const std::string_view text = kManifestText;
    KVS_RETURN_IF_ERROR(config.io->write_file(manifest, std::as_bytes(std::span(text.data(), text.size()))));
  }
  auto tier = std::unique_ptr<DiskTier>(new DiskTier(std::move(config)));
  KVS_RETURN_IF_ERROR(tier->scan());
  tier->thread_ = std::thread([t = tier.get()] { t->run(); });
  return tier;
}

DiskTier::DiskTier(DiskTierConfig config)
    : config_(std::move(config)),
      format_dir_(
          (std::filesystem::path(config_.directory) / fmt::format("{:016x}", config_.format.fingerprint)).string()) {
  stats_.capacity_bytes = config_.capacity_bytes;
}

DiskTier::~DiskTier() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    reads_.clear();  // nobody waits for them any more; writes are kept
  }
  work_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void log_line(const LogSink& sink, const std::string& line) {
  if (sink) {
    sink(line);
  } else {
    std::fprintf(stderr, "kvserve: %s\n", line.c_str());
  }
}

void DiskTier::log(const std::string& line) const { log_line(config_.log, line); }

std::string DiskTier::block_path(const TierBlockKey& key) const {
  return fmt::format("{}/{:016x}{:016x}.kvb", format_dir_, key.hash.high, key.hash.low);
}

Status DiskTier::scan() {
  auto listed = config_.io->list(format_dir_);
  if (!listed) return listed.status();
  std::vector<BlockFileEntry> files = std::move(*listed);
  std::ranges::sort(files,
                    [](const BlockFileEntry& a, const BlockFileEntry& b) { return a.modified_ns < b.modified_ns; });
  size_t dropped = 0;
  for (const BlockFileEntry& f : files) {
    if (f.path.find(".kvb.tmp") != std::string::npos) {  // a write that never finished
      (void)config_.io->remove(f.path);
      continue;
    }
    if (!f.path.ends_with(".kvb")) continue;
    std::vector<std::byte> fixed(kBlockFileFixedHeader);
    Status why;
    Expected<BlockFileHeader> header = Status::corrupt("unread");
    if (auto n = config_.io->read(f.path, 0, fixed); !n) {
      why = n.status();
    } else if (auto size = block_file_header_size(std::span(fixed).first(*n)); !size) {
      why = size.status();
    } else {
      std::vector<std::byte> bytes(*size);
      auto got = config_.io->read(f.path, 0, bytes);
      header = !got ? Expected<BlockFileHeader>(got.status())
                    : decode_block_file_header(std::span(bytes).first(std::min(*got, bytes.size())));
      if (!header) {
        why = header.status();
      } else if (header->key.format != config_.format.fingerprint ||
                 header->description != config_.format.description ||
                 header->payload_bytes != config_.format.block_bytes) {
        why = Status::corrupt(fmt::format("a block of another format ({})", header->description));
      } else if (f.size != header->header_bytes + header->payload_bytes) {
        why = Status::corrupt(
            fmt::format("{} bytes where the header promises {}", f.size, header->header_bytes + header->payload_bytes));
      } else if (f.path != block_path(header->key)) {
        why = Status::corrupt("its name is not its block's hash");
      }
    }
    if (!why.is_ok()) {
      log(fmt::format("KV disk tier: ignoring and removing {}: {}", f.path, why.message()));
      (void)config_.io->remove(f.path);
      ++dropped;
      continue;
    }
    Entry entry{.tokens = std::move(header->tokens), .file_bytes = f.size, .state = State::kOnDisk};
    entry.lru = lru_.insert(lru_.end(), header->key);  // oldest first
    if (auto [it, added] = entries_.try_emplace(header->key, std::move(entry)); added) {
      bytes_held_ += f.size;
    } else {
      lru_.pop_back();
    }
  }
  std::lock_guard lock(mutex_);
  make_room_locked(0);  // a smaller budget than last time
  if (!entries_.empty() || dropped > 0) {
    log(fmt::format("KV disk tier {}: {} blocks ({} bytes) of this format found{}", config_.directory, entries_.size(),
                    bytes_held_, dropped ? fmt::format(", {} bad files removed", dropped) : ""));
  }
  return Status::ok();
}

void DiskTier::enqueue_locked(Job job) {
  (job.kind == Job::Kind::kRead ? reads_ : writes_).push_back(std::move(job));
  work_.notify_one();
}

void DiskTier::forget_locked(const TierBlockKey& key, bool remove_file) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  bytes_held_ -= it->second.file_bytes;
  lru_.erase(it->second.lru);
  // A file still being written is removed by its write when it finds the entry gone.
  if (remove_file && it->second.state == State::kOnDisk)
    enqueue_locked({.kind = Job::Kind::kRemove, .path = block_path(key)});
  entries_.erase(it);
}

bool DiskTier::make_room_locked(size_t bytes) {
  if (bytes > config_.capacity_bytes) return false;
  for (auto it = lru_.begin(); bytes_held_ + bytes > config_.capacity_bytes && it != lru_.end();) {
    const TierBlockKey key = *it++;
    if (entries_.at(key).reading) continue;
    forget_locked(key, true);
    ++stats_.evictions;
  }
  return bytes_held_ + bytes <= config_.capacity_bytes;
}

Status DiskTier::store(const TierBlockKey& key, std::span<const TokenId> tokens, std::span<const std::byte> bytes) {
  if (bytes.size() != config_.format.block_bytes || key.format != config_.format.fingerprint) {
    return Status::invalid_argument(
        fmt::format("a block of {} bytes and format {:016x} stored in a disk tier of {}-byte "
                    "blocks of format {:016x}",
                    bytes.size(), key.format, config_.format.block_bytes, config_.format.fingerprint));
  }
  auto file =
      std::make_shared<const std::vector<std::byte>>(encode_block_file(key, config_.format.description, tokens, bytes));
  std::lock_guard lock(mutex_);
  if (auto it = entries_.find(key); it != entries_.end()) {
    if (std::ranges::equal(it->second.tokens, tokens)) {  // already held: now the most recently used
      lru_.splice(lru_.end(), lru_, it->second.lru);
      return Status::ok();
    }
    if (it->second.reading) {
      ++stats_.rejected;
      return Status::unavailable("the disk tier is reading another block under the same hash");
    }
    forget_locked(key, false);  // a collision: the new file replaces the old one in place
  }
  if (queued_write_bytes_ + file->size() > config_.max_queued_write_bytes) {
    ++stats_.rejected;
    return Status::unavailable(
        fmt::format("the disk is behind: {} bytes of blocks wait to be written already", queued_write_bytes_));
  }
  if (!make_room_locked(file->size())) {
    ++stats_.rejected;
    return Status::out_of_memory(fmt::format("the disk tier's budget of {} bytes has no room for a block file of {}",
                                             config_.capacity_bytes, file->size()));
  }
  const uint64_t generation = next_generation_++;
  Entry entry{.tokens = {tokens.begin(), tokens.end()},
              .file_bytes = file->size(),
              .state = State::kWriting,
              .generation = generation,
              .file = file};
  entry.lru = lru_.insert(lru_.end(), key);
  entries_.emplace(key, std::move(entry));
  bytes_held_ += file->size();
  queued_write_bytes_ += file->size();
  enqueue_locked(
      {.kind = Job::Kind::kWrite, .key = key, .generation = generation, .path = block_path(key), .file = file});
  return Status::ok();
}

bool DiskTier::contains(const TierBlockKey& key, std::span<const TokenId> tokens) const {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(key);
  return it != entries_.end() && std::ranges::equal(it->second.tokens, tokens);
}

Expected<std::vector<std::byte>> DiskTier::read_block_file(const std::string& path, const TierBlockKey& key,
                                                           std::span<const TokenId> tokens) {
  const size_t header_bytes =
      kBlockFileFixedHeader + config_.format.description.size() + tokens.size() * sizeof(TokenId) + 8;
  std::vector<std::byte> file(header_bytes + config_.format.block_bytes);
  auto got = config_.io->read(path, 0, file);
  if (!got) return got.status();
  if (*got != file.size())
    return Status::io_error(fmt::format("a short read of {}: {} of {} bytes", path, *got, file.size()));
  auto header = decode_block_file_header(std::span(file).first(header_bytes));
  if (!header) return header.status().with_context(path);
  if (!(header->key == key) || !std::ranges::equal(header->tokens, tokens) ||
      header->payload_bytes != config_.format.block_bytes) {
    return Status::corrupt(fmt::format("{} holds another block than its name says", path));
  }
  const std::span<const std::byte> payload = std::span(file).subspan(header_bytes);
  if (block_payload_checksum(payload) != header->payload_checksum)
    return Status::corrupt(fmt::format("{}: the payload's checksum fails (flipped bits)", path));
  return std::vector<std::byte>(payload.begin(), payload.end());
}

Status DiskTier::load(const TierBlockKey& key, std::span<std::byte> out) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<TokenId> tokens;
  std::shared_ptr<const std::vector<std::byte>> pending;
  {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(key);
    if (it == entries_.end()) return Status::not_found("the disk tier does not hold the block");
    tokens = it->second.tokens;
    pending = it->second.file;
  }
  Expected<std::vector<std::byte>> payload = Status::unavailable("unread");
  if (pending) {  // not written yet: from memory
    payload =
        std::vector<std::byte>(pending->end() - static_cast<ptrdiff_t>(config_.format.block_bytes), pending->end());
  } else {
    payload = read_block_file(block_path(key), key, tokens);
  }
  std::lock_guard lock(mutex_);
  stats_.load_seconds_sum += seconds_since(start);
  if (payload && payload->size() != out.size()) {
    payload = Status::invalid_argument(fmt::format("a block of {} bytes loaded into {}", payload->size(), out.size()));
  }
  if (!payload) {
    ++stats_.load_failures;
    if (auto it = entries_.find(key); it != entries_.end() && !it->second.reading) forget_locked(key, true);
    log(fmt::format("KV disk tier: a block failed to load and is dropped (it is recomputed): {}",
                    payload.status().message()));
    return payload.status();
  }
  std::ranges::copy(*payload, out.begin());
  ++stats_.hits;
  ++stats_.loads;
  stats_.bytes_loaded += out.size();
  if (auto it = entries_.find(key); it != entries_.end()) lru_.splice(lru_.end(), lru_, it->second.lru);
  return Status::ok();
}

void DiskTier::drop(const TierBlockKey& key) {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(key);
  if (it != entries_.end() && !it->second.reading) forget_locked(key, true);
}

bool DiskTier::prefetch(const TierBlockKey& key, std::span<const TokenId> tokens) {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end() || it->second.reading || !std::ranges::equal(it->second.tokens, tokens)) return false;
  it->second.reading = true;
  enqueue_locked({.kind = Job::Kind::kRead, .key = key, .path = block_path(key), .file = it->second.file});
  return true;
}

std::vector<DiskTier::Loaded> DiskTier::take_loaded() {
  std::lock_guard lock(mutex_);
  return std::exchange(loaded_, {});
}

size_t DiskTier::num_in_flight() const {
  std::lock_guard lock(mutex_);
  return static_cast<size_t>(std::ranges::count_if(entries_, [](const auto& e) { return e.second.reading; }));
}

void DiskTier::flush() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return reads_.empty() && writes_.empty() && busy_ == 0; });
}

void DiskTier::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    work_.wait(lock, [&] { return stopping_ || !reads_.empty() || !writes_.empty(); });
    if (reads_.empty() && writes_.empty()) return;  // stopping, and every write is done
    std::deque<Job>& queue = reads_.empty() ? writes_ : reads_;
    const Job job = std::move(queue.front());
    queue.pop_front();
    ++busy_;
    lock.unlock();
    if (job.kind == Job::Kind::kRead) {
      do_read(job);
    } else if (job.kind == Job::Kind::kWrite) {
      do_write(job);
    } else {
      if (Status s = config_.io->remove(job.path); !s) log(fmt::format("KV disk tier: {}", s.message()));
    }
    lock.lock();
    --busy_;
    if (reads_.empty() && writes_.empty() && busy_ == 0) idle_.notify_all();
  }
}

void DiskTier::do_write(const Job& job) {
  const Status written = config_.io->write_file(job.path, *job.file);
  std::lock_guard lock(mutex_);
  queued_write_bytes_ -= job.file->size();
  auto it = entries_.find(job.key);
  const bool current = it != entries_.end() && it->second.generation == job.generation;
  if (!written) {
    ++stats_.rejected;
    if (current && it->second.reading) {  // its prefetch reads the bytes in memory; a later load finds no file
      it->second.state = State::kOnDisk;
      it->second.file.reset();
    } else if (current) {
      forget_locked(job.key, false);
    }
    // One line for the first failures, then one at each power of two: a full disk is not a flood.
    if ((stats_.rejected & (stats_.rejected - 1)) == 0)
      log(fmt::format("KV disk tier: a block was not written ({} so far): {}", stats_.rejected, written.message()));
    return;
  }
  if (!current) {  // dropped (or replaced) while it was written
    enqueue_locked({.kind = Job::Kind::kRemove, .path = job.path});
    return;
  }
  it->second.state = State::kOnDisk;
  it->second.file.reset();
  ++stats_.stores;
  stats_.bytes_stored += config_.format.block_bytes;
}

void DiskTier::do_read(const Job& job) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<TokenId> tokens;
  {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(job.key);
    if (it != entries_.end()) tokens = it->second.tokens;
  }
  Expected<std::vector<std::byte>> payload = Status::not_found("the block was dropped before its read");
  if (job.file) {
    payload =
        std::vector<std::byte>(job.file->end() - static_cast<ptrdiff_t>(config_.format.block_bytes), job.file->end());
  } else if (!tokens.empty()) {
    payload = read_block_file(job.path, job.key, tokens);
  }
  std::lock_guard lock(mutex_);
  stats_.load_seconds_sum += seconds_since(start);
  auto it = entries_.find(job.key);
  if (it != entries_.end()) it->second.reading = false;
  Loaded result{.key = job.key, .tokens = std::move(tokens)};
  if (payload) {
    result.bytes = std::move(*payload);
    ++stats_.hits;
    ++stats_.loads;
    stats_.bytes_loaded += result.bytes.size();
    if (it != entries_.end()) lru_.splice(lru_.end(), lru_, it->second.lru);
  } else {
    result.status = payload.status();
    ++stats_.load_failures;
    if (it != entries_.end()) forget_locked(job.key, it->second.state == State::kOnDisk);
    log(fmt::format("KV disk tier: a block failed to load and is dropped (it is recomputed): {}",
                    payload.status().message()));
  }
  loaded_.push_back(std::move(result));
  loaded_cv_.notify_all();
}

void DiskTier::wait_for_loaded(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  loaded_cv_.wait_for(lock, timeout, [&] {
    return !loaded_.empty() || std::ranges::none_of(entries_, [](const auto& e) { return e.second.reading; });
  });
}

TierStats DiskTier::stats() const {
  std::lock_guard lock(mutex_);
  TierStats s = stats_;
  s.bytes_held = bytes_held_;
  s.blocks_held = entries_.size();
  return s;
}

Status DiskTier::check_invariants() const {
  std::lock_guard lock(mutex_);
  size_t bytes = 0;
  for (const auto& [key, entry] : entries_) {
    bytes += entry.file_bytes;
    if (!(*entry.lru == key)) return Status::corrupt("a disk tier entry's LRU position names another block");
    if ((entry.state == State::kWriting) != (entry.file != nullptr))
      return Status::corrupt("a disk tier entry being written has no bytes, or one on disk keeps them");
  }
  if (bytes != bytes_held_)
    return Status::corrupt(fmt::format("the disk tier counts {} bytes but holds {}", bytes_held_, bytes));
  if (bytes_held_ > config_.capacity_bytes)
    return Status::corrupt(
        fmt::format("the disk tier holds {} bytes over its budget of {}", bytes_held_, config_.capacity_bytes));
  if (lru_.size() != entries_.size())
    return Status::corrupt(fmt::format("{} blocks in the LRU list, {} held", lru_.size(), entries_.size()));
  return Status::ok();
}

}  // namespace kvs
