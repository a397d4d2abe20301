// SPDX-License-Identifier: MIT
// ibvcpp perf: perftest-style bandwidth and latency tests over ibverbs-cpp Channels.
#pragma once

#include "ibvcpp/options.hpp"

namespace ibvcpp {

/// Runs one perf session as server or client and prints its report. Returns the exit status
/// (0); throws ToolError for failures before the measurement starts; a failure while requests
/// are in flight prints its message and ends the process with status 1 (see engine.hpp).
/// Started by a launcher as 2 ranks with no server named, rank 0 serves and rank 1 is its
/// client (launched.hpp).
int run_perf(const PerfOptions& given_options);

}  // namespace ibvcpp
