#include "kv/kv_layer_groups.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace kvs {

std::vector<uint32_t> interleaved_windows(size_t num_layers, size_t window, size_t pattern) {
  std::vector<uint32_t> windows(num_layers, static_cast<uint32_t>(window));
  for (size_t l = pattern - 1; l < num_layers; l += pattern) windows[l] = 0;
  return windows;
}

KvLayerGroups KvLayerGroups::make(size_t num_layers, std::span<const uint32_t> model_windows, size_t forced_window,
                                  bool hybrid) {
  KvLayerGroups g;
  g.attention_window.resize(num_layers);
  for (size_t l = 0; l < num_layers; ++l) {
    const size_t model = model_windows.empty() ? 0 : model_windows[l];
    g.attention_window[l] = static_cast<uint32_t>(narrower_window(model, forced_window));
  }
  std::map<size_t, std::vector<uint32_t>> by_window;  // 0 (global) sorts first
  if (hybrid) {
    for (size_t l = 0; l < num_layers; ++l) by_window[g.attention_window[l]].push_back(static_cast<uint32_t>(l));
  } else {
    // One group: it may let go only of what no layer reads, so its window is the widest, or none if any is global.
    const bool any_global = std::ranges::find(g.attention_window, 0u) != g.attention_window.end();
    const size_t window = any_global ? 0 : *std::ranges::max_element(g.attention_window);
    for (size_t l = 0; l < num_layers; ++l) by_window[window].push_back(static_cast<uint32_t>(l));
  }
  g.group_of.resize(num_layers);
  g.index_in_group.resize(num_layers);
  for (auto& [window, layers] : by_window) {
    for (size_t i = 0; i < layers.size(); ++i) {
      g.group_of[layers[i]] = static_cast<uint32_t>(g.groups.size());
      g.index_in_group[layers[i]] = static_cast<uint32_t>(i);
    }
    g.groups.push_back({.window = window, .layers = std::move(layers)});
  }
  return g;
}

std::string KvLayerGroups::describe() const {
  std::string out;
  for (const KvLayerGroup& group : groups) {
    if (!out.empty()) out += " + ";
    out += group.window == 0 ? fmt::format("{} global layers", group.layers.size())
                             : fmt::format("{} layers of window {}", group.layers.size(), group.window);
  }
  return out;
}

}  // namespace kvs
