// deepinferd's option table (internal to daemon/config.cc): for each key its usage text, its
// value parser and setter, and the comparison ChangedKeys and reloads use.
#pragma once

#include <string_view>
#include <vector>

#include "daemon/config.h"

namespace deepinfer::daemon {

/// One option: its usage text, the setter that parses a value into DaemonConfig, and whether
/// two configs agree on it.
struct OptionSpec {
  DaemonOptionInfo info;
  Status (*set)(DaemonConfig&, std::string_view);
  bool (*same)(const DaemonConfig&, const DaemonConfig&);
};

/// Every option, in usage order.
const std::vector<OptionSpec>& OptionTable();
/// The option with this config-file key, or null.
const OptionSpec* FindOption(std::string_view key);

}  // namespace deepinfer::daemon
