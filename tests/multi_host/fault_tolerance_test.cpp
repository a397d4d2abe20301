// SPDX-License-Identifier: MIT
// Multi-host tests of a fault-tolerant Node, one rank per testbed host, over each bootstrap:
// detectors probing across hosts through barriers declare no live rank failed, agreements give
// every rank the same value, and a revoke by the last rank ends every rank's barrier naming it.
// With the default detector settings, on hosts that share two cores.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "support/error_matchers.hpp"
#include "test_rank.hpp"

namespace ibv::test {
namespace {
namespace multi_host_fault_tolerance_test {

using namespace std::chrono_literals;
using ibv_test::throws_error;

TEST(MultiHostFaultTolerance, NoFalseFailureAcrossHostsThenAgreementsThenARevoke) {
  Rank me(60s, WaitMode::spin(), net::FaultToleranceSettings{});
  const std::uint32_t rank = me.node.rank();
  const std::uint32_t world = me.node.world_size();
  const auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < 300; ++i) me.node.barrier();
  for (std::uint32_t i = 0; i < 5; ++i) {
    // Rank r clears bit (i + r) % 8 of 0xff; the AND clears one bit per rank (mod 8).
    const net::AgreedValue agreed = me.node.agree(0xffU & ~(1U << ((i + rank) % 8)));
    std::uint32_t expected = 0xff;
    for (std::uint32_t r = 0; r < world; ++r) expected &= ~(1U << ((i + r) % 8));
    EXPECT_EQ(agreed.flags, expected) << "agreement " << i;
    EXPECT_TRUE(agreed.failed.empty()) << "agreement " << i;
  }
  const auto took = std::chrono::steady_clock::now() - started;
  for (const auto& failure : me.node.failed_ranks()) ADD_FAILURE() << failure.to_string();
  std::printf(
      "[ rank %u ] 300 barriers and 5 agreements with the detector on: %lld ms\n", rank,
      static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));

  const std::uint32_t revoker = world - 1;
  if (rank == revoker) me.node.revoke();
  EXPECT_TRUE(throws_error(ErrorKind::revoked, [&] { me.node.barrier({.timeout = 30s}); },
                           {"revoked by rank " + std::to_string(revoker)}));
  EXPECT_EQ(me.node.revoked_by(), revoker);
  // Meet again over the bootstrap, so that no rank destroys its Node while another looks.
  me.bootstrap->barrier();
}

}  // namespace multi_host_fault_tolerance_test
}  // namespace
}  // namespace ibv::test
