#include "tools/model/device_logits.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "engine/backend/cuda/device_forward.h"

namespace deepinfer {

Result<std::vector<float>> DeviceForwardLogits(const Checkpoint& ck,
                                               const std::vector<int32_t>& tokens,
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
  DeviceForwardOptions opt;
  opt.max_batch = 1;
  opt.slots = 1;
  opt.max_context = (n + 127) / 128 * 128;
  opt.cpu_order = cpu_order;
  DI_ASSIGN_OR_RETURN(auto dev, DeviceForward::Create(ck, opt));
  std::vector<float> logits(n * V);
  const int32_t slot = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t t = 0; t < n; ++t) {
    DI_RETURN_IF_ERROR(dev->Step({&slot, 1}, {&tokens[t], 1}, &logits[t * V]));
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info(
      "device forward ({} kernels): {} decode steps, {:.3f} ms per step, {} MiB on the "
      "device",
      cpu_order ? "CPU-order" : "production", n, 1e3 * secs / n, dev->device_bytes() >> 20);
  return logits;
}

}  // namespace deepinfer
