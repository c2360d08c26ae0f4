// GGUF v3 writer: header (metadata in insertion order, tensor infos), then the tensor data, each
// tensor starting at a multiple of the alignment. Streamed tensors are filled into one reused buffer.
#include <fmt/ranges.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "gguf/gguf.h"

namespace kvs::gguf {
namespace {

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

void put_string(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out.append(s);
}

// A value's declared type must match the alternative it holds; array items must all have the
// array's element type.
Status check_value(const Value& value, const std::string& key) {
  if (static_cast<size_t>(value.type) != value.data.index()) {
    return Status::invalid_argument(fmt::format("metadata '{}' is declared {} but holds a {}", key,
                                                value_type_name(value.type),
                                                value_type_name(static_cast<ValueType>(value.data.index()))));
  }
  if (const Array* array = value.as_array()) {
    for (size_t i = 0; i < array->items.size(); ++i) {
      const Value& item = array->items[i];
      if (item.type != array->element_type) {
        return Status::invalid_argument(fmt::format("metadata '{}': item {} is a {} in an array of {}", key, i,
                                                    value_type_name(item.type), value_type_name(array->element_type)));
      }
      KVS_RETURN_IF_ERROR(check_value(item, key));
    }
  }
  return Status::ok();
}

void put_value(std::string& out, const Value& value) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          put_string(out, v);
        } else if constexpr (std::is_same_v<T, Array>) {
          put<uint32_t>(out, static_cast<uint32_t>(v.element_type));
          put<uint64_t>(out, v.items.size());
          for (const Value& item : v.items) put_value(out, item);
        } else if constexpr (std::is_same_v<T, bool>) {
          put<uint8_t>(out, v ? 1 : 0);
        } else {
          put<T>(out, v);
        }
      },
      value.data);
}

uint64_t align_up(uint64_t n, uint64_t align) { return (n + align - 1) / align * align; }

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

}  // namespace

void Writer::set(std::string key, Value value) {
  for (auto& [k, v] : metadata_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(std::move(key), std::move(value));
}

void Writer::erase_keys_with_prefix(std::string_view prefix) {
  std::erase_if(metadata_, [&](const auto& entry) { return entry.first.starts_with(prefix); });
}

void Writer::set_u32(std::string key, uint32_t v) { set(std::move(key), Value::of(v)); }
void Writer::set_i32(std::string key, int32_t v) { set(std::move(key), Value::of(v)); }
void Writer::set_u64(std::string key, uint64_t v) { set(std::move(key), Value::of(v)); }
void Writer::set_f32(std::string key, float v) { set(std::move(key), Value::of(v)); }
void Writer::set_bool(std::string key, bool v) { set(std::move(key), Value::of(v)); }
void Writer::set_string(std::string key, std::string v) { set(std::move(key), Value::of(std::move(v))); }

void Writer::set_string_array(std::string key, std::vector<std::string> v) {
  Array array{.element_type = ValueType::kString, .items = {}};
  array.items.reserve(v.size());
  for (auto& s : v) array.items.push_back(Value::of(std::move(s)));
  set(std::move(key), Value::of(std::move(array)));
}

void Writer::set_f32_array(std::string key, std::span<const float> v) {
  Array array{.element_type = ValueType::kFloat32, .items = {}};
  array.items.reserve(v.size());
  for (float f : v) array.items.push_back(Value::of(f));
  set(std::move(key), Value::of(std::move(array)));
}

void Writer::set_i32_array(std::string key, std::span<const int32_t> v) {
  Array array{.element_type = ValueType::kInt32, .items = {}};
  array.items.reserve(v.size());
  for (int32_t i : v) array.items.push_back(Value::of(i));
  set(std::move(key), Value::of(std::move(array)));
}

Status Writer::check_new_tensor(const std::string& name, DType type, const std::vector<uint64_t>& dims,
                                uint64_t* size) const {
  for (const auto& t : tensors_) {
    if (t.name == name) return Status::invalid_argument(fmt::format("duplicate tensor name '{}'", name));
  }
  const auto bytes = tensor_data_bytes(type, dims);
  if (!bytes) {
    return Status::invalid_argument(
        fmt::format("tensor '{}' with dims [{}]: {}", name, fmt::join(dims, ", "), bytes.status().message()));
  }
  *size = *bytes;
  return Status::ok();
}

Status Writer::add_tensor(std::string name, DType type, std::vector<uint64_t> dims, std::vector<std::byte> bytes) {
  uint64_t size = 0;
  KVS_RETURN_IF_ERROR(check_new_tensor(name, type, dims, &size));
  if (bytes.size() != size) {
    return Status::invalid_argument(fmt::format("tensor '{}' ({} [{}]) needs {} bytes, got {}", name, dtype_name(type),
                                                fmt::join(dims, ", "), size, bytes.size()));
  }
  tensors_.push_back({std::move(name), type, std::move(dims), size, std::move(bytes), nullptr});
  return Status::ok();
}

Status Writer::add_tensor_streamed(std::string name, DType type, std::vector<uint64_t> dims, TensorFill fill) {
  uint64_t size = 0;
  KVS_RETURN_IF_ERROR(check_new_tensor(name, type, dims, &size));
  if (!fill) return Status::invalid_argument(fmt::format("tensor '{}' has no fill function", name));
  tensors_.push_back({std::move(name), type, std::move(dims), size, {}, std::move(fill)});
  return Status::ok();
}

Status Writer::write(const std::string& path) const {
  const std::string tmp_path = path + ".tmp";
  std::unique_ptr<std::FILE, FileCloser> out(std::fopen(tmp_path.c_str(), "wb"));
  if (!out) return Status::io_error(fmt::format("cannot create '{}': {}", tmp_path, std::strerror(errno)));
  Status status = write_to(out.get(), path);
  const bool close_failed = std::fclose(out.release()) != 0;
  if (status.is_ok() && close_failed) {
    status = Status::io_error(fmt::format("cannot finish writing '{}': {}", tmp_path, std::strerror(errno)));
  }
  std::error_code ec;
  if (status.is_ok()) {
    std::filesystem::rename(tmp_path, path, ec);
    if (ec) status = Status::io_error(fmt::format("cannot rename '{}' to '{}': {}", tmp_path, path, ec.message()));
  }
  if (!status.is_ok()) std::filesystem::remove(tmp_path, ec);
  return status;
}

Status Writer::write_to(std::FILE* out, const std::string& path) const {
  uint64_t align = kDefaultAlignment;
  std::string header;
  put<uint32_t>(header, 0x46554747u);  // "GGUF" little-endian
  put<uint32_t>(header, 3);
  put<uint64_t>(header, tensors_.size());
  put<uint64_t>(header, metadata_.size());
  for (const auto& [key, value] : metadata_) {
    KVS_RETURN_IF_ERROR(check_value(value, key).with_context(fmt::format("writing '{}'", path)));
    if (key == "general.alignment") {
      const auto* a = std::get_if<uint32_t>(&value.data);
      if (a == nullptr || *a == 0 || (*a & (*a - 1)) != 0) {
        return Status::invalid_argument(
            fmt::format("writing '{}': general.alignment must be a uint32 power of "
                        "two, got {} {}",
                        path, value_type_name(value.type), value.as_int().value_or(-1)));
      }
      align = *a;
    }
    put_string(header, key);
    put<uint32_t>(header, static_cast<uint32_t>(value.type));
    put_value(header, value);
  }
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    put_string(header, t.name);
    put<uint32_t>(header, static_cast<uint32_t>(t.dims.size()));
    for (uint64_t d : t.dims) put<uint64_t>(header, d);
    put<uint32_t>(header, static_cast<uint32_t>(t.type));
    put<uint64_t>(header, offset);
    offset = align_up(offset + t.size, align);
  }
  header.resize(align_up(header.size(), align), '\0');

  const auto write_bytes = [&](const void* data, size_t n) -> Status {
    if (n > 0 && std::fwrite(data, 1, n, out) != n) {
      return Status::io_error(fmt::format("writing '{}': write of {} bytes failed: {}", path, n, std::strerror(errno)));
    }
    return Status::ok();
  };
  KVS_RETURN_IF_ERROR(write_bytes(header.data(), header.size()));
  const std::byte zeros[64] = {};
  std::vector<std::byte> scratch;  // reused by every streamed tensor
  for (const auto& t : tensors_) {
    std::span<const std::byte> bytes = t.bytes;
    if (t.fill) {
      scratch.resize(t.size);
      KVS_RETURN_IF_ERROR(t.fill(scratch).with_context(fmt::format("writing tensor '{}' to '{}'", t.name, path)));
      bytes = scratch;
    }
    KVS_RETURN_IF_ERROR(write_bytes(bytes.data(), bytes.size()));
    for (uint64_t pad = align_up(t.size, align) - t.size; pad > 0;) {
      const uint64_t n = std::min<uint64_t>(pad, sizeof(zeros));
      KVS_RETURN_IF_ERROR(write_bytes(zeros, n));
      pad -= n;
    }
  }
  return Status::ok();
}

}  // namespace kvs::gguf
