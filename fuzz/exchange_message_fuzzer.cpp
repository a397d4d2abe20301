// SPDX-License-Identifier: MIT
// libFuzzer entry point of the exchange_message target (fuzz/exchange_message_target.hpp says what
// it covers); built by the `fuzz` preset and run by scripts/fuzz.
#include <cstddef>
#include <cstdint>
#include <span>

#include "exchange_message_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ibv_fuzz::exchange_message_target(std::span<const std::uint8_t>(data, size));
  return 0;
}
