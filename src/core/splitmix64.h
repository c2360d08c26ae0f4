// splitmix64 (Steele, Lea and Flood's SplittableRandom; Vigna's constants): a tiny 64-bit generator whose stream is
// the same on every platform for a seed. Synthetic weights, sampling, random request seeds and tool call ids draw
// from it; each keeps its own state, advanced by kSplitmix64Gamma per draw.
#pragma once

#include <cstdint>

namespace kvs {

inline constexpr uint64_t kSplitmix64Gamma = 0x9e3779b97f4a7c15ull;

// The output for an advanced state.
inline uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Advances `state` and returns the next draw.
inline uint64_t splitmix64(uint64_t& state) { return splitmix64_mix(state += kSplitmix64Gamma); }

}  // namespace kvs
