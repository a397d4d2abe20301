// SPDX-License-Identifier: MIT
// One rank of a job that tests/unit/launched_job_test.cpp starts with mpirun. It makes the
// bootstrap its environment asks for (bootstrap_from_environment(), 3 s timeout) and does
// IBV_TEST_COLLECTIVES all_gathers (default 1), except that the rank IBV_TEST_LEAVING_RANK names
// leaves before the last one as IBV_TEST_LEAVING says: "crash" (exit status 3, as a crash
// would end it) or "finalize" (it closes its bootstrap and returns 0 without joining).
// Prints one line, "rank R: gathered N" or "rank R: error: WHAT" (rank "?" when there is no
// bootstrap), and exits 0 either way, so that the launcher does not end the others for it.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>
#include <string>

#include "ibv/net/bootstrap_from_environment.hpp"

namespace {

std::optional<std::string> variable(const char* name) {
  const char* value = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): one thread
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

}  // namespace

int main() {
  std::string rank = "?";
  try {
    auto bootstrap = ibv::net::bootstrap_from_environment({.timeout = std::chrono::seconds(3)});
    rank = std::to_string(bootstrap->rank());
    const int collectives = std::stoi(variable("IBV_TEST_COLLECTIVES").value_or("1"));
    for (int done = 0; done + 1 < collectives; ++done) {
      static_cast<void>(bootstrap->all_gather_bytes({}));
    }
    if (variable("IBV_TEST_LEAVING_RANK") == rank) {
      if (variable("IBV_TEST_LEAVING") == "crash") std::_Exit(3);
      bootstrap.reset();
      std::printf("rank %s: left\n", rank.c_str());
      return 0;
    }
    const auto entries = bootstrap->all_gather_bytes({});
    std::printf("rank %s: gathered %zu\n", rank.c_str(), entries.size());
  } catch (const std::exception& error) {
    std::printf("rank %s: error: %s\n", rank.c_str(), error.what());
  }
  return 0;
}
