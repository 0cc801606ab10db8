#include "tools/model/device_logits.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "engine/backend/cuda/device_forward.h"

namespace deepinfer {

Result<std::vector<float>> DeviceForwardLogits(const Checkpoint& ck,
                                               const std::vector<int32_t>& tokens,
                                               const std::vector<int64_t>& chunks,
                                               const std::map<std::string, std::string>& flags) {
  const auto flag = [&](const char* k, const char* def) {
    return flags.count(k) ? flags.at(k) : std::string(def);
  };
  const std::string forward = flag("--forward", ""), kernels = flag("--kernels", "production");
  if (forward != "device" || (kernels != "production" && kernels != "cpu-order")) {
    return InvalidArgument(
        "--kernels needs --forward device (without either, logits runs Model::Forward); "
        "--forward takes device, --kernels production or cpu-order");
  }
  const bool cpu_order = kernels == "cpu-order";
  const int64_t n = static_cast<int64_t>(tokens.size()), V = ck.config.vocab_size;
  const int64_t largest = chunks.empty() ? 1 : *std::max_element(chunks.begin(), chunks.end());
  DeviceForwardOptions opt;
  opt.max_batch = static_cast<int>(largest);
  opt.max_chunk = static_cast<int>(largest);
  opt.slots = 1;
  opt.max_context = (n + 127) / 128 * 128;
  opt.cpu_order = cpu_order;
  DI_ASSIGN_OR_RETURN(auto dev, DeviceForward::Create(ck, opt));
  std::vector<float> logits(n * V);
  const std::vector<int32_t> slots(largest, 0);  // every row in slot 0
  const auto t0 = std::chrono::steady_clock::now();
  int64_t done = 0;
  for (int64_t c : chunks) {
    DI_RETURN_IF_ERROR(dev->Step({slots.data(), static_cast<size_t>(c)},
                                 {&tokens[done], static_cast<size_t>(c)}, &logits[done * V]));
    done += c;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info("device forward ({} kernels): {} steps, {:.3f} ms per step, {} MiB on the device",
               cpu_order ? "CPU-order" : "production", chunks.size(), 1e3 * secs / chunks.size(),
               dev->device_bytes() >> 20);
  return logits;
}

}  // namespace deepinfer
