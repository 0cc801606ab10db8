#include "engine/backend/cuda/device_forward.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "engine/backend/cuda/cuda_status.h"
#include "engine/backend/cuda/device_branches.h"
#include "engine/backend/cuda/device_draws.h"
#include "engine/backend/cuda/device_step.h"
#include "engine/backend/cuda/device_weights.h"
#include "engine/backend/cuda/slot_caches.h"
#include "engine/backend/cuda/step_rows.h"
#include "kernels/forward_glue.h"

namespace deepinfer {
namespace {

// cuBLAS's workspace for the bf16 products above kGemvMaxRows rows (set, so that graphs capture
// no allocation).
constexpr size_t kBf16Workspace = size_t{32} << 20;

class DeviceForwardImpl final : public DeviceForward {
 public:
  explicit DeviceForwardImpl(const DeviceForwardOptions& o) : opt_(o) {}
  ~DeviceForwardImpl() override {
    cudaSetDevice(opt_.device);
    if (stream_) cudaStreamSynchronize(stream_);  // a failed Init may leave work queued
    for (auto& [rows, exec] : graphs_) cudaGraphExecDestroy(exec);
    if (host_in_) cudaFreeHost(host_in_);
    branches_.Synchronize();  // a failed Init may also leave work on a side stream
    if (stream_) cudaStreamDestroy(stream_);
  }

  Status Init(const Checkpoint& ck) {
    cfg_ = ck.config;
    const ModelConfig& c = cfg_;
    // 65,535 rows: the most the mHC collapse's grid takes (kernels/hyper_collapse.h).
    if (opt_.max_batch < 1 || opt_.max_batch > 65535 || opt_.slots < 1 || opt_.max_context < 128 ||
        opt_.max_context % 128 != 0 || opt_.max_chunk < 1 || opt_.max_chunk > opt_.max_batch) {
      return InvalidArgument(
          "device forward: max_batch in 1 .. 65535, slots >= 1, max_context a multiple of 128, "
          "max_chunk in 1 .. max_batch");
    }
    DI_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(opt_.device), "cudaSetDevice"));
    DI_RETURN_IF_ERROR(
        CudaStatus(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"));
    const bool gemm = opt_.max_batch > kGemvMaxRows && !opt_.cpu_order;
    if (opt_.folded_experts && !opt_.cpu_order) DI_RETURN_IF_ERROR(CheckExpertScalesFold(ck));
    DI_RETURN_IF_ERROR(UploadModel(ck, gemm, mem_, &model_));
    plan_.cfg = &c;
    plan_.model = &model_;
    plan_.window = c.sliding_window;
    plan_.ring = RingRows(c.sliding_window, opt_.max_chunk);
    plan_.cpu_order = opt_.cpu_order;
    plan_.dense_mma = opt_.dense_mma && !opt_.cpu_order;
    plan_.folded_experts = opt_.folded_experts && !opt_.cpu_order;
    if (gemm) {
      DI_RETURN_IF_ERROR(KernelStatus(gemm_.Create(), "cuBLASLt context"));
      plan_.gemm = &gemm_;
      DI_RETURN_IF_ERROR(KernelStatus(bf16_.Create(kBf16Workspace), "cuBLAS context"));
      plan_.bf16 = &bf16_;
    }
    DI_RETURN_IF_ERROR(AllocInputs());
    DI_RETURN_IF_ERROR(AllocLayerCaches(plan_, opt_.slots, mem_, &plan_.caches));
    DI_RETURN_IF_ERROR(AllocStepBuffers(plan_, opt_.max_batch, mem_, &plan_.buf));
    // Last of the plan's set-up: the side plans copy it (StepBranches).
    if (opt_.branches && !opt_.cpu_order) {
      DI_RETURN_IF_ERROR(branches_.SetUp(&plan_, opt_.max_batch, mem_));
    }
    if (opt_.draws) DI_RETURN_IF_ERROR(AllocSampling());
    lengths_.assign(opt_.slots + 1, 0);
    seen_.assign(opt_.slots, 0);
    // DeviceMemory zeroes on the default stream; the states' reset below runs on stream_.
    DI_RETURN_IF_ERROR(CudaStatus(cudaDeviceSynchronize(), "allocation"));
    for (int s = 0; s <= opt_.slots; ++s) DI_RETURN_IF_ERROR(ResetSlotState(s));
    for (int b = 1;; b = std::min(2 * b, opt_.max_batch)) {
      buckets_.push_back(b);
      if (b == opt_.max_batch) break;
    }
    // Each bucket runs once eagerly with its head (kernels set their attributes on first
    // launch), then its body is captured, and its head where HeadInGraph; every row is padding
    // here, which only the spare slot sees.
    FillInputs({}, {}, {}, buckets_.back());
    DI_RETURN_IF_ERROR(Upload());
    for (int b : buckets_) {
      DI_RETURN_IF_ERROR(KernelStatus(EnqueueBody(plan_, b, stream_), "warm-up step"));
      DI_RETURN_IF_ERROR(
          KernelStatus(EnqueueHead(plan_, HeadInGraph(b), b, stream_), "warm-up step"));
      DI_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream_), "warm-up step"));
      if (opt_.graphs) DI_RETURN_IF_ERROR(Capture(b));
    }
    return Status::Ok();
  }

  Status ResetSlot(int slot) override {
    DI_RETURN_IF_ERROR(Enter());
    if (slot < 0 || slot >= opt_.slots) return InvalidArgument("slot out of range");
    Status st = ResetSlotState(slot);
    if (st.ok()) st = CudaStatus(cudaStreamSynchronize(stream_), "reset");
    return Guard(std::move(st));
  }

  bool CopiesSlots() const override { return true; }
  Status CopySlot(int from, int to) override {
    DI_RETURN_IF_ERROR(Enter());
    if (from < 0 || from >= opt_.slots || to < 0 || to >= opt_.slots) {
      return InvalidArgument("slot out of range");
    }
    if (from == to) return InvalidArgument("a slot copied onto itself");
    Status st = CopySlotCaches(model_, plan_, opt_.slots + 1, from, to, lengths_[from], stream_);
    if (st.ok()) st = CudaStatus(cudaStreamSynchronize(stream_), "slot copy");
    if (st.ok()) lengths_[to] = lengths_[from];
    return Guard(std::move(st));
  }

  Status fault() const override {
    return faulted_.load(std::memory_order_acquire) ? fault_ : Status::Ok();
  }
  int slots() const override { return opt_.slots; }
  int max_rows() const override { return opt_.max_batch; }
  int max_chunk() const override { return opt_.max_chunk; }
  int64_t max_context() const override { return opt_.max_context; }

  int64_t length(int slot) const override {
    return slot >= 0 && slot < opt_.slots ? lengths_[slot] : -1;
  }

  int64_t redrawn_draws() const override { return draws_.redrawn_draws(); }
  size_t device_bytes() const override {
    return mem_.bytes() +
           (plan_.gemm ? kernels::Fp8GemmContext::kDefaultWorkspaceBytes + kBf16Workspace : 0);
  }

  using SlotStepper::Step;
  Status Step(std::span<const int32_t> slots, std::span<const int32_t> tokens,
              std::span<const int32_t> logit_rows, float* logits) override {
    DI_RETURN_IF_ERROR(Enter());
    DI_RETURN_IF_ERROR(Validate(slots, tokens));
    DI_RETURN_IF_ERROR(CheckLogitRows(logit_rows, static_cast<int64_t>(slots.size())));
    if (slots.empty()) return Status::Ok();
    const size_t n_out = logit_rows.empty() ? slots.size() : logit_rows.size();
    Status st = Launch(slots, tokens, logit_rows);
    if (st.ok()) {
      st = CudaStatus(
          cudaMemcpyAsync(logits, plan_.buf.logits, n_out * cfg_.vocab_size * sizeof(float),
                          cudaMemcpyDeviceToHost, stream_),
          "logits");
    }
    if (st.ok()) st = Finish(slots);
    return Guard(std::move(st));
  }

  bool SamplesRows() const override { return opt_.draws; }
  Status StepMixed(std::span<const int32_t> slots, std::span<const int32_t> tokens,
                   std::span<const int32_t> sample_rows, std::span<const SampleParams> params,
                   const uint32_t* bitmask, int32_t* next, float* logprobs,
                   std::span<const int32_t> logit_rows, float* logits) override {
    DI_RETURN_IF_ERROR(Enter());
    if (!opt_.draws) return Unimplemented("this device forward was made without its sampler");
    DI_RETURN_IF_ERROR(MergeStepRows(sample_rows, logit_rows, static_cast<int64_t>(slots.size()),
                                     merged_rows_, merged_drawn_));
    const int64_t draws = static_cast<int64_t>(merged_rows_.size() - logit_rows.size());
    if (draws > draws_.rows()) {
      return InvalidArgument("a step draws at most " + std::to_string(draws_.rows()) + " rows");
    }
    DI_RETURN_IF_ERROR(CheckSampleParams(params, draws, bitmask, cfg_.vocab_size));
    DI_RETURN_IF_ERROR(Validate(slots, tokens));
    if (slots.empty()) return Status::Ok();
    Status st = Launch(slots, tokens, merged_rows_);
    if (st.ok()) {
      st = draws_.Queue(plan_.buf.logits, merged_drawn_, params, bitmask, logprobs != nullptr,
                        logits, stream_);
    }
    if (st.ok()) st = Finish(slots);
    if (st.ok()) st = draws_.Collect(next, logprobs, stream_);
    return Guard(std::move(st));
  }

 private:
  // Makes this forward's device current; refuses once a step has failed on the device.
  Status Enter() {
    if (faulted_.load(std::memory_order_acquire)) return fault_;
    return CudaStatus(cudaSetDevice(opt_.device), "cudaSetDevice");
  }
  // A device fault after work was enqueued leaves the caches partly advanced: the forward stops
  // (its requests fail; the engine drains and creates a new one).
  Status Guard(Status st) {
    if (st.ok()) return st;
    cudaStreamSynchronize(stream_);
    branches_.Synchronize();  // an eager step may have failed between a fork and its join
    fault_ = Internal("device forward stopped: " + st.message());
    faulted_.store(true, std::memory_order_release);  // fault_ is final from here on
    return fault_;
  }

  // Bad input changes nothing.
  Status Validate(std::span<const int32_t> slots, std::span<const int32_t> tokens) {
    const StepLimits limits{opt_.slots, opt_.max_batch, opt_.max_chunk, opt_.max_context,
                            cfg_.vocab_size};
    return CheckStepRows(slots, tokens, lengths_.data(), limits, seen_);
  }

  // Uploads a checked step's inputs and launches it (no synchronisation). The LM head computes
  // the rows asked for (logit_rows, or all): in the graph through out_rows where HeadInGraph,
  // eagerly after the body otherwise.
  Status Launch(std::span<const int32_t> slots, std::span<const int32_t> tokens,
                std::span<const int32_t> logit_rows) {
    const int rows = static_cast<int>(slots.size());
    const int bucket = *std::lower_bound(buckets_.begin(), buckets_.end(), rows);
    FillInputs(slots, tokens, logit_rows, bucket);
    DI_RETURN_IF_ERROR(Upload());
    if (opt_.graphs) {
      DI_RETURN_IF_ERROR(CudaStatus(cudaGraphLaunch(graphs_.at(bucket), stream_), "graph"));
      if (HeadInGraph(bucket)) return Status::Ok();  // on the bucket's rows (FillInputs)
    } else {
      DI_RETURN_IF_ERROR(KernelStatus(EnqueueBody(plan_, bucket, stream_), "step"));
    }
    const bool chosen = !logit_rows.empty();
    return KernelStatus(
        EnqueueHead(plan_, chosen, chosen ? static_cast<int>(logit_rows.size()) : rows, stream_),
        "LM head");
  }
  // The step's one synchronisation; then each sequence is longer by its rows.
  Status Finish(std::span<const int32_t> slots) {
    DI_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream_), "step"));
    for (int32_t s : slots) ++lengths_[s];
    return Status::Ok();
  }

  // A step draws at most one row a slot in practice (a sequence's next token), so the sampler's
  // buffers (~40 bytes a logit) hold min(max_batch, slots) rows, not a whole step's.
  Status AllocSampling() {
    merged_rows_.reserve(opt_.max_batch);
    merged_drawn_.reserve(opt_.max_batch);
    return draws_.Reserve(mem_, std::min(opt_.max_batch, opt_.slots), cfg_.vocab_size);
  }

  // The input block: int64 arrays first (pos, seg_begin, per ratio comp_pos), then int32 ones.
  Status AllocInputs() {
    std::vector<int> ratios;
    for (const DeviceLayer& L : model_.layers) {
      if (std::find(ratios.begin(), ratios.end(), L.ratio) == ratios.end())
        ratios.push_back(L.ratio);
    }
    const size_t B = opt_.max_batch, n_r = ratios.size();
    in_bytes_ = (B + (B + 1) + n_r * B) * 8 + (4 + 5 * n_r) * B * 4;
    DI_ASSIGN_OR_RETURN(void* dev, mem_.Alloc(in_bytes_));
    DI_RETURN_IF_ERROR(CudaStatus(cudaMallocHost(&host_in_, in_bytes_), "cudaMallocHost"));
    in_dev_ = dev;
    // The same offsets in both copies: the host fills its block through a plan of host pointers.
    auto layout = [&](uint8_t* base, StepInputs* in) {
      int64_t* p64 = reinterpret_cast<int64_t*>(base);
      in->pos = p64;
      in->seg_begin = p64 + B;
      int32_t* p32 = reinterpret_cast<int32_t*>(p64 + B + (B + 1) + n_r * B);
      in->tokens = p32;
      in->slot = p32 + B;
      in->seg_slot = p32 + 2 * B;
      in->out_rows = p32 + 3 * B;
      in->ratios.resize(n_r);
      for (size_t r = 0; r < n_r; ++r) {
        RatioInputs& ri = in->ratios[r];
        ri.ratio = ratios[r];
        ri.rows_per_slot = ratios[r] ? opt_.max_context / ratios[r] : 0;
        ri.comp_pos = p64 + B + (B + 1) + r * B;
        int32_t* q = p32 + 4 * B + 5 * r * B;
        ri.ring_row = q;
        ri.ring_dest = q + B;
        ri.page = q + 2 * B;
        ri.visible = q + 3 * B;
        ri.comp_dest = q + 4 * B;
      }
    };
    layout(static_cast<uint8_t*>(dev), &plan_.in);
    layout(static_cast<uint8_t*>(host_in_), &host_);
    return Status::Ok();
  }

  Status ResetSlotState(int slot) {
    DI_RETURN_IF_ERROR(ResetSlotCaches(model_, plan_, slot, stream_));
    lengths_[slot] = 0;
    return Status::Ok();
  }

  // Rows past the real ones are padding: the spare slot (opt_.slots) at position 0. The rows
  // whose logits are asked for (all rows when logit_rows is empty) come first in out_rows; the
  // rest of the bucket's entries gather row 0 for a graph's head (HeadInGraph), whose extra
  // logits nobody reads.
  void FillInputs(std::span<const int32_t> slots, std::span<const int32_t> tokens,
                  std::span<const int32_t> logit_rows, int bucket) {
    const int64_t all = opt_.slots + 1;
    if (logit_rows.empty()) {
      std::iota(host_.out_rows, host_.out_rows + bucket, 0);
    } else {
      std::copy(logit_rows.begin(), logit_rows.end(), host_.out_rows);
      std::fill(host_.out_rows + logit_rows.size(), host_.out_rows + bucket, 0);
    }
    LayOutStepRows(slots, tokens, lengths_.data(), opt_.slots, bucket,
                   {host_.tokens, host_.slot, host_.pos, host_.seg_begin, host_.seg_slot});
    for (int i = 0; i < bucket; ++i) {
      for (RatioInputs& r : host_.ratios) {
        const CacheRows c =
            CacheRowsFor(r.ratio, r.rows_per_slot, plan_.ring, all, host_.slot[i], host_.pos[i]);
        r.ring_row[i] = c.ring_row;
        r.ring_dest[i] = c.ring_dest;
        r.page[i] = c.page;
        r.visible[i] = c.visible;
        r.comp_dest[i] = c.comp_dest;
        r.comp_pos[i] = c.comp_pos;
      }
    }
  }
  Status Upload() {
    return CudaStatus(
        cudaMemcpyAsync(in_dev_, host_in_, in_bytes_, cudaMemcpyHostToDevice, stream_), "inputs");
  }

  // Whether a bucket's graph holds the LM head too, on all the bucket's rows gathered through
  // out_rows: its launch then overlaps the body's last kernel instead of waiting for the graph
  // to drain (-1 % at batch 1, bench/RESULTS-gpu.md). Only up to kGemvMaxRows rows of a bf16
  // head, where the head is the bf16 GEMV, whose row sums do not depend on the row count (so a
  // step's logits are those of the eager head on the rows asked for) and whose extra rows cost
  // little; larger buckets, and prompt chunks in them, keep the head after the graph on the
  // rows asked for only.
  bool HeadInGraph(int bucket) const {
    return bucket <= kGemvMaxRows && (model_.head.format == WeightFormat::kBF16 || opt_.cpu_order);
  }
  Status Capture(int bucket) {
    cudaGraph_t graph = nullptr;
    DI_RETURN_IF_ERROR(
        CudaStatus(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed), "capture"));
    int rc = EnqueueBody(plan_, bucket, stream_);
    if (rc == 0 && HeadInGraph(bucket)) rc = EnqueueHead(plan_, true, bucket, stream_);
    const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
    if (rc != 0 || end != cudaSuccess) {
      if (graph != nullptr) cudaGraphDestroy(graph);
      DI_RETURN_IF_ERROR(KernelStatus(rc, "captured step"));
      return CudaStatus(end, "capture");
    }
    cudaGraphExec_t exec = nullptr;
    const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    DI_RETURN_IF_ERROR(CudaStatus(inst, "graph instantiate"));
    graphs_[bucket] = exec;
    return Status::Ok();
  }

  ModelConfig cfg_;
  DeviceForwardOptions opt_;
  Status fault_ = Status::Ok();       // set by the first device fault after work was enqueued
  std::atomic<bool> faulted_{false};  // fault_ is set (any thread may read it then)
  std::vector<uint8_t> seen_;         // Validate's marks, one per slot (no allocation per step)
  DeviceMemory mem_;
  DeviceModel model_;
  StepPlan plan_;
  BranchResources branches_;  // what plan_.branches points to (declared after plan_, mem_)
  StepInputs host_;           // the host copy of the input block, laid out as plan_.in
  void* in_dev_ = nullptr;
  void* host_in_ = nullptr;
  size_t in_bytes_ = 0;
  cudaStream_t stream_ = nullptr;
  kernels::Fp8GemmContext gemm_;
  kernels::Bf16GemmContext bf16_;
  DeviceDraws draws_;
  std::vector<int32_t> merged_rows_;  // a StepMixed's rows (MergeStepRows)
  std::vector<uint8_t> merged_drawn_;
  std::vector<int64_t> lengths_;
  std::vector<int> buckets_;
  std::map<int, cudaGraphExec_t> graphs_;
};

}  // namespace

Result<std::unique_ptr<DeviceForward>> DeviceForward::Create(const Checkpoint& checkpoint,
                                                             const DeviceForwardOptions& options) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count <= options.device) {
    return Unimplemented("no usable CUDA device (" + std::to_string(count) + " visible)");
  }
  auto f = std::make_unique<DeviceForwardImpl>(options);
  DI_RETURN_IF_ERROR(f->Init(checkpoint));
  return std::unique_ptr<DeviceForward>(std::move(f));
}

}  // namespace deepinfer
