// One block's exact integer dot products in every lane of a packed group, per weight type: how the packed matmul
// (packed_matmul_impl.h) turns a block's quads into int32 sums, for an ISA's vector operations S (the list is in
// packed_matmul_impl.h). Internal linkage, as the kernels that include it.
//
// A quad is one vector: 4 columns of the G = S::kLanes rows of a group, as unsigned bytes u. Against 4
// activation bytes a broadcast to every lane, each row's 4 products go into that row's int32 lane:
//   VNNI:            dot = vpdpbusd(dot, u, a), starting from the block's offset correction, from the activations'
//                    offsets (-128 sum(a)): -128 sum(a) for Q8_0 and the IQ4 types (u = w + 128), -8 sum(a) for Q4_0
//                    (u = w + 8), -16 sum(a) for Q5_0 (u = w + 16), none for the types with mins (u = q);
//   AVX2, Q8_0:      w = u xor 0x80, then llama.cpp's sign trick, |w| * (a * sign(w)) with vpmaddubsw (whose
//                    int16 pair sums cannot saturate, |a| <= 127), vpmaddwd by 1 into int32;
//   IQ4_NL, IQ4_XS:  u = the grid's value of each 4-bit level, looked up 16 bytes at a time (vpshufb; w + 128 for
//                    VNNI, w for AVX2's sign trick as Q8_0);
//   AVX2, Q4_0:      vpmaddubsw(u, a) pairs (|pair| <= 2 x 15 x 127) summed in int16 over the block's 8 quads
//                    (<= 30480: no overflow), one vpmaddwd by 1, then the -8 * sum(a) correction.
//   Q4_1, Q4_K:      as Q4_0 with no correction: dot_b = sum q a over the block, q = 0..15; the mins are
//                    applied per block (Q4_1) or super-block (Q4_K) from sum(a) (= -offset / 128).
//   Q5_0, Q5_1, Q5_K: as Q4_1 with u = q (0..31: low nibble | fifth bit << 4); without VNNI each quad's
//                    vpmaddubsw pairs go straight to int32 (vpmaddwd by 1): 8 quads of 2 x 31 x 127 would
//                    overflow int16; Q5_0 ends with the -16 sum(a) correction.
//   Q6_K:            u = q (0..63: low nibble | high 2 bits << 4), one dot per 16-column group g, starting from
//                    -32 sum_g(a) (the activations' group sums); without VNNI each quad's vpmaddubsw pairs
//                    go straight to int32 (vpmaddwd by 1), 4 quads of 2 x 63 x 127 would overflow int16.
// Every path ends with the exact block dot product in each row's lane.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

#define KVS_ALWAYS_INLINE inline __attribute__((always_inline))

namespace kvs::detail {
namespace {

// The IQ4 grid (core/dtype.h) as the quads take it: signed (AVX2's sign trick) and plus 128 (vpdpbusd's unsigned side).
alignas(16) constexpr int8_t kIq4GridSigned[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                   1,    13,   25,  38,  53,  69,  89,  113};
alignas(16) constexpr uint8_t kIq4GridPlus128[16] = {1,   24,  45,  63,  79,  93,  106, 118,
                                                     129, 141, 153, 166, 181, 197, 217, 241};
static_assert([] {
  for (size_t i = 0; i < 16; ++i)
    if (kIq4GridSigned[i] != kIq4Grid[i] || kIq4GridPlus128[i] != kIq4Grid[i] + 128) return false;
  return true;
}());

// The block-dot steps of weights of type kType on S: quads() loads two quads, start() / mac() / merge() / finish()
// sum them with the activations into the exact block dot.
template <class S, DType kType>
struct PackedQuads {
  using I = typename S::I;
  static constexpr size_t G = S::kLanes;
  static constexpr bool kQ8 = kType == DType::kQ8_0;
  static constexpr bool kQ6 = kType == DType::kQ6_K;
  static constexpr bool kIq4Xs = kType == DType::kIQ4_XS;
  static constexpr bool kLookup = kType == DType::kIQ4_NL || kIq4Xs;
  static constexpr bool kSignedBytes = kQ8 || kLookup;  // quads of signed weights (u = w + 128)
  static constexpr bool kFiveBit = kType == DType::kQ5_0 || kType == DType::kQ5_1 || kType == DType::kQ5_K;
  static constexpr bool kSuperBlocks = kType == DType::kQ4_K || kType == DType::kQ5_K || kQ6 || kIq4Xs;
  static constexpr bool kKMins = kType == DType::kQ4_K || kType == DType::kQ5_K;
  static constexpr bool kBlockMins = kType == DType::kQ4_1 || kType == DType::kQ5_1;
  // The block dot's correction is offset / kOffsetDivisor (offset = -128 sum(a)) where u = w + 128 / kOffsetDivisor;
  // 0: none (u = q, the mins come later).
  static constexpr int32_t kOffsetDivisor = kSignedBytes            ? 1
                                            : kType == DType::kQ4_0 ? 16
                                            : kType == DType::kQ5_0 ? 8
                                                                    : 0;
  // 4-bit values without VNNI: int16 pair sums over a block's 8 quads (<= 8 x 2 x 15 x 127 = 30480).
  static constexpr bool kInt16Pairs = !S::kVnni && !kSignedBytes && !kFiveBit;
  static constexpr size_t kQuadBytes = 4 * G;

  // One quad's weights as the dot step takes them: u (w when !kVnni and Q8_0, with wabs = |w|).
  struct Quad {
    I u;
    I wabs;
  };

  // Quads q and q + 1 (q even) of the block at blk.
  static KVS_ALWAYS_INLINE void quads(const std::byte* blk, size_t q, Quad& even, Quad& odd) {
    if constexpr (kQ8) {
      even.u = S::load(blk + q * kQuadBytes);
      odd.u = S::load(blk + (q + 1) * kQuadBytes);
      if constexpr (!S::kVnni) {
        even.u = S::xor80(even.u);
        odd.u = S::xor80(odd.u);
        even.wabs = S::abs8(even.u);
        odd.wabs = S::abs8(odd.u);
      }
    } else {
      const I pair = S::load(blk + q / 2 * kQuadBytes);
      even.u = S::low_nibbles(pair);
      odd.u = S::low_nibbles(S::srl4(pair));
      if constexpr (kFiveBit) {
        const I hv = S::load(blk + 4 * kQuadBytes);
        even.u = S::or_(even.u, q5_high(hv, q));
        odd.u = S::or_(odd.u, q5_high(hv, q + 1));
      }
      if constexpr (kLookup) {
        const I table = S::table16(S::kVnni ? static_cast<const void*>(kIq4GridPlus128) : kIq4GridSigned);
        even.u = S::lookup16(table, even.u);
        odd.u = S::lookup16(table, odd.u);
        if constexpr (!S::kVnni) {
          even.wabs = S::abs8(even.u);
          odd.wabs = S::abs8(odd.u);
        }
      }
    }
  }
  // The 5-bit types: the fifth bits of quad q (0..7) at bit 4 of each byte, from bit q of the block's high vector. (A
  // 16-bit shift by at most 4 moves no bit across bytes into bit 4.)
  static KVS_ALWAYS_INLINE I q5_high(I hv, size_t q) {
    return S::and8(q <= 4 ? S::sll16(hv, static_cast<unsigned>(4 - q)) : S::srl16(hv, static_cast<unsigned>(q - 4)),
                   0x10);
  }

  // The dot's start: with VNNI the offset correction where the quads add u * a.
  static KVS_ALWAYS_INLINE I start(int32_t offset) {
    if constexpr (S::kVnni && kOffsetDivisor != 0) return S::set1(offset / kOffsetDivisor);
    return S::zero();
  }
  static KVS_ALWAYS_INLINE I mac(I dot, const Quad& w, I a) {
    if constexpr (S::kVnni) {
      return S::dpbusd(dot, w.u, a);
    } else if constexpr (kSignedBytes) {
      return S::add32(dot, S::madd_ones(S::maddubs(w.wabs, S::sign8(a, w.u))));
    } else if constexpr (kFiveBit) {
      return widening_mac(dot, w.u, a);
    } else {
      return S::add16(dot, S::maddubs(w.u, a));
    }
  }
  // dot + the 4-byte dots of unsigned u (values up to 63) and signed a, each quad's products widened to int32 at once
  // (the 5-bit types, Q6_K: their int16 pair sums over several quads could overflow).
  static KVS_ALWAYS_INLINE I widening_mac(I dot, I u, I a) {
    if constexpr (S::kVnni) {
      return S::dpbusd(dot, u, a);
    } else {
      return S::add32(dot, S::madd_ones(S::maddubs(u, a)));
    }
  }
  static KVS_ALWAYS_INLINE I merge(I a, I b) {
    if constexpr (kInt16Pairs) return S::add16(a, b);
    return S::add32(a, b);
  }
  // Without VNNI: int16 pairs widened, then the correction (the sign trick needs none).
  static KVS_ALWAYS_INLINE I finish(I dot, int32_t offset) {
    if constexpr (kInt16Pairs) dot = S::madd_ones(dot);
    if constexpr (!S::kVnni && !kSignedBytes && kOffsetDivisor != 0)
      dot = S::add32(dot, S::set1(offset / kOffsetDivisor));
    return dot;
  }
};

}  // namespace
}  // namespace kvs::detail
