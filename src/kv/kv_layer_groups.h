// How a model's layers split into KV groups, each with its own pool and block tables: the layers of one
// attention window (0: full attention) share a group, so a window group holds only the blocks its window
// reads while the global group holds the whole context (Gemma 3: 5 window layers to 1 global). A forced
// window (--kv-window) narrows every layer's window; with the hybrid layout off, all layers share one
// group that keeps what its widest window (or the whole context) needs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kvs {

struct KvLayerGroup {
  size_t window = 0;             // blocks before this window of the next token are let go; 0: none
  std::vector<uint32_t> layers;  // the model layers it holds, ascending; storage layer i is layers[i]
};

// The narrower of two windows, 0 meaning none (the whole context).
inline size_t narrower_window(size_t a, size_t b) { return a == 0 ? b : b == 0 ? a : (a < b ? a : b); }

// Interleaved windows as Gemma 3 has them: layer l is global (0) when l % pattern == pattern - 1, else `window`.
std::vector<uint32_t> interleaved_windows(size_t num_layers, size_t window, size_t pattern);

struct KvLayerGroups {
  std::vector<KvLayerGroup> groups;        // global (window 0) first, then windows ascending
  std::vector<uint32_t> group_of;          // [layer]
  std::vector<uint32_t> index_in_group;    // [layer]
  std::vector<uint32_t> attention_window;  // [layer]: the window its attention reads, 0: all

  // model_windows: the model's per-layer windows (empty: all global); forced_window > 0 narrows each.
  static KvLayerGroups make(size_t num_layers, std::span<const uint32_t> model_windows, size_t forced_window,
                            bool hybrid);
  size_t num_layers() const { return group_of.size(); }
  std::string describe() const;  // "4 global layers + 22 layers of window 512"
};

}  // namespace kvs
