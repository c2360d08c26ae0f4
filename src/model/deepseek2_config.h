// DeepSeek-V2's hyper-parameters as llama.cpp's converter writes them (GGUF architecture deepseek2): the latent
// attention's ranks and head widths (both the older files with one attn_kv_b and the newer ones with attn_k_b and
// attn_v_b, whose key_length/value_length describe the absorbed form and key_length_mla/value_length_mla the heads),
// YaRN RoPE scaling, and the mixture of experts.
#pragma once

#include "core/status.h"
#include "gguf/gguf.h"
#include "model/model_config.h"

namespace kvs {

// Fills c's MLA, MoE and YaRN fields (and the head widths the MLA heads have) from `file`, whose common fields
// (layers, dim, heads, ffn, context, rope dimension and base) are already read.
Status read_deepseek2(const gguf::File& file, ModelConfig& c);

// DeepSeek's attention-score multiplier under YaRN: mscale^2 / sqrt(head_dim), mscale = 1 + log_multiplier x
// ln(1 / freq_scale) (1 without YaRN).
float yarn_attention_scale(const ModelConfig& c);

}  // namespace kvs
