#include "engine/model/safetensors.h"

#include <fcntl.h>
#include <simdjson.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

namespace deepinfer {

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorView::ShapeString() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return IoError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return IoError(path + ": cannot stat: " + std::strerror(errno));
  }
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ < 8) {
    ::close(fd);
    return DataLoss(path + ": file of " + std::to_string(f->size_) + " bytes is too short");
  }
  void* m = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED) return IoError(path + ": mmap failed: " + std::strerror(errno));
  f->map_ = m;
  DI_RETURN_IF_ERROR(f->Parse());
  return f;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(map_, size_);
}

Status SafetensorsFile::Parse() {
  const auto* bytes = static_cast<const uint8_t*>(map_);
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes, 8);  // little-endian on every supported host
  if (header_len > size_ - 8) {
    return DataLoss(path_ + ": header length " + std::to_string(header_len) +
                    " exceeds the file (" + std::to_string(size_) + " bytes); truncated?");
  }
  const size_t data_start = 8 + header_len;
  const size_t data_size = size_ - data_start;
  simdjson::padded_string json(reinterpret_cast<const char*>(bytes + 8), header_len);
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(json).get(root) != simdjson::SUCCESS || !root.is_object()) {
    return DataLoss(path_ + ": header is not a JSON object");
  }
  for (auto [key, value] : root.get_object()) {
    std::string name(key);
    if (name == "__metadata__") continue;
    auto bad = [&](const std::string& why) {
      return DataLoss(path_ + ": tensor '" + name + "': " + why);
    };
    std::string_view dtype_s;
    simdjson::dom::array shape_a, off_a;
    if (value["dtype"].get(dtype_s) || value["shape"].get(shape_a) ||
        value["data_offsets"].get(off_a)) {
      return bad("entry needs dtype, shape and data_offsets");
    }
    TensorView t;
    t.name = name;
    t.file = &path_;
    auto dt = ParseDType(dtype_s);
    if (!dt) return bad("unsupported dtype " + std::string(dtype_s));
    t.dtype = *dt;
    for (auto d : shape_a) {
      int64_t v;
      if (d.get(v) || v < 0) return bad("shape entries must be non-negative integers");
      t.shape.push_back(v);
    }
    uint64_t offs[2];
    int k = 0;
    for (auto o : off_a) {
      if (k >= 2 || o.get(offs[k])) return bad("data_offsets must be two integers");
      ++k;
    }
    if (k != 2 || offs[0] > offs[1]) return bad("data_offsets must be [begin, end]");
    if (offs[1] > data_size) {
      return bad("data ends at byte " + std::to_string(offs[1]) + " of a " +
                 std::to_string(data_size) + "-byte data section; truncated file?");
    }
    t.nbytes = offs[1] - offs[0];
    if (static_cast<uint64_t>(t.numel()) * DTypeSize(t.dtype) != t.nbytes) {
      return bad("holds " + std::to_string(t.nbytes) + " bytes but shape " + t.ShapeString() +
                 " of " + std::string(DTypeName(t.dtype)) + " needs " +
                 std::to_string(t.numel() * DTypeSize(t.dtype)));
    }
    t.data = bytes + data_start + offs[0];
    tensors_.emplace(name, std::move(t));
  }
  return Status::Ok();
}

namespace {

Result<std::vector<std::string>> ShardsFromIndex(const std::string& dir, const std::string& index) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.load(index).get(root)) return DataLoss(index + ": not valid JSON");
  simdjson::dom::object map;
  if (root["weight_map"].get(map)) return DataLoss(index + ": no weight_map object");
  std::vector<std::string> files;
  for (auto [name, file] : map) {
    std::string_view f;
    if (file.get(f)) return DataLoss(index + ": weight_map value for " + std::string(name));
    std::string path = dir + "/" + std::string(f);
    bool seen = false;
    for (const auto& x : files) seen = seen || x == path;
    if (!seen) files.push_back(path);
  }
  return files;
}

}  // namespace

Result<TensorStore> TensorStore::OpenDir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return NotFound(dir + ": not a directory");
  const std::string index = dir + "/model.safetensors.index.json";
  if (fs::exists(index, ec)) {
    DI_ASSIGN_OR_RETURN(files, ShardsFromIndex(dir, index));
  } else if (fs::exists(dir + "/model.safetensors", ec)) {
    files.push_back(dir + "/model.safetensors");
  } else {
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (e.path().extension() == ".safetensors") files.push_back(e.path().string());
    }
    std::sort(files.begin(), files.end());
  }
  if (files.empty()) return NotFound(dir + ": no .safetensors files");
  TensorStore store;
  for (const auto& path : files) {
    DI_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(path));
    std::shared_ptr<SafetensorsFile> shared(std::move(file));
    for (const auto& [name, view] : shared->tensors()) {
      auto [it, inserted] = store.index_.emplace(name, &view);
      if (!inserted) {
        return DataLoss("tensor '" + name + "' appears in both " + *it->second->file + " and " +
                        path);
      }
    }
    store.files_.push_back(std::move(shared));
  }
  return store;
}

const TensorView* TensorStore::Find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

}  // namespace deepinfer
