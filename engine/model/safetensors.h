// Memory-mapped safetensors files and sharded checkpoints (model.safetensors.index.json).
// Tensors are views into the mapping: nothing is copied at load.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/common/status.h"
#include "engine/model/dtype.h"

namespace deepinfer {

/// A tensor inside a mapped file.
struct TensorView {
  std::string name;
  const std::string* file = nullptr;  // owned by the SafetensorsFile
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;

  int64_t numel() const;
  std::string ShapeString() const;
};

/// One mapped .safetensors file. The header is fully validated on open: offsets inside the
/// data section, sizes consistent with dtype and shape, no overlaps past the end.
class SafetensorsFile {
 public:
  static Result<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  size_t file_size() const { return size_; }

 private:
  SafetensorsFile() = default;
  Status Parse();

  std::string path_;
  void* map_ = nullptr;
  size_t size_ = 0;
  std::map<std::string, TensorView> tensors_;
};

/// All tensors of a checkpoint directory: a single model.safetensors, the shards listed in
/// model.safetensors.index.json, or every *.safetensors file in the directory.
class TensorStore {
 public:
  static Result<TensorStore> OpenDir(const std::string& dir);

  const TensorView* Find(const std::string& name) const;
  const std::map<std::string, const TensorView*>& all() const { return index_; }
  size_t file_count() const { return files_.size(); }

 private:
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorView*> index_;
};

}  // namespace deepinfer
