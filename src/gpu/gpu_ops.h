// The forward pass's operations on the GPU, one dispatch each, for the shaders' tests against their CPU twins and
// the pieces the GPU forward records (issue 41). Buffers hold fp32 activations; weights stay in the file's type.
#pragma once

#include <initializer_list>
#include <map>
#include <memory>
#include <string_view>
#include <tuple>

#include "core/dtype.h"
#include "core/kv_dtype.h"
#include "gpu/compute_pipeline.h"
#include "gpu/gpu_recorder.h"
#include "kv/kv_format.h"
#include "model/model_config.h"

namespace kvs {

class GpuOps {
 public:
  static constexpr uint32_t kNormWorkgroup = 256;
  static constexpr uint32_t kMatvecWorkgroup = 64;  // a whole number of subgroups of every device (8 to 64 lanes)
  static constexpr uint32_t kAttentionWorkgroup = 64;

  static Expected<std::unique_ptr<GpuOps>> create(VulkanContext& context);

  // Every operation below is submitted alone and waited for, unless a step is open: between begin_step() and
  // end_step() they are recorded into one submission (gpu_recorder.h), in order, each seeing the ones before; their
  // buffers must live and keep their contents until end_step() returns.
  Status begin_step() { return recorder_->begin(); }
  Status end_step() { return recorder_->submit(); }
  GpuRecorder& recorder() { return *recorder_; }

  // y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w for `rows` rows of `cols` (shaders/rmsnorm.comp); y may be x (each
  // value is written after its row's sum, by the invocation that read it): Gemma's norm of each query and key head.
  // Rows lie `stride` floats apart in x and y (0: cols): MLA's norm of the first r of each latent row.
  Status rmsnorm(GpuBuffer& x, GpuBuffer& w, GpuBuffer& y, uint32_t rows, uint32_t cols, float eps,
                 uint32_t stride = 0);
  // y[t][r] = sum_c W[r][c] x[t][c]: W [rows][cols] in `type`, x [tokens][cols], y [tokens][rows]
  // (shaders/matvec.comp). Every type the CPU loads (F32, F16, BF16 and the block types: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
  // IQ4_NL, IQ4_XS, Q2_K..Q6_K; shaders/dequant.glsl); cols must be whole blocks (kInvalidArgument). Other type ids:
  // kUnimplemented, naming the type. With out_rows (0: rows), y is [tokens][out_rows] and these rows land at
  // row_offset of each token's row: a matrix split over bindings, one part at a time.
  // x's row t lies at t x_stride + x_offset (x_stride 0: cols): one head's part of a row of heads.
  Status matvec(DType type, GpuBuffer& w, GpuBuffer& x, GpuBuffer& y, uint32_t rows, uint32_t cols, uint32_t tokens,
                uint32_t out_rows = 0, uint32_t row_offset = 0, uint32_t x_stride = 0, uint32_t x_offset = 0);
  // The experts of a mixture (shaders/matvec.comp's expert mode): w stacks experts [first_expert, first_expert +
  // experts) of `rows` x `cols` each; y [slots][rows]: row s = W[ids[s]] x[s / x_group] for the slots whose expert w
  // holds (the others are left as they are): only the chosen experts' rows are read.
  struct ExpertProduct {
    uint32_t rows = 0, cols = 0, slots = 0, x_group = 1, first_expert = 0, experts = 0;
  };
  Status expert_matvec(DType type, GpuBuffer& w, GpuBuffer& x, GpuBuffer& y, GpuBuffer& ids, const ExpertProduct& p);
  // RoPE in place over `tokens` rows of `heads` heads of `head_dim`, by cos/sin [tokens][half] (shaders/rope.comp):
  // pairs (2i, 2i + 1), or (i, i + half) when neox, from element `offset` of each head on (MLA: the RoPE part of a
  // query head after its nope part, of a latent row after its r).
  Status rope(GpuBuffer& x, GpuBuffer& cos, GpuBuffer& sin, uint32_t tokens, uint32_t heads, uint32_t head_dim,
              uint32_t half, bool neox, uint32_t offset = 0);
  // x = H x in place over `rows` rows of `width` (a power of two), H the normalized Hadamard transform, bit for bit
  // the CPU's hadamard_transform (shaders/hadamard.comp): rotated keys are written and attended in that form.
  Status hadamard(GpuBuffer& x, uint32_t rows, uint32_t width);
  // gate = silu(gate) * up over n values (shaders/glu.comp).
  Status swiglu(GpuBuffer& gate, GpuBuffer& up, uint32_t n);
  // gate = gelu(gate) * up over n values, GELU in the tanh form of the CPU's geglu (shaders/glu.comp).
  Status geglu(GpuBuffer& gate, GpuBuffer& up, uint32_t n);
  // x *= factor over n values (shaders/scale.comp): Gemma's embedding scale.
  Status scale(GpuBuffer& x, uint32_t n, float factor);
  // x[i] += y[i % period] over n values (shaders/add.comp): the residual add (period 0: n), or a bias of `period`
  // values added to every row.
  Status add(GpuBuffer& x, GpuBuffer& y, uint32_t n, uint32_t period = 0);
  // out[t] = row ids[t] of `table` [rows][cols] in `type` (any matvec reads), dequantized to the bits of the CPU's
  // dequantize_row (shaders/get_rows.comp).
  // The table may be part of one: rows first_row.. of it (`rows` of them); tokens whose ids it does not hold are left
  // as they were.
  Status get_rows(DType type, GpuBuffer& table, GpuBuffer& ids, GpuBuffer& out, uint32_t tokens, uint32_t cols,
                  uint32_t first_row = 0, uint32_t rows = 0xffffffffu);

  // Keys quantized per channel (kv/kv_format.h): a KV storage's key tails on the device and what a step does with
  // them (gpu/key_groups.h). The tails, [tail][layer][kv_head][group][width] fp16, are KvStorage's own region.
  struct KeyTails {
    GpuBuffer* tails = nullptr;
    GpuBuffer* tail_of_token = nullptr;  // kv_write: KeyGroupPlan::tail_of_token
    GpuBuffer* seals = nullptr;          // kv_write: KeyGroupPlan::seals
    uint32_t num_seals = 0;
    GpuBuffer* sequence_tails = nullptr;  // paged_attention: [sequence] (tail or 0xffffffff, first slot it holds)
    uint32_t layer = 0, num_layers = 1;
  };

  // One layer's K (or V) rows [tokens][kv_heads][format.width] stored at slots[t] of `pool` in `format`, the host's
  // KvStorage layout (kv/kv_format.h; blocks of format.rows slots): f32, f16, bf16 (round to nearest even), int8 and
  // int4 per token (the CPU's pairs and q) (shaders/kv_write.comp), or keys in int8 and int4 per channel, whose rows
  // wait in the key tails and are quantized group by group as the CPU's are (`tails` required: key_seal.comp, then
  // key_tail_write.comp). Rows come in their stored form: H k for rotated keys (hadamard()).
  Status kv_write(const KvTensorFormat& format, GpuBuffer& rows, GpuBuffer& pool, GpuBuffer& slots, uint32_t tokens,
                  uint32_t kv_heads, const KeyTails* tails = nullptr);

  struct AttentionShape {
    uint32_t heads = 0, kv_heads = 0, head_dim = 0, value_width = 0, block_size = 0;
    uint32_t max_blocks = 0;  // columns of the block-table buffer: [sequence][max_blocks], 0xffffffff a hole
    uint32_t max_slots = 0;   // columns of the scratch: [tokens][heads][max_slots] floats, >= every visible count
    float scale = 1.0f;
    uint32_t window = 0;           // the layer's sliding window (0: none): a token sees its last `window` visible slots
    uint32_t value_row_width = 0;  // elements of a stored value row, of which value_width are read (0: value_width)
    uint32_t first_token = 0;      // the call's tokens are first_token.. of q, token_info, the scratch and out
  };
  // out [tokens][heads][value_width] = attention of each token's query heads over its visible slots, read through
  // its sequence's block table (shaders/paged_attention.comp). token_info: per token 4 words, its sequence, its visible
  // slots, its sequence's own window (0: none; the narrower of it and shape.window applies) and 0.
  // key and value: the pools' formats (as kv_write takes them; their widths are head_dim and value_width); rotated
  // keys are attended by rotated queries (hadamard()). Keys per channel need `tails` (tails, sequence_tails, layer,
  // num_layers): a sequence's filling group is read from its tail.
  Status paged_attention(const KvTensorFormat& key, const KvTensorFormat& value, GpuBuffer& q, GpuBuffer& keys,
                         GpuBuffer& values, GpuBuffer& tables, GpuBuffer& token_info, GpuBuffer& scratch,
                         GpuBuffer& out, uint32_t tokens, const AttentionShape& shape, const KeyTails* tails = nullptr);

  // The keys of one layer a compaction moves, re-rotated to their new slots (shaders/key_shift.comp; the CPU's twin:
  // attention/compact_kv.h). staged: per move `staged_stride` bytes, the source row's bytes and (int8/int4) its
  // per-token scales `pair_offset` bytes on; moves: per move 4 words, the destination block, KV head, slot in block
  // and distance (old slot - new slot), move m staged at first_move + m; angles [distance][2][half]: the host's cos and
  // sin of each distance's angles. keys: that layer's pool, in `format` (keys per token, rotated or not; width at most
  // 512).
  struct KeyShift {
    GpuBuffer* staged = nullptr;
    GpuBuffer* moves = nullptr;
    GpuBuffer* angles = nullptr;
    uint32_t num_moves = 0, staged_stride = 0, pair_offset = 0, half = 0, kv_heads = 0;
    uint32_t first_move = 0;  // the staged index of moves[0]
    bool neox = false;
  };
  Status shift_keys(const KvTensorFormat& format, GpuBuffer& keys, const KeyShift& shift);

  // One sequence's cached rows of KV head `head` of one layer's pool in `format` as fp32, out [slots][width], through
  // its block table (tables[table_offset + b]), as the CPU reads them back (shaders/kv_read.comp): MLA's expanded form.
  Status kv_read(const KvTensorFormat& format, uint32_t kv_heads, uint32_t head, GpuBuffer& pool, GpuBuffer& tables,
                 uint32_t table_offset, uint32_t slots, GpuBuffer& out);

  // For each token t < tokens and head h < heads, `width` floats from src at t src.stride + h src.head_stride +
  // src.offset to dst likewise (shaders/copy.comp).
  struct Strided {
    uint32_t stride = 0, head_stride = 0, offset = 0;
  };
  Status copy_rows(GpuBuffer& src, Strided from, GpuBuffer& dst, Strided to, uint32_t tokens, uint32_t heads,
                   uint32_t width);

  // A mixture's routing (shaders/moe_route.comp, model/moe_routing.h's): logits [tokens][experts] to each token's k
  // experts and weights, ids and weights [tokens][k].
  Status moe_route(GpuBuffer& logits, GpuBuffer& ids, GpuBuffer& weights, uint32_t tokens, const MoeConfig& moe);
  // out [tokens][dim] = the shared experts' output already in out (or 0 without) + the chosen experts' outputs y
  // [tokens][k][dim] times their weights, in expert-index order (shaders/moe_combine.comp).
  Status moe_combine(GpuBuffer& out, GpuBuffer& y, GpuBuffer& ids, GpuBuffer& weights, uint32_t tokens, uint32_t dim,
                     const MoeConfig& moe);

  // H2O's attention mass of one layer (`layer` of the rows), after paged_attention() over the same scratch, token_info
  // and shape (shaders/slot_mass.comp): for each of `num_sequences` sequences (sequences: per sequence 4 words, where
  // its rows start in `mass` in (lo, hi) pairs, the slots it holds (its rows' stride), the range of token_list holding
  // its tokens), per KV head and slot, the fixed-point sum (kv/policies/slot_scores.h) of the probabilities its tokens'
  // query heads gave the slot, written to mass [layer][kv_head][slot] of the sequence's rows. max_slots: the most
  // slots a sequence holds.
  Status slot_mass(GpuBuffer& scratch, GpuBuffer& token_info, GpuBuffer& sequences, GpuBuffer& token_list,
                   GpuBuffer& mass, uint32_t num_sequences, uint32_t max_slots, const AttentionShape& shape,
                   uint32_t layer);

 private:
  explicit GpuOps(VulkanContext& context) : context_(context) {}
  VulkanContext& context_;
  static constexpr uint32_t kElementwise = 256;       // the workgroup of the one-invocation-a-value shaders
  static constexpr uint32_t kSlotMassWorkgroup = 64;  // slots of one (sequence, KV head) a workgroup
  static constexpr uint32_t kShiftWorkgroup = 32;     // moved keys a workgroup
  static constexpr uint32_t kRouteWorkgroup = 32;     // tokens a workgroup
  // One dispatch of `pipeline` over `buffers` with `push`, groups_x x groups_y workgroups, named `kind` in the
  // profile: appended to the open step, or submitted alone and waited for when none is open.
  Status dispatch(const char* kind, ComputePipeline& pipeline, std::span<GpuBuffer* const> buffers, const void* push,
                  uint32_t groups_x, uint32_t groups_y = 1);
  // kv_write of keys per channel: the rows of filling groups into their tails, then the groups the step completes.
  Status write_key_groups(const KvTensorFormat& format, GpuBuffer& rows, GpuBuffer& pool, GpuBuffer& slots,
                          uint32_t tokens, uint32_t kv_heads, const KeyTails* tails);
  static uint32_t groups_for(size_t n) { return static_cast<uint32_t>((n + kElementwise - 1) / kElementwise); }

  std::unique_ptr<GpuRecorder> recorder_;
  std::unique_ptr<ComputePipeline> rmsnorm_, rope_, rope_neox_, swiglu_, geglu_, scale_, add_, hadamard_;
  // gate = act(gate) * up by `pipeline` (swiglu_ or geglu_), named `kind`.
  Status gated(const char* kind, ComputePipeline& pipeline, GpuBuffer& gate, GpuBuffer& up, uint32_t n);
  // Per weight type (specialization 1), built on first use: each is a shader compile on the driver (an LLVM one on
  // lavapipe), too many to build eagerly for 15 types.
  std::map<DType, std::unique_ptr<ComputePipeline>> matvec_, expert_matvec_, get_rows_;
  std::map<KvDType, std::unique_ptr<ComputePipeline>> kv_write_, kv_read_;
  std::unique_ptr<ComputePipeline> key_tail_write_, slot_mass_, copy_, moe_route_, moe_combine_;
  std::map<KvDType, std::unique_ptr<ComputePipeline>> key_seal_;  // int8, int4
  // Per (element, NeoX, rotated), built on first use.
  std::map<std::tuple<KvDType, bool, bool>, std::unique_ptr<ComputePipeline>> key_shift_;
  // Per (key, value, keys per channel), built on first use.
  std::map<std::tuple<KvDType, KvDType, bool>, std::unique_ptr<ComputePipeline>> attention_;
  // The pipeline in `cache` for weight type `type` of `spirv` (built now if not yet), or kUnimplemented naming a
  // type the shaders do not read; `op` names the operation in the message.
  Expected<ComputePipeline*> weight_pipeline(std::map<DType, std::unique_ptr<ComputePipeline>>& cache, DType type,
                                             std::span<const uint32_t> spirv, uint32_t workgroup, uint32_t push_words,
                                             std::string_view op, uint32_t bindings,
                                             std::initializer_list<uint32_t> more_constants);
};

}  // namespace kvs
