#include "engine/common/npy.h"

#include <cstring>
#include <fstream>
#include <regex>

namespace deepinfer {

Status WriteNpy(const std::string& path, const float* data, const std::vector<int64_t>& shape) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  int64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    dict += std::to_string(shape[i]) + (shape.size() == 1 || i + 1 < shape.size() ? ", " : "");
    n *= shape[i];
  }
  dict += "), }";
  // Magic (6) + version (2) + header length (2) + dict, padded with spaces to a multiple of 64.
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) return IoError(path + ": cannot open for writing");
  const uint16_t hlen = static_cast<uint16_t>(dict.size());
  out.write("\x93NUMPY\x01\x00", 8);
  out.write(reinterpret_cast<const char*>(&hlen), 2);
  out.write(dict.data(), static_cast<std::streamsize>(dict.size()));
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n * sizeof(float)));
  if (!out) return IoError(path + ": write failed");
  return Status::Ok();
}

Result<NpyArray> ReadNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path + ": cannot open");
  char magic[8];
  uint16_t hlen = 0;
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0 || magic[6] != 1 ||
      !in.read(reinterpret_cast<char*>(&hlen), 2)) {
    return DataLoss(path + ": not a version 1 .npy file");
  }
  std::string header(hlen, '\0');
  if (!in.read(header.data(), hlen)) return DataLoss(path + ": truncated header");
  if (header.find("'descr': '<f4'") == std::string::npos ||
      header.find("'fortran_order': False") == std::string::npos) {
    return InvalidArgument(path + ": only little-endian float32 C-order arrays are supported");
  }
  std::smatch mt;
  if (!std::regex_search(header, mt, std::regex(R"('shape': \(([0-9, ]*)\))"))) {
    return DataLoss(path + ": no shape in header");
  }
  NpyArray a;
  int64_t n = 1;
  std::string dims = mt[1];
  static const std::regex kNumber("[0-9]+");
  for (auto it = std::sregex_iterator(dims.begin(), dims.end(), kNumber);
       it != std::sregex_iterator(); ++it) {
    a.shape.push_back(std::stoll(it->str()));
    n *= a.shape.back();
  }
  a.data.resize(n);
  if (!in.read(reinterpret_cast<char*>(a.data.data()), static_cast<std::streamsize>(n * 4))) {
    return DataLoss(path + ": truncated data");
  }
  return a;
}

}  // namespace deepinfer
