// SPDX-License-Identifier: MIT
// libFuzzer entry point of the network_config target (fuzz/network_config_target.hpp says what it
// covers); built by the `fuzz` preset and run by scripts/fuzz.
#include <cstddef>
#include <cstdint>
#include <span>

#include "network_config_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ibv_fuzz::network_config_target(std::span<const std::uint8_t>(data, size));
  return 0;
}
