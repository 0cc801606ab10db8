// Helpers of the GPU tests: a device copy of a host vector (upload, download, freed on scope
// exit), a fixture that skips without a device and frees what it uploads, and the element-wise
// comparison they share.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda_available.h"

namespace deepinfer::testing {

template <class T>
class DeviceVector {
 public:
  explicit DeviceVector(const std::vector<T>& host) : size_(host.size()) {
    cudaMalloc(reinterpret_cast<void**>(&ptr_), std::max<size_t>(size_, 1) * sizeof(T));
    cudaMemcpy(ptr_, host.data(), size_ * sizeof(T), cudaMemcpyHostToDevice);
  }
  /// n values, every byte 0xff (NaN for floats): a launch that leaves one unwritten shows.
  static DeviceVector Poisoned(size_t n) {
    DeviceVector v(std::vector<T>{});
    cudaFree(v.ptr_);
    v.size_ = n;
    cudaMalloc(reinterpret_cast<void**>(&v.ptr_), std::max<size_t>(n, 1) * sizeof(T));
    cudaMemset(v.ptr_, 0xff, n * sizeof(T));
    return v;
  }
  DeviceVector(DeviceVector&& o) noexcept : ptr_(o.ptr_), size_(o.size_) { o.ptr_ = nullptr; }
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;
  ~DeviceVector() {
    if (ptr_) cudaFree(ptr_);
  }
  T* get() const { return ptr_; }
  std::vector<T> ToHost() const {
    std::vector<T> h(size_);
    cudaMemcpy(h.data(), ptr_, size_ * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
  }

 private:
  T* ptr_ = nullptr;
  size_t size_ = 0;
};

/// A test on fresh random data each run that skips without a CUDA device: Random(n, scale) draws
/// n values uniform in [-scale, scale]. The seed is recorded in the test's XML (property "seed"),
/// so a failing draw can be replayed.
class RandomDataGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
    RecordProperty("seed", std::to_string(seed_));
  }
  std::vector<float> Random(size_t n, float scale = 1.0f) {
    std::uniform_real_distribution<float> u(-scale, scale);
    std::vector<float> v(n);
    for (float& x : v) x = u(rng_);
    return v;
  }
  const uint32_t seed_ = std::random_device{}();
  std::mt19937 rng_{seed_};
};

/// A test that skips without a CUDA device. ToDevice uploads a host vector (at least 16 bytes
/// allocated; freed after the test), ToHost downloads n values.
class DeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
  void TearDown() override {
    for (void* p : owned_) cudaFree(p);
  }
  template <class T>
  T* ToDevice(const std::vector<T>& v) {
    void* d = nullptr;
    EXPECT_EQ(cudaMalloc(&d, std::max<size_t>(v.size() * sizeof(T), 16)), cudaSuccess);
    cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
    owned_.push_back(d);
    return static_cast<T*>(d);
  }
  template <class T>
  std::vector<T> ToHost(const T* d, size_t n) {
    std::vector<T> v(n);
    cudaMemcpy(v.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost);
    return v;
  }

 private:
  std::vector<void*> owned_;
};

/// |got - want| <= tol * (1 + |want|) everywhere (tol 0: bit for bit, NaN never passes).
inline void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, float tol,
                        const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1.0f + std::fabs(want[i]))) << what << " at " << i;
  }
}

}  // namespace deepinfer::testing
