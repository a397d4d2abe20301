// SPDX-License-Identifier: MIT
// Private: the checks and choices of QueuePairBuilder::build() that need the device's limits but
// create nothing, so that ChannelBuilder can run them before it creates a completion queue.
#pragma once

#include <cstdint>
#include <string_view>

#include "ibv/verbs/context.hpp"
#include "ibv/verbs/gid.hpp"
#include "ibv/verbs/port.hpp"
#include "ibv/verbs/queue_pair.hpp"

namespace ibv::detail {

/// Queue pair settings checked against a device, with every optional filled in.
struct ResolvedQueuePair {
  QueuePairSettings settings;  ///< optionals resolved (GID index on Ethernet, MTU, PSN, depths)
  PortAttributes port;
  std::uint32_t gid_index = 0;
  Gid gid;
  bool device_atomics = false;  ///< the device's atomic_cap is not NONE
};

/// Checks `settings` against `context` (port, GID index, queue depths, SGEs, read/atomic depths,
/// MTU, service level) and fills in the defaults. Throws ibv::Error naming the setting and
/// `operation`; queries the device but creates no verbs object.
[[nodiscard]] ResolvedQueuePair resolve_queue_pair(const Context& context,
                                                   const QueuePairSettings& settings,
                                                   std::string_view operation);

/// The GID at `index` of `port`, which the user set: throws ibv::Error naming gid_index and
/// `operation` (not_found, listing the valid entries) unless it is a valid entry, or
/// (invalid_argument) when it is one an address vector can not name (above 255).
[[nodiscard]] Gid checked_gid(const Context& context, PortNumber port, std::uint32_t index,
                              std::string_view operation);

}  // namespace ibv::detail
