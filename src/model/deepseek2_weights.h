// DeepSeek-V2's layer weights as llama.cpp's converter names them: latent attention (attn_q or attn_q_a/_norm/_b;
// attn_kv_a_mqa, attn_kv_a_norm; attn_kv_b, or attn_k_b/attn_v_b per head), attn_output, and a dense FFN (leading
// layers) or the experts (ffn_gate_inp, ffn_{gate,up,down}_exps, ffn_{gate,up,down}_shexp).
#pragma once

#include "core/status.h"
#include "gguf/gguf.h"
#include "model/decoder_weights.h"
#include "model/model_config.h"

namespace kvs {

// Loads layer `layer` into `lw`. Whichever form of the K/V up-projection the file lacks is built from the other (kv_b
// from k_b and v_b, or k_b from kv_b, whose value rows serve as v_b): the expansion reads kv_b, absorbed decode k_b and
// v_b.
Status load_deepseek2_layer(const gguf::File& file, const ModelConfig& c, size_t layer, DecoderLayerWeights& lw);

}  // namespace kvs
