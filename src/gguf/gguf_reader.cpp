// GGUF reader: parses and validates the header of a memory-mapped file. Every read goes through a
// bounds-checked cursor, so a malformed (or fuzzed) file yields a Status, never an out-of-bounds read.
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <type_traits>

#include "gguf/gguf.h"

namespace kvs::gguf {
namespace {

constexpr char kMagic[4] = {'G', 'G', 'U', 'F'};
constexpr int kMaxArrayDepth = 8;  // nested arrays deeper than this are rejected (bounds recursion)
// Array items across all metadata. Each costs ~48 bytes in memory, so a bogus count that the file
// could still hold (a u8 array over gigabytes of tensor data) must not turn into 48x that in RAM.
// Real vocabularies hold well under a million items.
constexpr uint64_t kMaxArrayItems = uint64_t{1} << 25;

// Smallest encoding of one value of `type`, used to reject element counts the file cannot hold
// before allocating for them.
uint64_t min_encoded_bytes(ValueType type) {
  switch (type) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kBool: return 1;
    case ValueType::kUint16:
    case ValueType::kInt16: return 2;
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kFloat32: return 4;
    case ValueType::kString:  // u64 length
    case ValueType::kUint64:
    case ValueType::kInt64:
    case ValueType::kFloat64: return 8;
    case ValueType::kArray: return 12;  // u32 element type + u64 count
  }
  return 1;
}

bool is_known_value_type(uint32_t id) { return id <= static_cast<uint32_t>(ValueType::kFloat64); }

// Descriptions of what is being read are built only when a read fails: either a string or a
// callable returning one (the hot path reads thousands of array items).
template <class Describe>
std::string describe(const Describe& what) {
  if constexpr (std::is_invocable_v<const Describe&>) {
    return what();
  } else {
    return std::string(what);
  }
}

class Cursor {
 public:
  Cursor(std::span<const std::byte> bytes, const std::string& path) : bytes_(bytes), path_(path) {}

  uint64_t offset() const { return offset_; }
  uint64_t remaining() const { return bytes_.size() - offset_; }
  uint64_t size() const { return bytes_.size(); }

  // A corrupt-file error naming the file and the current offset.
  Status error(const std::string& problem) const { return error_at(offset_, problem); }
  Status error_at(uint64_t offset, const std::string& problem) const {
    return Status::corrupt(fmt::format("'{}': {} (at offset {})", path_, problem, offset));
  }

  template <class Describe>
  Status read_bytes(void* dst, uint64_t n, const Describe& what) {
    if (n > remaining()) {
      return error(fmt::format("truncated file: {} needs {} bytes but only {} remain of {}", describe(what), n,
                               remaining(), bytes_.size()));
    }
    if (n > 0) std::memcpy(dst, bytes_.data() + offset_, n);
    offset_ += n;
    return Status::ok();
  }

  template <class T, class Describe>
  Status read(T* out, const Describe& what) {
    return read_bytes(out, sizeof(T), what);
  }

  template <class Describe>
  Status read_string(std::string* out, const Describe& what) {
    const uint64_t start = offset_;
    uint64_t length = 0;
    KVS_RETURN_IF_ERROR(read(&length, what));
    if (length > remaining()) {
      return error_at(start, fmt::format("string length {} of {} runs past the end of the file ({} bytes left)", length,
                                         describe(what), remaining()));
    }
    out->assign(reinterpret_cast<const char*>(bytes_.data() + offset_), length);
    offset_ += length;
    return Status::ok();
  }

 private:
  std::span<const std::byte> bytes_;
  const std::string& path_;
  uint64_t offset_ = 0;
};

std::string describe_magic(const std::byte* b) {
  std::string hex, text;
  for (int i = 0; i < 4; ++i) {
    const auto c = static_cast<unsigned char>(b[i]);
    hex += fmt::format("{}{:02x}", i ? " " : "", c);
    text += std::isprint(c) ? static_cast<char>(c) : '.';
  }
  return fmt::format("{} ('{}')", hex, text);
}

}  // namespace

class FileParser {
 public:
  FileParser(File& file, Cursor& cursor) : file_(file), in_(cursor) {}

  Status parse() {
    KVS_RETURN_IF_ERROR(parse_preamble());
    KVS_RETURN_IF_ERROR(parse_metadata());
    KVS_RETURN_IF_ERROR(parse_tensor_infos());
    return place_tensors();
  }

 private:
  Status parse_preamble() {
    std::byte magic[4];
    KVS_RETURN_IF_ERROR(in_.read_bytes(magic, 4, "the magic"));
    if (std::memcmp(magic, kMagic, 4) != 0) {
      return in_.error_at(
          0, fmt::format("bad magic {}, expected 47 47 55 46 ('GGUF'); not a GGUF file", describe_magic(magic)));
    }
    const uint64_t version_offset = in_.offset();
    KVS_RETURN_IF_ERROR(in_.read(&file_.version_, "the version"));
    const uint32_t v = file_.version_;
    if (v != 2 && v != 3) {
      const bool swapped = v != 0 && (v & 0xffffu) == 0;
      return in_.error_at(version_offset,
                          fmt::format("unsupported GGUF version {}{}; this reader supports versions 2 and 3", v,
                                      swapped ? " (a big-endian file?)" : ""));
    }
    KVS_RETURN_IF_ERROR(in_.read(&num_tensors_, "the tensor count"));
    KVS_RETURN_IF_ERROR(in_.read(&num_kv_, "the metadata count"));
    // Each key/value needs >= 13 bytes (key length, type, 1-byte value); each tensor info >= 32.
    if (num_kv_ > in_.remaining() / 13) {
      return in_.error(
          fmt::format("header claims {} metadata entries but only {} bytes remain", num_kv_, in_.remaining()));
    }
    if (num_tensors_ > in_.remaining() / 32) {
      return in_.error(fmt::format("header claims {} tensors but only {} bytes remain", num_tensors_, in_.remaining()));
    }
    return Status::ok();
  }

  Status parse_metadata() {
    for (uint64_t i = 0; i < num_kv_; ++i) {
      const uint64_t key_offset = in_.offset();
      std::string key;
      KVS_RETURN_IF_ERROR(in_.read_string(&key, [&] { return fmt::format("metadata key #{}", i); }));
      if (file_.metadata_.contains(key)) {
        return in_.error_at(key_offset, fmt::format("duplicate metadata key '{}'", key));
      }
      uint32_t type_id = 0;
      KVS_RETURN_IF_ERROR(in_.read(&type_id, [&] { return fmt::format("the value type of '{}'", key); }));
      Value value;
      KVS_RETURN_IF_ERROR(read_value(type_id, key, 0, &value));
      file_.metadata_.emplace(std::move(key), std::move(value));
    }
    if (const Value* a = file_.find("general.alignment")) {
      const auto* align = std::get_if<uint32_t>(&a->data);
      if (align == nullptr) {
        return in_.error(fmt::format("general.alignment must be a uint32, got a {}", value_type_name(a->type)));
      }
      if (*align == 0 || (*align & (*align - 1)) != 0) {
        return in_.error(fmt::format("general.alignment must be a power of two, got {}", *align));
      }
      file_.alignment_ = *align;
    }
    return Status::ok();
  }

  Status read_value(uint32_t type_id, const std::string& key, int depth, Value* out) {
    if (!is_known_value_type(type_id)) {
      return in_.error(fmt::format("unknown value type {} for key '{}' (known types are 0 to 12)", type_id, key));
    }
    const auto type = static_cast<ValueType>(type_id);
    out->type = type;
    const auto what = [&] { return fmt::format("the {} value of '{}'", value_type_name(type), key); };
    switch (type) {
      case ValueType::kUint8: return read_scalar<uint8_t>(out, what);
      case ValueType::kInt8: return read_scalar<int8_t>(out, what);
      case ValueType::kUint16: return read_scalar<uint16_t>(out, what);
      case ValueType::kInt16: return read_scalar<int16_t>(out, what);
      case ValueType::kUint32: return read_scalar<uint32_t>(out, what);
      case ValueType::kInt32: return read_scalar<int32_t>(out, what);
      case ValueType::kFloat32: return read_scalar<float>(out, what);
      case ValueType::kUint64: return read_scalar<uint64_t>(out, what);
      case ValueType::kInt64: return read_scalar<int64_t>(out, what);
      case ValueType::kFloat64: return read_scalar<double>(out, what);
      case ValueType::kBool: {
        uint8_t byte = 0;
        KVS_RETURN_IF_ERROR(in_.read(&byte, what));
        if (byte > 1)
          return in_.error_at(in_.offset() - 1, fmt::format("bool value {} of '{}' is not 0 or 1", byte, key));
        out->data = byte == 1;
        return Status::ok();
      }
      case ValueType::kString: {
        std::string s;
        KVS_RETURN_IF_ERROR(in_.read_string(&s, what));
        out->data = std::move(s);
        return Status::ok();
      }
      case ValueType::kArray: return read_array(key, depth, out);
    }
    return Status::ok();
  }

  template <class T, class Describe>
  Status read_scalar(Value* out, const Describe& what) {
    T v{};
    KVS_RETURN_IF_ERROR(in_.read(&v, what));
    out->data = v;
    return Status::ok();
  }

  Status read_array(const std::string& key, int depth, Value* out) {
    if (depth >= kMaxArrayDepth) {
      return in_.error(fmt::format("arrays in '{}' are nested deeper than {} levels", key, kMaxArrayDepth));
    }
    uint32_t element_id = 0;
    uint64_t count = 0;
    KVS_RETURN_IF_ERROR(in_.read(&element_id, [&] { return fmt::format("the element type of array '{}'", key); }));
    if (!is_known_value_type(element_id)) {
      return in_.error_at(in_.offset() - 4, fmt::format("unknown value type {} for the elements of array '{}' "
                                                        "(known types are 0 to 12)",
                                                        element_id, key));
    }
    const auto element_type = static_cast<ValueType>(element_id);
    KVS_RETURN_IF_ERROR(in_.read(&count, [&] { return fmt::format("the length of array '{}'", key); }));
    if (count > in_.remaining() / min_encoded_bytes(element_type)) {
      return in_.error_at(in_.offset() - 8,
                          fmt::format("array '{}' of {} {} elements runs past the end of the file ({} bytes left)", key,
                                      count, value_type_name(element_type), in_.remaining()));
    }
    Array array;
    array.element_type = element_type;
    if (count > array_items_left_) {
      return in_.error_at(in_.offset() - 8, fmt::format("array '{}' of {} elements exceeds the limit of {} array items "
                                                        "in all metadata",
                                                        key, count, kMaxArrayItems));
    }
    array_items_left_ -= count;
    array.items.resize(count);
    for (Value& item : array.items) {
      KVS_RETURN_IF_ERROR(read_value(element_id, key, depth + 1, &item));
    }
    out->data = std::move(array);
    return Status::ok();
  }

  Status parse_tensor_infos() {
    file_.tensors_.reserve(std::min<uint64_t>(num_tensors_, 4096));  // the count may still be bogus
    for (uint64_t i = 0; i < num_tensors_; ++i) {
      const uint64_t info_offset = in_.offset();
      TensorInfo t;
      KVS_RETURN_IF_ERROR(in_.read_string(&t.name, [&] { return fmt::format("the name of tensor #{}", i); }));
      if (file_.tensor_index_.contains(t.name)) {
        return in_.error_at(info_offset, fmt::format("duplicate tensor name '{}'", t.name));
      }
      uint32_t n_dims = 0;
      KVS_RETURN_IF_ERROR(in_.read(&n_dims, [&] { return fmt::format("n_dims of tensor '{}'", t.name); }));
      if (n_dims == 0 || n_dims > kMaxDims) {
        return in_.error_at(in_.offset() - 4,
                            fmt::format("tensor '{}' has n_dims {}; expected 1 to {}", t.name, n_dims, kMaxDims));
      }
      t.dims.resize(n_dims);
      for (uint32_t d = 0; d < n_dims; ++d) {
        KVS_RETURN_IF_ERROR(
            in_.read(&t.dims[d], [&] { return fmt::format("dimension {} of tensor '{}'", d, t.name); }));
      }
      uint32_t type_id = 0;
      KVS_RETURN_IF_ERROR(in_.read(&type_id, [&] { return fmt::format("the type of tensor '{}'", t.name); }));
      const auto type = dtype_from_ggml_id(type_id);
      if (!type) {
        const std::string_view name = ggml_type_name(type_id);
        return in_.error_at(
            in_.offset() - 4,
            fmt::format("tensor '{}' has unsupported type {}{}{} (supported: 0 f32, 1 f16, "
                        "2 q4_0, 3 q4_1, 6 q5_0, 7 q5_1, 8 q8_0, 10 q2_k, 11 q3_k, 12 q4_k, 13 q5_k, 14 q6_k, "
                        "20 iq4_nl, 23 iq4_xs, 30 bf16)",
                        t.name, name.empty() ? "id " : std::string(name) + " (id ", type_id, name.empty() ? "" : ")"));
      }
      t.type = *type;
      KVS_RETURN_IF_ERROR(in_.read(&t.offset, [&] { return fmt::format("the data offset of tensor '{}'", t.name); }));
      const auto bytes = tensor_data_bytes(t.type, t.dims);
      if (!bytes) {
        return in_.error_at(info_offset, fmt::format("tensor '{}' with dims [{}]: {}", t.name, fmt::join(t.dims, ", "),
                                                     bytes.status().message()));
      }
      sizes_.push_back(*bytes);
      file_.tensor_index_.emplace(t.name, file_.tensors_.size());
      file_.tensors_.push_back(std::move(t));
    }
    return Status::ok();
  }

  // The data section starts at the first aligned offset after the header; each tensor's offset is
  // relative to it and must be aligned, and its bytes must lie inside the file.
  Status place_tensors() {
    const uint64_t align = file_.alignment_;
    const uint64_t header_end = in_.offset();
    file_.data_offset_ = (header_end + align - 1) / align * align;
    const uint64_t file_size = in_.size();
    const auto all = file_.map_->bytes();
    for (size_t i = 0; i < file_.tensors_.size(); ++i) {
      TensorInfo& t = file_.tensors_[i];
      if (t.offset % align != 0) {
        return in_.error_at(header_end, fmt::format("tensor '{}' data offset {} is not a multiple of the "
                                                    "alignment {}",
                                                    t.name, t.offset, align));
      }
      const uint64_t size = sizes_[i];
      const uint64_t room = file_size > file_.data_offset_ ? file_size - file_.data_offset_ : 0;
      if (t.offset > room || size > room - t.offset) {
        return in_.error_at(header_end,
                            fmt::format("tensor '{}' data (offset {} + {} bytes, after the data section start {}) "
                                        "lies outside the file of {} bytes",
                                        t.name, t.offset, size, file_.data_offset_, file_size));
      }
      t.data = all.subspan(file_.data_offset_ + t.offset, size);
    }
    return Status::ok();
  }

  File& file_;
  Cursor& in_;
  uint64_t num_tensors_ = 0;
  uint64_t num_kv_ = 0;
  uint64_t array_items_left_ = kMaxArrayItems;
  std::vector<uint64_t> sizes_;  // bytes of each tensor, parallel to file_.tensors_
};

Expected<File> File::open(const std::string& path) {
  auto map = MappedFile::open(path);
  if (!map) return map.status();
  File file;
  file.map_ = std::make_unique<MappedFile>(std::move(map).value());
  Cursor cursor(file.map_->bytes(), file.map_->path());
  FileParser parser(file, cursor);
  KVS_RETURN_IF_ERROR(parser.parse());
  return file;
}

const Value* File::find(std::string_view key) const {
  const auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::optional<int64_t> File::get_int(std::string_view key) const {
  const Value* v = find(key);
  return v ? v->as_int() : std::nullopt;
}

std::optional<double> File::get_float(std::string_view key) const {
  const Value* v = find(key);
  return v ? v->as_float() : std::nullopt;
}

std::optional<bool> File::get_bool(std::string_view key) const {
  const Value* v = find(key);
  return v ? v->as_bool() : std::nullopt;
}

std::optional<std::string> File::get_string(std::string_view key) const {
  const Value* v = find(key);
  const std::string* s = v ? v->as_string() : nullptr;
  return s ? std::optional<std::string>(*s) : std::nullopt;
}

const Array* File::get_array(std::string_view key) const {
  const Value* v = find(key);
  return v ? v->as_array() : nullptr;
}

}  // namespace kvs::gguf
