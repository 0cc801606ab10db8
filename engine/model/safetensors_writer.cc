#include "engine/model/safetensors_writer.h"

#include <algorithm>
#include <cstring>
#include <fstream>

namespace deepinfer {

void SafetensorsWriter::Add(const std::string& name, DType dtype, std::vector<int64_t> shape,
                            std::vector<uint8_t> bytes) {
  tensors_.push_back({name, dtype, std::move(shape), std::move(bytes)});
}

void SafetensorsWriter::AddF32(const std::string& name, std::vector<int64_t> shape,
                               const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  Add(name, DType::kF32, std::move(shape), std::move(b));
}

Status SafetensorsWriter::Write(const std::string& path) const {
  std::vector<const Entry*> order;
  for (const auto& e : tensors_) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->name < b->name; });
  std::string header = "{";
  size_t offset = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const Entry& e = *order[i];
    if (i) header += ',';
    header += '"';
    header += e.name;
    header += "\":{\"dtype\":\"";
    header += DTypeName(e.dtype);
    header += "\",\"shape\":[";
    for (size_t k = 0; k < e.shape.size(); ++k) {
      if (k) header += ',';
      header += std::to_string(e.shape[k]);
    }
    header += "],\"data_offsets\":[";
    header += std::to_string(offset);
    header += ',';
    header += std::to_string(offset + e.bytes.size());
    header += "]}";
    offset += e.bytes.size();
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary);
  if (!out) return IoError(path + ": cannot open for writing");
  const uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  for (const Entry* e : order) {
    out.write(reinterpret_cast<const char*>(e->bytes.data()),
              static_cast<std::streamsize>(e->bytes.size()));
  }
  if (!out) return IoError(path + ": write failed");
  return Status::Ok();
}

}  // namespace deepinfer
