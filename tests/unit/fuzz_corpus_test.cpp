// SPDX-License-Identifier: MIT
// Replays every committed fuzz input, the seed corpus (fuzz/corpus/<target>/) and the inputs
// that once broke the library (fuzz/regressions/<target>/), through the same target functions
// libFuzzer runs (fuzz/*_target.hpp), so that `make test` checks them with any compiler and
// without libFuzzer.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "exchange_message_target.hpp"
#include "network_config_target.hpp"

namespace {

using Target = void (*)(std::span<const std::uint8_t>);

std::vector<std::uint8_t> read_bytes(const std::filesystem::path& path) {
  std::ifstream stream(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(stream), std::istreambuf_iterator<char>()};
}

// Runs every file of fuzz/<kind>/<target>/ through `target`; returns how many there were.
std::size_t replay(const std::string& kind, const std::string& name, Target target) {
  const std::filesystem::path directory = std::filesystem::path(IBV_FUZZ_DIR) / kind / name;
  if (!std::filesystem::is_directory(directory)) return 0;
  std::size_t count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(directory)) {
    if (!entry.is_regular_file()) continue;
    ++count;
    const std::vector<std::uint8_t> input = read_bytes(entry.path());
    try {
      target(input);
    } catch (const std::exception& error) {
      ADD_FAILURE() << entry.path() << ": " << error.what();
    } catch (...) {
      ADD_FAILURE() << entry.path() << ": an exception that is not a std::exception";
    }
  }
  return count;
}

TEST(FuzzCorpus, ExchangeMessageSeedsPass) {
  EXPECT_GE(replay("corpus", "exchange_message", ibv_fuzz::exchange_message_target), 40U);
}

TEST(FuzzCorpus, ExchangeMessageRegressionsPass) {
  EXPECT_GE(replay("regressions", "exchange_message", ibv_fuzz::exchange_message_target), 1U);
}

TEST(FuzzCorpus, NetworkConfigSeedsPass) {
  EXPECT_GE(replay("corpus", "network_config", ibv_fuzz::network_config_target), 20U);
  // No regression input so far: any file added to fuzz/regressions/network_config/ runs too.
  EXPECT_EQ(replay("regressions", "network_config", ibv_fuzz::network_config_target), 0U);
}

// The targets accept inputs too short to mean anything (libFuzzer starts with the empty one).
TEST(FuzzCorpus, TargetsAcceptEmptyInput) {
  EXPECT_NO_THROW(ibv_fuzz::exchange_message_target({}));
  EXPECT_NO_THROW(ibv_fuzz::network_config_target({}));
}

}  // namespace
