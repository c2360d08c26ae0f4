// The KV cache's element conversions and quantization as the CPU does them, bit for bit (core/half.h,
// tensor/kv_quant.cpp), for the shaders that write K/V (kv_write.comp, key_seal.comp).

uint to_fp16(float f) {
  const uint x = floatBitsToUint(f), sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) return sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u);  // inf or nan
  if (a >= 0x477ff000u) return sign | 0x7c00u;                                     // overflow to inf
  if (a < 0x38800000u) {                                                           // subnormal or zero
    if (a < 0x33000000u) return sign;
    const uint e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, shift = 126u - e;
    uint h = m >> shift;
    const uint rem = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (h & 1u) != 0u)) ++h;
    return sign | h;
  }
  const uint rounded = a + 0xfffu + ((a >> 13) & 1u) - ((127u - 15u) << 23);
  return sign | (rounded >> 13);
}

uint to_bf16(float f) {
  const uint x = floatBitsToUint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x40u;
  return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}

float fp16_value(uint h) { return unpackHalf2x16(h).x; }
// The fp16 neighbours of h towards -inf and +inf (h finite), as tensor/kv_quant.cpp's.
uint fp16_down(uint h) {
  if (h == 0u || h == 0x8000u) return 0x8001u;
  return (h & 0x8000u) != 0u ? h + 1u : h - 1u;
}
uint fp16_up(uint h) {
  if (h == 0u || h == 0x8000u) return 0x0001u;
  return (h & 0x8000u) != 0u ? h - 1u : h + 1u;
}

// a / b rounded to nearest as IEEE division is (the CPU's), where Vulkan allows 2.5 ulp: of the quotient and its
// two neighbours, the one whose exact residual |a - c b| (one fused rounding) is least.
float divide(float a, float b) {
  const float q = a / b;
  float best = q;
  precise float least = abs(fma(-q, b, a));
  for (int d = -1; d <= 1; d += 2) {
    const float c = uintBitsToFloat(uint(int(floatBitsToUint(q)) + d));
    precise float r = abs(fma(-c, b, a));
    if (r < least) {
      least = r;
      best = c;
    }
  }
  return best;
}

// tensor/kv_quant.cpp's kv_quant_pair: (scale, min) as fp16 bits, min <= lo and min + scale * levels >= hi.
uvec2 quant_pair(float lo, float hi, float levels) {
  const float kMax = 65504.0;
  lo = clamp(lo, -kMax, kMax);
  hi = clamp(hi, lo, kMax);
  uint min_bits = to_fp16(lo);
  if (fp16_value(min_bits) > lo) min_bits = fp16_down(min_bits);
  const float m = fp16_value(min_bits);
  if (hi <= m) return uvec2(0u, min_bits);
  precise float range = hi - m;
  uint scale = to_fp16(min(divide(range, levels), kMax));
  for (;;) {
    precise float top = m + fp16_value(scale) * levels;
    if (!(top < hi && fp16_value(scale) < kMax)) break;
    scale = fp16_up(scale);
  }
  return uvec2(scale, min_bits);
}

// kv_quantize: round((x - min) / scale) to nearest even, clamped to [0, levels]; 0 when the scale is 0.
uint quantize(float x, uvec2 pair, float levels) {
  const float scale = fp16_value(pair.x);
  if (!(scale > 0.0)) return 0u;
  precise float offset = x - fp16_value(pair.y);
  return uint(clamp(roundEven(divide(offset, scale)), 0.0, levels));
}
