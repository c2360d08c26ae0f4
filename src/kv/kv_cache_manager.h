// The facade the engine uses: a block pool, one block table per sequence and the prefix index:
// accounting only. The K/V bytes (a KvStorage of config().spec and num_blocks) belong to whoever
// computes, so the scheduler and the paging simulation run without them. Blocks are allocated on
// demand as a sequence grows and all released the moment it is freed, tail first. Running out of
// blocks is an expected outcome the caller acts on (queue, preempt), never a crash.
//
// Prefix caching: when a block fills, it is hashed (chained from its parent, in the sequence's
// namespace) and indexed; a sequence that begins looks up its tokens and takes every cached full
// block (shared, read-only: it writes only past them) and copies the matching slots of the best
// partial match into a block of its own (the engine performs the copies: pending_copies(); with keys
// quantized per channel, whole row groups only, so that a hit equals a miss bit for bit). Released
// blocks keep their content until the pool needs them, least recently released first.
//
// Parallel sampling: fork() gives a new sequence every block of another (n samples of one prompt
// hold the prompt once). A forked partial last block is shared until a holder first writes into it:
// that holder gets a private copy (copy on write, through pending_copies()); the last holder writes
// in place, so n forks of a prompt cost n - 1 block copies.
//
// Attention types (kv/attention_types/): what the group's layers read, full attention or a sliding window (a layer
// window), decides which prefix match a sequence can take and which of its blocks it lets go. A block wholly before
// the window of a sequence's next token (the layer window, narrowed by the sequence's own) is let go the moment the
// window passes it (its table keeps a hole, kNullBlock, in its place). A full block so released stays indexed, as
// any released block, until the pool needs it; a prefix match takes only the matched blocks that intersect the
// window of the first token it leaves to compute (the rest are holes).
//
// Eviction policies (kv/policies/): a sequence begun with `evicts` keeps at most a budget of tokens; its
// slots hold the kept ones in order (compacted by the engine), evict() forgets the rest and returns the
// blocks past them. Its blocks are its own: never shared, indexed or forked.
//
// Key tails (keys quantized per channel, kv/key_tail_table.h): the block where a sequence's row group
// is still filling, after a reserve and until the commit that completes the group, holds a key tail;
// the tail goes back when the group completes or the block is released. A copy on write copies the
// tail too. Running out of tails is running out of memory, as for blocks.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/ids.h"
#include "core/status.h"
#include "kv/attention_types/kv_attention_type.h"
#include "kv/block_pool.h"
#include "kv/block_table.h"
#include "kv/key_tail_table.h"
#include "kv/kv_format.h"
#include "kv/kv_layer_groups.h"
#include "kv/kv_sizing.h"
#include "kv/prefix_hash.h"
#include "kv/prefix_index.h"
#include "kv/prefix_match.h"
#include "kv/tiers/kv_tier_stack.h"

namespace kvs {

struct KvCacheConfig {
  KvCacheSpec spec;                       // model shape, element types, block size
  size_t num_blocks = 0;                  // pool size (from --kv-blocks, or a byte budget via kv_blocks_in_budget)
  bool prefix_caching = true;             // --no-prefix-cache turns it off
  std::string model_identity = {};        // part of every prefix hash: caches of different models never match
  BlockHasher hasher = chain_block_hash;  // a test may force collisions
  // Keys quantized per channel: key tails for filling groups, kv_key_tails_for_sequences of the most
  // sequences held at once (at least 1; ignored for other formats).
  size_t num_key_tails = 0;
  // > 0: the group's layers read a sliding window of this many tokens (the next token at position p reads
  // (p - layer_window, p]); 0: full attention (kv/attention_types/).
  size_t layer_window = 0;

  Status validate() const;
};

struct KvUsage {
  size_t blocks_total = 0;
  size_t blocks_used = 0;
  size_t blocks_used_peak = 0;    // the most blocks in use at once since the start
  size_t blocks_cached_idle = 0;  // free blocks that still hold cached content
  size_t key_tails_total = 0;
  size_t key_tails_used = 0;
  size_t bytes_total = 0;  // what the pool and the key tails allocated
  size_t bytes_used = 0;   // blocks_used x bytes per block
};

struct PrefixCacheStats {
  uint64_t queried_tokens = 0;   // tokens of sequences that began with a lookup
  uint64_t hit_tokens = 0;       // of those, tokens whose K/V came from the cache (shared, copied or loaded)
  uint64_t copied_tokens = 0;    // of the hits, tokens copied from a partial match
  uint64_t tier_hit_tokens = 0;  // of the hits, tokens loaded from an offload tier
  uint64_t demoted_blocks = 0;   // cached blocks whose eviction moved them down a tier
  uint64_t evictions = 0;        // cached blocks taken for new content
  uint64_t collisions = 0;       // hash matches whose content differed (treated as misses)
};

// A block's bytes moving between the pool and its offload tiers (kv/tiers/kv_tier_stack.h), for the
// engine to perform in order before the next forward pass: a demotion reads a block the pool just took
// for new content (its old content, under `hash`) into the tiers; a keep reads a block of a sequence
// swapped out (its full blocks, and its partial last one with the tokens it holds) into the host tier,
// pinned there until the sequence begins again or is freed; a load writes a block the host tier holds into
// a block a sequence begun from it (pinned in the host tier until transfers_done()). In order, because a
// block can be demoted, loaded and demoted again within one step.
struct KvBlockTransfer {
  enum class Kind { kDemote, kKeep, kLoad } kind = Kind::kDemote;
  BlockId block = kNullBlock;
  BlockHash hash = {};
  std::vector<TokenId> tokens = {};
  bool ahead = false;  // a load of load_prefix(): no sequence reads the block this step (kv_ops.h KvHostToBlock)
};

// Copy slots [0, num_slots) of every layer's K/V from `source` into `destination` (a new block of the
// sequence that matched), before the next forward pass reads them.
struct KvBlockCopy {
  BlockId source;
  BlockId destination;
  size_t num_slots = 0;
  uint32_t source_tail = kNoKeyTail;  // a copy on write of a block with a key tail: copy it too
  uint32_t destination_tail = kNoKeyTail;
};

class KvCacheManager {
 public:
  static Expected<std::unique_ptr<KvCacheManager>> create(const KvCacheConfig& config);

  const KvCacheConfig& config() const { return config_; }
  size_t block_size() const { return config_.spec.block_size; }

  // The namespace of a cache salt (interned): sequences of different namespaces never share blocks.
  uint32_t name_space(std::string_view cache_salt);
  // The longest cached prefix of `tokens` in `name_space`: whole blocks confirmed by their tokens,
  // then the best partial match; at most tokens.size() - 1 tokens (the last is always computed, for
  // its logits) and at most `max_tokens`. Empty when prefix caching is off. Under a layer window: the longest
  // whose window blocks are cached (blocks before the window are holes in the match).
  PrefixMatch match_prefix(std::span<const TokenId> tokens, uint32_t name_space, size_t max_tokens = SIZE_MAX);
  // Starts `seq` (which holds no blocks) from `match`, a lookup of `tokens` made just now, with room
  // for `n` more tokens. False, with nothing changed, when the pool cannot supply the blocks (cached
  // blocks count as free, except those the match itself takes). sequence_window > 0: the sequence's own sliding
  // window (a request's), where narrower than the layer window: its blocks before it are let go too.
  // evicts: the sequence is under an eviction policy (evict()): it begins with no match and no window, and
  // its blocks are never indexed (no other sequence may read blocks its compactions rewrite), nor forked.
  [[nodiscard]] bool begin(SeqId seq, std::span<const TokenId> tokens, uint32_t name_space, const PrefixMatch& match,
                           size_t n, size_t sequence_window = 0, bool evicts = false);
  // Would begin(..., match, n, sequence_window) succeed right now?
  bool can_begin(const PrefixMatch& match, size_t n, size_t sequence_window = 0) const;
  // Starts `child` (which holds no blocks) as a copy of `parent`: the same tokens and blocks, each
  // shared. `parent` must hold no room past its tokens (it was just committed).
  void fork(SeqId parent, SeqId child);
  // Makes room for `n` more tokens of `seq` (created on first use, in namespace 0), allocating blocks
  // as needed, and a private copy of a shared partial last block (copy on write). Returns false, with
  // nothing changed, when the pool cannot supply them.
  [[nodiscard]] bool reserve(SeqId seq, size_t n);
  // Would reserve(seq, n) succeed right now?
  bool can_reserve(SeqId seq, size_t n) const;
  // Slot for the token at `position` of `seq`; its block must be reserved.
  KvSlot slot_of(SeqId seq, size_t position) const;
  // Records that `tokens` were written as the next positions of `seq`; blocks they fill are indexed.
  void commit(SeqId seq, std::span<const TokenId> tokens);
  // Releases every block of `seq` at once, the last block first, and forgets it (a partial last block
  // stays findable for partial matches until evicted), and what a swap kept of it. Unknown ids are ignored.
  void free(SeqId seq);
  // Swap preemption (engine/preemption.h): free(seq), after asking for its blocks to be kept in the host tier
  // (kKeep transfers: its full blocks and its partial last one, in whole copy units), pinned until it begins
  // again (its prefix match then finds them) or is freed. False, with nothing done, without tiers, under an
  // eviction policy, with no token computed, or when the host tier cannot pin that many more blocks.
  [[nodiscard]] bool swap_out(SeqId seq);
  // Blocks swap_out(seq) would keep.
  size_t blocks_to_keep(SeqId seq) const;

  // Eviction (a sequence begun with evicts): its caller has compacted the K/V it keeps into its first
  // num_slots() - count slots (attention/compact_kv.h); the sequence now holds that many, and its blocks past
  // them go back to the pool at once.
  void evict(SeqId seq, size_t count);
  // Copies begin() and reserve() asked for, to be done before the next forward pass; then copies_done().
  std::span<const KvBlockCopy> pending_copies() const { return pending_copies_; }
  void copies_done();

  // Offload tiers (prefix caching on, full attention): blocks the pool evicts are demoted to them and a prefix
  // match goes on past the pool into the host tier. Not owned; set before any sequence begins.
  void attach_tiers(KvTierStack* tiers);
  KvTierStack* tiers() const { return tiers_; }
  // Transfers begin(), reserve() and allocations asked for, to be done before copies and the next forward
  // pass, in order; then transfers_done().
  std::span<const KvBlockTransfer> pending_transfers() const { return pending_transfers_; }
  void transfers_done();
  // After a KV op log failed midway (a device lost a transfer: what its blocks hold is unknown), with every sequence
  // freed and transfers_done() and copies_done() called: forgets the content of every block the pool caches (their
  // index entries dropped, nothing demoted), so that no lookup finds a block whose bytes nobody can vouch for.
  void forget_cached();
  // Brings the longest prefix of `tokens` that the pool, the host tier and the disk tier hold together up the
  // hierarchy, for a sequence that waits to begin, when some of it only the disk holds (else begin() loads what the
  // host tier holds itself, and nothing moves twice): its blocks in the host tier go into the pool as cached blocks
  // (idle, indexed, found by the next match; a kLoad transfer each, their host entries pinned until
  // transfers_done()), which frees the host tier for the next blocks, and reads of the blocks only the disk holds
  // start (as many as half the host tier stages at once). Blocks go into the pool only when the whole of `tokens`
  // could begin now (so a waiting sequence never takes blocks from the ones that run), into free blocks, the least
  // recently used cached ones first (demoted as any). Called once a step while the sequence waits: each call moves
  // the next wave.
  struct PrefixLoad {
    size_t promoted = 0;  // host tier blocks put into the pool by this call
    size_t reading = 0;   // disk reads of the prefix on the way (this call's and earlier ones')
    size_t on_disk = 0;   // blocks of the prefix below the host tier: only the disk holds them (`reading` among them)
  };
  PrefixLoad load_prefix(std::span<const TokenId> tokens, uint32_t name_space);
  // Every full block the prefix index holds (in use or idle), with its hash and tokens.
  template <typename Visit>
  void for_each_cached_full_block(Visit visit) const {
    for (uint32_t b = 0; b < pool_.num_blocks(); ++b)
      if (const auto hash = index_.full_hash(BlockId{b})) visit(BlockId{b}, *hash, index_.tokens(BlockId{b}));
  }

  bool contains(SeqId seq) const { return tables_.count(seq.value) != 0; }
  // Tokens of `seq` whose K/V are written (0 for a sequence without blocks): its one computed count.
  size_t num_tokens(SeqId seq) const;
  // Slots holding K/V (num_tokens less the evicted ones), and the evicted tokens (0 without a policy).
  size_t num_slots(SeqId seq) const;
  size_t num_evicted(SeqId seq) const;
  uint64_t num_evicted_total() const { return stats_evicted_tokens_; }  // over every sequence so far
  std::span<const TokenId> tokens(SeqId seq) const;
  std::span<const BlockId> block_table(SeqId seq) const;
  size_t num_sequences() const { return tables_.size(); }

  const BlockPool& pool() const { return pool_; }
  // [block id] -> its key tail, or kNoKeyTail: for the write path and attention.
  std::span<const uint32_t> key_tails() const { return tails_.by_block(); }
  const KeyTailTable& key_tail_table() const { return tails_; }
  const PrefixIndex& prefix_index() const { return index_; }
  KvUsage usage() const;
  PrefixCacheStats prefix_stats() const;
  uint64_t num_copy_on_write() const { return num_copy_on_write_; }  // private copies of forked blocks
  // Pool and index invariants plus: each block in tables has a ref count of at least the tables
  // holding it (and the pending copies reading it); a block in several tables is full in each (shared
  // blocks are never written, except a forked partial last block: the last block of each holder,
  // each with the same slots written, to be copied before a write); every block in use is held; each table has the
  // blocks its committed tokens need; a block holds cached content in the pool iff the index has an entry for it;
  // a block with a key tail is held, and the block where a table's group fills has one.
  Status check_invariants() const;

 private:
  explicit KvCacheManager(const KvCacheConfig& config);
  const BlockTable& table(SeqId seq) const;
  // Takes n blocks, dropping the index entries of cached blocks among them; all or nothing.
  std::optional<PinnedBlocks> allocate(size_t n);
  // Is the table's partial last block shared with another table (so a write must copy it first)?
  bool shares_partial_block(const BlockTable& table) const;
  // Gives the table `private_block` in place of its shared partial last block, copied before the next pass.
  void copy_on_write(BlockTable& table, PinnedBlocks private_block);
  // The index in a table of the block whose row group fills when `end` of its positions are written,
  // if that group waits in a key tail.
  std::optional<size_t> tail_block(size_t end) const;
  // Slots a partial match copies in multiples of: 1, or the row group of keys quantized per channel.
  size_t partial_copy_unit() const {
    return key_format_.scale_axis == KvScaleAxis::kPerChannel ? key_format_.group_size : 1;
  }
  // Key tails reserve(table, n) takes (table null: a new sequence).
  size_t tails_needed(const BlockTable* table, size_t n) const;
  // Returns the tails of those of `blocks` that nothing holds any more.
  void release_tails_of_unheld(std::span<const BlockId> blocks);
  // Hashes and indexes the table's full blocks that are not yet.
  void index_full_blocks(BlockTable& table);
  // Blocks of a sequence wholly before what a token at `position` reads, under its own window too: [0, this).
  size_t blocks_skipped(size_t position, size_t sequence_window) const {
    return attention_->blocks_skipped(position, sequence_window, block_size());
  }
  // Lets go of what swap_out() kept of `seq`.
  void release_kept(SeqId seq);
  // free() without release_kept().
  void release_table(SeqId seq);
  // The match's blocks a sequence takes: all, or under a window those its first computed token reads (holes before).
  std::vector<BlockId> blocks_taken(const PrefixMatch& match, size_t sequence_window) const;
  // Lets go of the table's blocks its next token does not read (before its window).
  void drop_skipped_blocks(BlockTable& table);
  ContentRef content_of(BlockId block) const { return {block.value, pool_.meta(block).generation}; }
  // The hash block `block` of `table` chains from: the previous block's, or the namespace's root.
  const BlockHash& parent_hash(const BlockTable& table, size_t block) const {
    return block == 0 ? roots_[table.name_space()] : table.hash(block - 1);
  }

  KvCacheConfig config_;
  std::unique_ptr<const KvAttentionType> attention_;  // of config_.layer_window
  KvTensorFormat key_format_;                         // keys (kv_format(config_.spec).k): their row groups and tails
  BlockPool pool_;                                    // declared before the tables, whose references it must outlive
  PrefixIndex index_;
  KeyTailTable tails_;
  std::unordered_map<std::string, uint32_t> name_spaces_;
  std::vector<BlockHash> roots_;  // [namespace]: the parent hash of its first blocks
  std::vector<KvBlockCopy> pending_copies_;
  std::vector<KvBlockTransfer> pending_transfers_;
  KvTierStack* tiers_ = nullptr;
  PinnedBlocks copy_sources_;  // the pending copies' sources, pinned until copies_done()
  // Blocks load_prefix() put into the pool that no sequence has begun from since: a sequence that takes one counts
  // its tokens as loaded from a tier (stats_.tier_hit_tokens); allocation forgets it.
  std::unordered_set<uint32_t> loaded_unread_;
  PrefixCacheStats stats_;
  uint64_t num_copy_on_write_ = 0;
  uint64_t stats_evicted_tokens_ = 0;
  std::unordered_map<uint64_t, BlockTable> tables_;
  std::unordered_map<uint64_t, std::vector<BlockHash>>
      kept_;  // swapped-out sequence -> its blocks kept in the host tier
};

}  // namespace kvs
