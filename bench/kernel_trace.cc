// libdi_kernel_trace.so: a CUPTI injection library that writes every kernel a CUDA program runs,
// CUDA-graph nodes included, with its GPU start and end times, to a CSV file. It needs no change
// to the traced program and no Nsight Systems (the GPU host has neither nsys nor network):
//   CUDA_INJECTION64_PATH=/path/libdi_kernel_trace.so DI_KERNEL_TRACE=trace.csv PROGRAM ...
// then bench/kernel_trace_summary.py trace.csv. The CUDA runtime loads the library at its first
// call and calls InitializeInjection; the records are flushed when the program exits. With
// DI_KERNEL_TRACE_API=1 the runtime API calls are written too (graph 0, stream 0, name
// "api:<call>", host timestamps on the kernels' clock): whether the GPU waited for the host.
//
// Why not Nsight Compute: it times each kernel alone, after a cache flush and with clocks locked,
// so it cannot show what overlapped launches and side streams make of a step. CUPTI's activity
// records are the GPU's own timestamps of the kernels as they ran in the graph.
#include <cupti.h>
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace {

constexpr size_t kBufferBytes = size_t{8} << 20;
constexpr size_t kAlign = 8;

std::mutex g_mutex;
FILE* g_out = nullptr;
size_t g_dropped = 0;

// "void ns::(anonymous namespace)::Kernel<4, 1>(args)" -> "Kernel<4, 1>": the name the ncu
// summaries use, so profiles of both kinds line up.
std::string ShortName(const char* mangled) {
  if (mangled == nullptr) return "?";
  int status = 0;
  char* plain = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = status == 0 && plain != nullptr ? plain : mangled;
  std::free(plain);
  // Cut the parameter list: the first '(' at template depth 0 that is not "(anonymous".
  int depth = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == '<') ++depth;
    if (c == '>') --depth;
    if (c == '(' && depth == 0 && name.compare(i, 10, "(anonymous") != 0) {
      name.resize(i);
      break;
    }
  }
  for (const char* prefix : {"void ", "deepinfer::kernels::", "(anonymous namespace)::"}) {
    for (size_t at; (at = name.find(prefix)) != std::string::npos;) {
      name.erase(at, std::strlen(prefix));
    }
  }
  // A CSV field in quotes: quotes inside it doubled (operator"" names have them).
  for (size_t at = 0; (at = name.find('"', at)) != std::string::npos; at += 2)
    name.insert(at, 1, '"');
  return name;
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kAlign, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_size) {
  std::lock_guard<std::mutex> lock(g_mutex);
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
    if (g_out == nullptr) continue;
    if (record->kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
      const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
      const char* call = nullptr;
      if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, a->cbid, &call) != CUPTI_SUCCESS) {
        call = "?";
      }
      std::fprintf(g_out, "%u,0,0,0,%llu,%llu,0,0,0,0,0,0,0,\"api:%s\"\n", a->correlationId,
                   static_cast<unsigned long long>(a->start),
                   static_cast<unsigned long long>(a->end), call);
      continue;
    }
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    // A forced flush at exit may hand over a kernel whose times were never filled in.
    if (k->start == 0 || k->end < k->start) continue;
    std::fprintf(g_out, "%u,%u,%llu,%u,%llu,%llu,%d,%d,%d,%d,%d,%d,%u,\"%s\"\n", k->correlationId,
                 k->graphId, static_cast<unsigned long long>(k->graphNodeId), k->streamId,
                 static_cast<unsigned long long>(k->start), static_cast<unsigned long long>(k->end),
                 k->gridX, k->gridY, k->gridZ, k->blockX, k->blockY, k->blockZ,
                 static_cast<unsigned>(k->registersPerThread), ShortName(k->name).c_str());
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS) {
    g_dropped += dropped;
  }
  std::free(buffer);
}

void Finish() {
  cuptiActivityFlushAll(1);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_out == nullptr) return;
  if (g_dropped != 0) std::fprintf(stderr, "di_kernel_trace: %zu records dropped\n", g_dropped);
  std::fclose(g_out);
  g_out = nullptr;
}

bool Check(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return true;
  const char* message = nullptr;
  cuptiGetResultString(r, &message);
  std::fprintf(stderr, "di_kernel_trace: %s: %s\n", what, message != nullptr ? message : "?");
  return false;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection() {
  const char* path = std::getenv("DI_KERNEL_TRACE");
  g_out = std::fopen(path != nullptr ? path : "kernel_trace.csv", "w");
  if (g_out == nullptr) {
    std::perror("di_kernel_trace: the output file");
    return 0;
  }
  std::fprintf(g_out,
               "correlation,graph,node,stream,start_ns,end_ns,grid_x,grid_y,grid_z,block_x,"
               "block_y,block_z,registers,name\n");
  if (!Check(cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted), "callbacks") ||
      !Check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "kernel activity") ||
      (std::getenv("DI_KERNEL_TRACE_API") != nullptr &&
       !Check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME), "runtime activity"))) {
    std::fclose(g_out);
    g_out = nullptr;
    return 0;
  }
  std::atexit(Finish);
  return 1;
}
