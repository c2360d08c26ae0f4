// GGUF v3 files: metadata key/values and tensor descriptors, read through a memory map, and a
// writer. Spec: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "core/status.h"

namespace kvs::gguf {

enum class ValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
std::string_view value_type_name(ValueType type);

struct Value;
struct Array {
  ValueType element_type = ValueType::kUint8;
  std::vector<Value> items;
  bool operator==(const Array&) const = default;
};
// One metadata value; `data` holds the C++ type matching `type` (Array for kArray).
struct Value {
  using Data = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool, std::string, Array,
                            uint64_t, int64_t, double>;
  ValueType type = ValueType::kUint8;
  Data data;

  // Wraps any C++ value of Data's alternatives; the variant index equals the GGUF type id.
  template <class T>
  static Value of(T v) {
    Value value;
    value.data = Data(std::move(v));
    value.type = static_cast<ValueType>(value.data.index());
    return value;
  }
  static Value of(const char* s) { return of(std::string(s)); }

  std::optional<int64_t> as_int() const;   // any integer type (uint64 above INT64_MAX: nullopt)
  std::optional<double> as_float() const;  // float32/float64, or an integer
  std::optional<bool> as_bool() const;
  const std::string* as_string() const;
  const Array* as_array() const;
  bool operator==(const Value&) const = default;  // same type and same value (floats compare as floats)
};

struct TensorInfo {
  std::string name;
  DType type = DType::kF32;
  std::vector<uint64_t> dims;       // ggml order: dims[0] is the innermost (contiguous) dimension
  uint64_t offset = 0;              // from the start of the tensor data section
  std::span<const std::byte> data;  // into the mapped file
  uint64_t num_elements() const;
};

// Bytes of a tensor of `type` with `dims` (ggml order). Fails unless 1 <= dims.size() <= 4, every dim
// is non-zero, dims[0] is a multiple of the type's block size and the size fits in 64 bits.
Expected<uint64_t> tensor_data_bytes(DType type, std::span<const uint64_t> dims);

inline constexpr uint32_t kDefaultAlignment = 32;
inline constexpr size_t kMaxDims = 4;

class File {
 public:
  // Validates the whole header: magic, version 3 (2 accepted), every value type, tensor types,
  // that each tensor lies within the file, and alignment. Errors name the file, offset and value.
  static Expected<File> open(const std::string& path);

  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }      // general.alignment, 32 by default
  uint64_t data_offset() const { return data_offset_; }  // file offset of the tensor data section
  const std::string& path() const { return map_->path(); }
  std::span<const std::byte> bytes() const { return map_->bytes(); }  // the whole file, mapped
  // Drops the process's pages of file bytes that were copied elsewhere (MappedFile::release).
  void release(std::span<const std::byte> bytes) const { map_->release(bytes); }
  const std::map<std::string, Value, std::less<>>& metadata() const { return metadata_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }

  const Value* find(std::string_view key) const;
  const TensorInfo* find_tensor(std::string_view name) const;
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  const Array* get_array(std::string_view key) const;

 private:
  File() = default;
  std::unique_ptr<MappedFile> map_;
  friend class FileParser;  // gguf_reader.cpp
  uint32_t version_ = 0;
  uint32_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::map<std::string, Value, std::less<>> metadata_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

// Builds a GGUF v3 file in memory order: metadata in insertion order, tensors aligned to
// `general.alignment` (32 unless set). Setting a key again replaces its value in place.
// Tensors come either as bytes held by the Writer, or as a fill callback that write() calls with a
// scratch buffer of exactly the tensor's size, so large models stream through one buffer.
class Writer {
 public:
  // Writes exactly out.size() bytes of one tensor into `out`.
  using TensorFill = std::function<Status(std::span<std::byte> out)>;

  void set(std::string key, Value value);
  void set_u32(std::string key, uint32_t v);
  void set_i32(std::string key, int32_t v);
  void set_u64(std::string key, uint64_t v);
  void set_f32(std::string key, float v);
  void set_bool(std::string key, bool v);
  void set_string(std::string key, std::string v);
  void set_string_array(std::string key, std::vector<std::string> v);
  void set_f32_array(std::string key, std::span<const float> v);
  void set_i32_array(std::string key, std::span<const int32_t> v);
  // Removes every key that starts with `prefix`.
  void erase_keys_with_prefix(std::string_view prefix);

  // dims in ggml order (dims[0] innermost); bytes must match the type and dims exactly.
  Status add_tensor(std::string name, DType type, std::vector<uint64_t> dims, std::vector<std::byte> bytes);
  // Like add_tensor, but the bytes are produced by `fill` while write() runs.
  Status add_tensor_streamed(std::string name, DType type, std::vector<uint64_t> dims, TensorFill fill);
  // Writes to `path`.tmp and renames it to `path`, so a failed write leaves no partial file.
  Status write(const std::string& path) const;

  size_t num_tensors() const { return tensors_.size(); }

 private:
  std::vector<std::pair<std::string, Value>> metadata_;
  struct PendingTensor {
    std::string name;
    DType type;
    std::vector<uint64_t> dims;
    uint64_t size = 0;  // bytes
    std::vector<std::byte> bytes;
    TensorFill fill;  // set instead of bytes for streamed tensors
  };
  Status check_new_tensor(const std::string& name, DType type, const std::vector<uint64_t>& dims, uint64_t* size) const;
  Status write_to(std::FILE* out, const std::string& path) const;
  std::vector<PendingTensor> tensors_;
};

}  // namespace kvs::gguf
