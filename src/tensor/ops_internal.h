// Per-ISA versions of the small kernels behind ops.cpp's dispatch.
#pragma once

#include <cstddef>

namespace kvs::detail {

// GELU's tanh form as x / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3): -2u = x (a + b x^2).
constexpr float kGeluA = -2.0f * 0.7978845608028654f;
constexpr float kGeluB = -2.0f * 0.7978845608028654f * 0.044715f;

float dot_f32_avx2(const float* a, const float* b, size_t n);
void axpy_f32_avx2(float a, const float* x, float* y, size_t n);
double sum_squares_avx2(const float* x, size_t n);  // accumulated in fp64 like the reference
void scale_mul_avx2(float* out, const float* x, const float* weight, float scale, size_t n);
void softmax_avx2(float* x, size_t n);
void swiglu_avx2(float* gate, const float* up, size_t n);
void geglu_avx2(float* gate, const float* up, size_t n);

float dot_f32_avx512(const float* a, const float* b, size_t n);
void axpy_f32_avx512(float a, const float* x, float* y, size_t n);
double sum_squares_avx512(const float* x, size_t n);
void scale_mul_avx512(float* out, const float* x, const float* weight, float scale, size_t n);
void softmax_avx512(float* x, size_t n);
void swiglu_avx512(float* gate, const float* up, size_t n);
void geglu_avx512(float* gate, const float* up, size_t n);

}  // namespace kvs::detail
