// SPDX-License-Identifier: MIT
// Bootstrap: what every implementation shares.
#include "ibv/net/bootstrap.hpp"

#include <cerrno>
#include <string>

namespace ibv::net {

void Bootstrap::throw_undecodable(std::uint32_t sender, const Error& error) const {
  throw Error(ErrorKind::protocol, "Bootstrap::all_gather", EPROTO,
              "rank " + std::to_string(sender) + " (" + description() +
                  ") sent an entry that does not decode: " + error.what(),
              "every rank must exchange the same type");
}

}  // namespace ibv::net
