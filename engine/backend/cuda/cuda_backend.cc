#include "engine/backend/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/model/quant.h"
#include "kernels/linear_fp8.h"
#include "kernels/ops.h"

namespace deepinfer {
namespace {

// A grow-only device buffer: steps reuse the same memory.
struct DeviceBuffer {
  void* ptr = nullptr;
  size_t capacity = 0;
  ~DeviceBuffer() {
    if (ptr) cudaFree(ptr);
  }
  template <class T>
  T* Get(size_t count, cudaError_t* err) {
    const size_t bytes = std::max<size_t>(count * sizeof(T), 16);
    if (bytes > capacity) {
      if (ptr) cudaFree(ptr);
      ptr = nullptr;
      capacity = 0;
      const cudaError_t e = cudaMalloc(&ptr, bytes);
      if (e != cudaSuccess) {
        if (*err == cudaSuccess) *err = e;
        return nullptr;
      }
      capacity = bytes;
    }
    return static_cast<T*>(ptr);
  }
};

// A weight on the device: the released FP8 bytes and scales (decode GEMV) and/or an fp32 copy.
struct DeviceWeight {
  DeviceBuffer fp8, scale, fp32;
  bool has_fp8 = false, has_fp32 = false;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device) : device_(device) {}
  ~CudaBackend() override {
    if (stream_) cudaStreamDestroy(stream_);
  }

  Status Init() {
    if (cudaSetDevice(device_) != cudaSuccess) return Unimplemented("CUDA device unavailable");
    if (cudaStreamCreate(&stream_) != cudaSuccess) return Internal("cudaStreamCreate failed");
    return Status::Ok();
  }

  const char* name() const override { return "cuda"; }

  Status TakeError() override {
    if (cudaStreamSynchronize(stream_) != cudaSuccess) Fail(cudaGetLastError());
    Status st = error_.empty() ? Status::Ok() : Internal("CUDA: " + error_);
    error_.clear();
    return st;
  }

  void LinearRows(const LinearWeight& w, int64_t out_begin, int64_t n_out, const float* x,
                  int64_t rows, float* y, bool quantize_act) override {
    if (rows == 0 || n_out == 0) return;
    const int64_t in = w.in;
    std::vector<float> xq;
    if (quantize_act) {  // the activations' FP8 rounding, exactly as the CPU does it
      xq.assign(x, x + rows * in);
      for (int64_t r = 0; r < rows; ++r) QdqFp8Blocks(xq.data() + r * in, in, 128, 1e-4f);
      x = xq.data();
    }
    float* dx = Upload(&x_, x, rows * in);
    float* dy = y_.Get<float>(rows * n_out, &err_);
    if (!Ok() || !dx || !dy) return;
    DeviceWeight& dw = Weight(w);
    const bool gemv = w.format == WeightFormat::kFp8Block && w.scale_dtype == DType::kF8E8M0 &&
                      w.block_out == 128 && w.block_in == 128 && rows <= 8 && out_begin % 128 == 0;
    if (gemv && !quantize_act) {
      // The decode GEMV on the released FP8 bytes (exact numerics: fp32 sums in its own order).
      if (Fp8(w, dw)) {
        const int64_t scale_cols = (in + 127) / 128;
        Check(static_cast<cudaError_t>(kernels::Fp8BlockGemv(
            static_cast<const uint8_t*>(dw.fp8.ptr) + out_begin * in,
            static_cast<const uint8_t*>(dw.scale.ptr) + (out_begin / 128) * scale_cols, n_out, in,
            dx, static_cast<int>(rows), dy, stream_)));
      }
    } else if (Fp32(w, dw)) {
      // Everything else sums in the CPU's order, bit for bit: under the reference numerics FP8
      // rounding follows, where a last-bit difference can move a value one FP8 step. Stage 1
      // trades speed for that; tensor-core GEMMs come with stage 2.
      Check(static_cast<cudaError_t>(
          kernels::DotRowsCpuOrder(static_cast<const float*>(dw.fp32.ptr) + out_begin * in, dx,
                                   rows, n_out, in, dy, stream_)));
    }
    Download(y, dy, rows * n_out);
  }

  void Embed(const LinearWeight& table, const int32_t* tokens, int64_t n, float* out) override {
    if (n == 0) return;
    DeviceWeight& dw = Weight(table);
    float* dout = y_.Get<float>(n * table.in, &err_);
    if (!Ok() || !dout || !Fp32(table, dw)) return;
    const float* rows = static_cast<const float*>(dw.fp32.ptr);
    for (int64_t i = 0; i < n; ++i) {
      Check(cudaMemcpyAsync(dout + i * table.in, rows + static_cast<int64_t>(tokens[i]) * table.in,
                            table.in * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
    }
    Download(out, dout, n * table.in);
  }

  void RmsNorm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps,
               float* y) override {
    float* dx = Upload(&x_, x, rows * dim);
    const float* dw = weight ? Const(weight, dim) : nullptr;
    float* dy = y_.Get<float>(rows * dim, &err_);
    if (!Ok()) return;
    Check(static_cast<cudaError_t>(kernels::RmsNorm(dx, dw, rows, dim, eps, dy, stream_)));
    Download(y, dy, rows * dim);
  }

  void Rope(float* x, int64_t rows, int heads, int head_dim, const RopeTable& table,
            const int64_t* positions, bool inverse) override {
    float* dx = Upload(&x_, x, rows * heads * head_dim);
    int64_t* dpos = Upload(&pos_, positions, rows);
    const float* dfreq = Const(table.inv_freq.data(), static_cast<int64_t>(table.inv_freq.size()));
    if (!Ok()) return;
    Check(static_cast<cudaError_t>(
        kernels::Rope(dx, rows, heads, head_dim, table.rope_dim, dfreq, dpos, inverse, stream_)));
    Download(x, dx, rows * heads * head_dim);
  }

  void HyperPre(const HyperConnWeights& w, const float* streams, int64_t rows, int n, int64_t dim,
                float norm_eps, float hc_eps, int iters, float* post, float* comb,
                float* collapsed) override {
    const int64_t flat = n * dim, mix = (2 + n) * n;
    float* ds = Upload(&x_, streams, rows * flat);
    const kernels::HyperWeights hw{Const(w.fn.data(), mix * flat), Const(w.base.data(), mix),
                                   Const(w.scale.data(), 3)};
    float* dpost = a_.Get<float>(rows * n, &err_);
    float* dcomb = b_.Get<float>(rows * n * n, &err_);
    float* dout = y_.Get<float>(rows * dim, &err_);
    if (!Ok()) return;
    Check(static_cast<cudaError_t>(kernels::HyperPre(hw, ds, rows, n, dim, norm_eps, hc_eps, iters,
                                                     dpost, dcomb, dout, stream_)));
    Download(post, dpost, rows * n);
    Download(comb, dcomb, rows * n * n);
    Download(collapsed, dout, rows * dim);
  }

  void HyperPost(const float* streams, const float* y, const float* post, const float* comb,
                 int64_t rows, int n, int64_t dim, float* out) override {
    float* ds = Upload(&x_, streams, rows * n * dim);
    float* dy = Upload(&a_, y, rows * dim);
    float* dpost = Upload(&b_, post, rows * n);
    float* dcomb = Upload(&c_, comb, rows * n * n);
    float* dout = y_.Get<float>(rows * n * dim, &err_);
    if (!Ok()) return;
    Check(static_cast<cudaError_t>(
        kernels::HyperPost(ds, dy, dpost, dcomb, rows, n, dim, dout, stream_)));
    Download(out, dout, rows * n * dim);
  }

  void HyperHead(const HyperHeadWeights& w, const float* streams, int64_t rows, int n, int64_t dim,
                 float norm_eps, float hc_eps, float* out) override {
    float* ds = Upload(&x_, streams, rows * n * dim);
    const kernels::HyperWeights hw{Const(w.fn.data(), n * n * dim), Const(w.base.data(), n),
                                   Const(w.scale.data(), 1)};
    float* dout = y_.Get<float>(rows * dim, &err_);
    if (!Ok()) return;
    Check(static_cast<cudaError_t>(
        kernels::HyperHead(hw, ds, rows, n, dim, norm_eps, hc_eps, dout, stream_)));
    Download(out, dout, rows * dim);
  }

  void SparseAttention(const float* q, const AttentionQuery* queries, int64_t n_queries, int heads,
                       int head_dim, const float* sinks, float scale, float* o) override {
    if (n_queries == 0) return;
    // The rows each query may see are scattered over the host caches: gather them.
    offsets_.assign(1, 0);
    int64_t max_rows = 0;
    for (int64_t t = 0; t < n_queries; ++t) {
      offsets_.push_back(offsets_.back() + queries[t].n_rows);
      max_rows = std::max<int64_t>(max_rows, queries[t].n_rows);
    }
    gathered_.resize(static_cast<size_t>(offsets_.back() * head_dim));
    for (int64_t t = 0; t < n_queries; ++t) {
      for (int e = 0; e < queries[t].n_rows; ++e) {
        std::copy_n(queries[t].rows[e], head_dim, &gathered_[(offsets_[t] + e) * head_dim]);
      }
    }
    float* dq = Upload(&x_, q, n_queries * heads * head_dim);
    float* drows = Upload(&a_, gathered_.data(), offsets_.back() * head_dim);
    int64_t* doff = Upload(&pos_, offsets_.data(), n_queries + 1);
    const float* dsinks = Const(sinks, heads);
    float* dout = y_.Get<float>(n_queries * heads * head_dim, &err_);
    if (!Ok()) return;
    Check(static_cast<cudaError_t>(kernels::SparseAttention(
        dq, drows, doff, n_queries, heads, head_dim, dsinks, scale, dout, stream_, max_rows)));
    Download(o, dout, n_queries * heads * head_dim);
  }

  void IndexerScores(const float* q, const float* w, int heads, int head_dim, const float* keys,
                     int64_t n_keys, float* out) override {
    if (n_keys == 0) return;
    float* dq = Upload(&x_, q, static_cast<int64_t>(heads) * head_dim);
    float* dw = Upload(&b_, w, heads);
    float* dk = Upload(&a_, keys, n_keys * head_dim);
    float* dout = y_.Get<float>(n_keys, &err_);
    if (!Ok()) return;
    Check(static_cast<cudaError_t>(
        kernels::IndexerScores(dq, dw, heads, head_dim, dk, n_keys, dout, stream_)));
    Download(out, dout, n_keys);
  }

  void SwiGlu(const float* gate, const float* up, int64_t n, float limit, float* out) override {
    if (n == 0) return;
    float* dg = Upload(&x_, gate, n);
    float* du = Upload(&a_, up, n);
    float* dout = y_.Get<float>(n, &err_);
    if (!Ok()) return;
    Check(static_cast<cudaError_t>(kernels::SwiGlu(dg, du, n, limit, dout, stream_)));
    Download(out, dout, n);
  }

 private:
  bool Ok() {
    if (err_ != cudaSuccess) Fail(err_);
    err_ = cudaSuccess;
    return error_.empty();
  }
  void Check(cudaError_t e) {
    if (e != cudaSuccess) Fail(e);
  }
  void Fail(cudaError_t e) { Fail(cudaGetErrorString(e)); }
  void Fail(const std::string& what) {
    if (error_.empty()) error_ = what;
  }

  // Ops run on whichever thread runs the model step (the engine's or AsyncForward's): make this
  // backend's device current there, once per thread.
  void Enter() {
    thread_local int current = -1;
    if (current != device_) {
      Check(cudaSetDevice(device_));
      current = device_;
    }
  }

  template <class T>
  T* Upload(DeviceBuffer* buf, const T* host, int64_t count) {
    Enter();
    T* d = buf->Get<T>(static_cast<size_t>(count), &err_);
    if (d && count > 0) {
      Check(cudaMemcpyAsync(d, host, count * sizeof(T), cudaMemcpyHostToDevice, stream_));
    }
    return d;
  }
  void Download(float* host, const float* dev, int64_t count) {
    if (!error_.empty() || count == 0) return;
    Check(cudaMemcpyAsync(host, dev, count * sizeof(float), cudaMemcpyDeviceToHost, stream_));
    Check(cudaStreamSynchronize(stream_));
  }

  // Model-owned host arrays (norm weights, mHC weights, sinks, RoPE frequencies), uploaded once.
  const float* Const(const float* host, int64_t count) {
    ConstArray& c = consts_[host];
    float* d = c.buf.Get<float>(static_cast<size_t>(count), &err_);
    if (d && c.count != count) {
      Check(cudaMemcpy(d, host, count * sizeof(float), cudaMemcpyHostToDevice));
      c.count = count;
    }
    return d;
  }

  DeviceWeight& Weight(const LinearWeight& w) {
    Enter();
    return weights_[w.data];
  }
  bool Fp8(const LinearWeight& w, DeviceWeight& dw) {
    if (dw.has_fp8) return true;
    const size_t bytes = static_cast<size_t>(w.out * w.in);
    const size_t sbytes = static_cast<size_t>(((w.out + 127) / 128) * ((w.in + 127) / 128));
    uint8_t* d = dw.fp8.Get<uint8_t>(bytes, &err_);
    uint8_t* s = dw.scale.Get<uint8_t>(sbytes, &err_);
    if (!Ok() || !d || !s) return false;
    Check(cudaMemcpy(d, w.data, bytes, cudaMemcpyHostToDevice));
    Check(cudaMemcpy(s, w.scale, sbytes, cudaMemcpyHostToDevice));
    dw.has_fp8 = error_.empty();
    return dw.has_fp8;
  }
  bool Fp32(const LinearWeight& w, DeviceWeight& dw) {
    if (dw.has_fp32) return true;
    // Stage 1: the weight's fp32 values, dequantised like the CPU does, kept on the device.
    std::vector<float> host(static_cast<size_t>(w.out * w.in));
    for (int64_t o = 0; o < w.out; ++o) DequantizeRow(w, o, &host[o * w.in]);
    float* d = dw.fp32.Get<float>(host.size(), &err_);
    if (!Ok() || !d) return false;
    Check(cudaMemcpy(d, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
    dw.has_fp32 = error_.empty();
    return dw.has_fp32;
  }

  int device_;
  cudaStream_t stream_ = nullptr;
  cudaError_t err_ = cudaSuccess;  // an allocation failure not yet reported
  std::string error_;              // the first fault since TakeError
  DeviceBuffer x_, y_, a_, b_, c_, pos_;
  std::vector<int64_t> offsets_;
  std::vector<float> gathered_;
  struct ConstArray {
    DeviceBuffer buf;
    int64_t count = -1;  // floats uploaded
  };
  std::unordered_map<const void*, ConstArray> consts_;
  std::unordered_map<const void*, DeviceWeight> weights_;
};

}  // namespace

Result<std::unique_ptr<Backend>> MakeCudaBackend(int device) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count <= device) {
    return Unimplemented("no usable CUDA device (" + std::to_string(count) + " visible)");
  }
  auto be = std::make_unique<CudaBackend>(device);
  DI_RETURN_IF_ERROR(be->Init());
  return std::unique_ptr<Backend>(std::move(be));
}

}  // namespace deepinfer
