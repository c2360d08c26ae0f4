// One value of a weight in the file's type, for the shaders that read weights as stored (get_rows.comp,
// matvec.comp): the same fp32 bits as the CPU's dequantize_row (tensor/convert.cpp, kquant.cpp,
// legacy_iq4_quant.cpp). Every rounding step is the CPU's, in its order; the products and sums are `precise`, so no
// compiler fuses one into an FMA (which rounds once where the CPU rounds twice). Vulkan rounds fp32 +, -, * and
// small int-to-float conversions correctly, as the CPU does.
//
// The includer declares, before the #include, with 8-bit storage and 8-bit arithmetic types enabled:
//   layout(constant_id = 1) const uint kType = ...;                          a DType id (core/dtype.h: ggml's)
//   layout(std430, binding = 0) readonly buffer WU8 { uint8_t w_u8[]; };   the weights as bytes
// Blocks are only 2-byte aligned in a row (Q8_0 is 34 bytes, Q4_0 18), so every field is read a byte at a time.
//
// A row of n values is n / kBlockValues blocks of kBlockBytes, back to back. F32, F16 and BF16 are "blocks" of one
// value, which the includer reads through its typed views (as_float_bf16 below); dequant is for the block types.

const uint kDTypeF32 = 0u, kDTypeF16 = 1u, kDTypeQ4_0 = 2u, kDTypeQ4_1 = 3u, kDTypeQ5_0 = 6u, kDTypeQ5_1 = 7u;
const uint kDTypeQ8_0 = 8u, kDTypeQ2_K = 10u, kDTypeQ3_K = 11u, kDTypeQ4_K = 12u, kDTypeQ5_K = 13u, kDTypeQ6_K = 14u;
const uint kDTypeIQ4_NL = 20u, kDTypeIQ4_XS = 23u, kDTypeBF16 = 30u;

// Chains of == and ?: alone (glslc 2023.2's optimizer loses spec-constant || and &&).
const uint kBlockValues = kType == kDTypeF32      ? 1u
                          : kType == kDTypeF16    ? 1u
                          : kType == kDTypeBF16   ? 1u
                          : kType == kDTypeIQ4_XS ? 256u
                          : kType == kDTypeQ2_K   ? 256u
                          : kType == kDTypeQ3_K   ? 256u
                          : kType == kDTypeQ4_K   ? 256u
                          : kType == kDTypeQ5_K   ? 256u
                          : kType == kDTypeQ6_K   ? 256u
                                                  : 32u;  // Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL
const uint kBlockBytes = kType == kDTypeF32    ? 4u
                         : kType == kDTypeF16    ? 2u
                         : kType == kDTypeBF16   ? 2u
                         : kType == kDTypeQ4_0   ? 18u
                         : kType == kDTypeQ4_1   ? 20u
                         : kType == kDTypeQ5_0   ? 22u
                         : kType == kDTypeQ5_1   ? 24u
                         : kType == kDTypeQ8_0   ? 34u
                         : kType == kDTypeIQ4_NL ? 18u
                         : kType == kDTypeIQ4_XS ? 136u
                         : kType == kDTypeQ2_K   ? 84u
                         : kType == kDTypeQ3_K   ? 110u
                         : kType == kDTypeQ4_K   ? 144u
                         : kType == kDTypeQ5_K   ? 176u
                                                 : 210u;  // Q6_K

// The 16 levels of IQ4_NL and IQ4_XS (core/dtype.h's kIq4Grid, ggml's kvalues_iq4nl).
const int kIq4Grid[16] = int[16](-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);

// ---- fields at byte offsets ----

uint u8_at(uint byte) { return uint(w_u8[byte]); }
int s8_at(uint byte) { return int(int8_t(w_u8[byte])); }
uint u16_at(uint byte) { return u8_at(byte) | (u8_at(byte + 1u) << 8); }  // little-endian
float half_at(uint byte) { return unpackHalf2x16(u16_at(byte)).x; }        // an fp16, widened exactly
float as_float_bf16(uint bits) { return uintBitsToFloat(bits << 16); }     // a bf16's 16 bits, widened exactly

// Level j (0..15) of 32 in Q4_0's nibbles at `qs` (16 bytes): values 0-15 in the low nibbles, 16-31 in the high.
uint nibble_at(uint qs, uint j) { return (u8_at(qs + j % 16u) >> (4u * (j / 16u))) & 15u; }
// Q5_0/Q5_1's fifth bit of level j at `qh` (32 bits, little-endian: bit j), in place (16 or 0).
uint fifth_bit_at(uint qh, uint j) { return ((u8_at(qh + j / 8u) >> (j % 8u)) & 1u) << 4; }

// ---- 32-value blocks: Q8_0, Q4_0, Q5_0, IQ4_NL (d q), Q4_1, Q5_1 (d q + m) ----
// Q8_0 [d | 32 x int8], Q4_0 and IQ4_NL [d | 16 B nibbles], Q5_0 [d | qh 4 B | 16 B nibbles],
// Q4_1 [d | m | 16 B nibbles], Q5_1 [d | m | qh 4 B | 16 B nibbles]; d and m fp16.
float dequant_block32(uint b, uint j) {
  const float d = half_at(b);
  if (kType == kDTypeQ8_0) return d * float(s8_at(b + 2u + j));
  if (kType == kDTypeQ4_0) return d * float(int(nibble_at(b + 2u, j)) - 8);
  if (kType == kDTypeIQ4_NL) return d * float(kIq4Grid[nibble_at(b + 2u, j)]);
  if (kType == kDTypeQ5_0) return d * float(int(nibble_at(b + 6u, j) | fifth_bit_at(b + 2u, j)) - 16);
  const float m = half_at(b + 2u);  // Q4_1, Q5_1
  const uint level = kType == kDTypeQ4_1 ? nibble_at(b + 4u, j) : nibble_at(b + 8u, j) | fifth_bit_at(b + 4u, j);
  precise float v = d * float(level) + m;
  return v;
}

// ---- IQ4_XS: 256 values [d fp16 | scales_h u16 | scales_l 4 B | qs 128 B], 8 sub-blocks of 32 on the grid ----
// Sub-block j: 6-bit ls (low 4 bits: nibble j % 2 of scales_l[j / 2]; high 2: bits 2j..2j+1 of scales_h), its 16
// bytes of qs as Q4_0's; value = (d (ls - 32)) grid[level], the scale rounded first (legacy_iq4_quant's block_ints32).
float dequant_iq4_xs(uint b, uint i) {
  const uint j = i / 32u;
  const uint ls = ((u8_at(b + 4u + j / 2u) >> (4u * (j % 2u))) & 15u) | (((u16_at(b + 2u) >> (2u * j)) & 3u) << 4);
  precise float dl = half_at(b) * float(int(ls) - 32);
  precise float v = dl * float(kIq4Grid[nibble_at(b + 8u + 16u * j, i % 32u)]);
  return v;
}

// ---- K-quants: 256 values; value i = (d scale) q - (dmin min) over 16-value groups, kquant.cpp's order ----

// The three roundings of dequantize_k_row: step, offset, then step q - offset (types without a min: offset +0).
float k_value(float d, float dmin, int scale, int min, int q) {
  precise float step = d * float(scale), offset = dmin * float(min);
  precise float v = step * float(q) - offset;
  return v;
}

// Q4_K [d | dmin | scales 12 B | qs 128 B], Q5_K [d | dmin | scales 12 B | qh 32 B | qs 128 B]: 8 sub-blocks of 32
// with a 6-bit scale and min (kquant.h's k_scale_min); qs in 4 groups of 32 bytes, group g holding sub-block 2g in
// its low nibbles and 2g + 1 in its high ones; Q5_K's fifth bit of value l of sub-block j: bit j of qh[l].
float dequant_q4_q5_k(uint b, uint i) {
  const uint j = i / 32u, l = i % 32u, scales = b + 4u;
  uint sc, m;
  if (j < 4u) {
    sc = u8_at(scales + j) & 63u;
    m = u8_at(scales + j + 4u) & 63u;
  } else {
    sc = (u8_at(scales + j + 4u) & 15u) | ((u8_at(scales + j - 4u) >> 6) << 4);
    m = (u8_at(scales + j + 4u) >> 4) | ((u8_at(scales + j) >> 6) << 4);
  }
  const uint qs = b + (kType == kDTypeQ5_K ? 48u : 16u);
  uint q = (u8_at(qs + 32u * (j / 2u) + l) >> (4u * (j % 2u))) & 15u;
  if (kType == kDTypeQ5_K) q |= ((u8_at(b + 16u + l) >> j) & 1u) << 4;
  return k_value(half_at(b), half_at(b + 2u), int(sc), int(m), int(q));
}

// Q6_K [ql 128 B | qh 64 B | scales 16 x int8 | d]: value l (l < 32) of quarter k of half h is the low (k < 2) or
// high nibble of ql[64 h + 32 (k % 2) + l] with bits 2k..2k+1 of qh[32 h + l] on top, minus 32; scale scales[i / 16].
float dequant_q6_k(uint b, uint i) {
  const uint h = i / 128u, k = (i % 128u) / 32u, l = i % 32u;
  const uint low = (u8_at(b + 64u * h + 32u * (k % 2u) + l) >> (4u * (k / 2u))) & 15u;
  const uint high = (u8_at(b + 128u + 32u * h + l) >> (2u * k)) & 3u;
  return k_value(half_at(b + 208u), 0.0, s8_at(b + 192u + i / 16u), 0, int(low | (high << 4)) - 32);
}

// Q3_K [hmask 32 B | qs 64 B | scales 12 B | d]: value l of 32-value group j of half h is bits 2j..2j+1 of
// qs[32 h + l], minus 4 unless bit 4h + j of hmask[l] is set. Group g = i / 16's 6-bit raw scale (kquant.h's
// q3_k_raw_scale; the scale is raw - 32): low 4 bits from nibble g / 8 of scales[g % 4 + 4 ((g / 4) % 2)], high 2
// from bits 2 (g / 4).. of scales[8 + g % 4].
float dequant_q3_k(uint b, uint i) {
  const uint h = i / 128u, j = (i % 128u) / 32u, l = i % 32u, g = i / 16u, s = b + 96u;
  const uint low = (u8_at(b + 32u + 32u * h + l) >> (2u * j)) & 3u;
  const bool high = ((u8_at(b + l) >> (4u * h + j)) & 1u) != 0u;
  const uint raw = ((u8_at(s + g % 4u + 4u * ((g / 4u) % 2u)) >> (4u * (g / 8u))) & 15u) |
                   (((u8_at(s + 8u + g % 4u) >> (2u * (g / 4u))) & 3u) << 4);
  return k_value(half_at(b + 108u), 0.0, int(raw) - 32, 0, int(low) - (high ? 0 : 4));
}

// Q2_K [scales 16 B | qs 64 B | d | dmin]: value l of group j of half h is bits 2j..2j+1 of qs[32 h + l]; group
// i / 16's scale is the low nibble of scales[i / 16], its min the high one.
float dequant_q2_k(uint b, uint i) {
  const uint h = i / 128u, j = (i % 128u) / 32u, l = i % 32u, packed = u8_at(b + i / 16u);
  const uint q = (u8_at(b + 16u + 32u * h + l) >> (2u * j)) & 3u;
  return k_value(half_at(b + 80u), half_at(b + 82u), int(packed & 15u), int(packed >> 4), int(q));
}

// Value i (0 <= i < kBlockValues) of the block of kType at byte block_byte; not for F32, F16, BF16.
float dequant(uint block_byte, uint i) {
  if (kType == kDTypeIQ4_XS) return dequant_iq4_xs(block_byte, i);
  if (kType == kDTypeQ4_K || kType == kDTypeQ5_K) return dequant_q4_q5_k(block_byte, i);
  if (kType == kDTypeQ6_K) return dequant_q6_k(block_byte, i);
  if (kType == kDTypeQ3_K) return dequant_q3_k(block_byte, i);
  if (kType == kDTypeQ2_K) return dequant_q2_k(block_byte, i);
  return dequant_block32(block_byte, i);
}
