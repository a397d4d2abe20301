// SPDX-License-Identifier: MIT
// The config loader fuzz target: ibv::net::NetworkConfig::from_json on arbitrary text. Called
// by libFuzzer (fuzz/network_config_fuzzer.cpp) and by the unit test that replays the committed
// corpus and regression inputs (tests/unit/fuzz_corpus_test.cpp).
//
// Asserted besides "no crash" (an ibv_fuzz::InvariantViolation escapes otherwise): only
// ibv::Error escapes, of kind invalid_argument (EINVAL) with a non-empty message; an accepted
// config holds what NetworkConfig promises (1 .. kMaxHosts hosts sorted by rank 0..N-1,
// non-empty names without blanks, ports 1..65535, no two ranks on one host and port);
// from_json(to_json(c)) == c; and NetworkConfigBuilder builds the same config from its hosts.
#pragma once

#include <cstdint>
#include <span>

namespace ibv_fuzz {

/// Runs one input (the JSON text). Returns normally for any input the library handles as
/// documented; throws InvariantViolation when it does not.
void network_config_target(std::span<const std::uint8_t> input);

}  // namespace ibv_fuzz
