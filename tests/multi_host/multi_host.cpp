// SPDX-License-Identifier: MIT
// The environment of a multi-host test rank (see multi_host.hpp).
#include "multi_host.hpp"

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>

#include "ibv/net/exchanger.hpp"
#include "ibv/net/pmix_bootstrap.hpp"
#include "ibv/net/rendezvous.hpp"
#include "ibv/verbs/device.hpp"

namespace ibv::test {
namespace {

std::optional<std::string> optional_env(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

std::string required_env(const std::string& name) {
  auto value = optional_env(name);
  if (!value) {
    throw std::runtime_error(name +
                             " is not set: start this program with tests/multi_host/run, which "
                             "sets it for every rank");
  }
  return *value;
}

/// A whole number in [min, max], else std::runtime_error naming the variable.
std::uint32_t parse_number(const std::string& name, const std::string& text, std::uint32_t min,
                           std::uint32_t max) {
  std::uint32_t value = 0;
  const char* end = text.data() + text.size();
  const auto [last, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc{} || last != end || value < min || value > max) {
    throw std::runtime_error(name + "='" + text + "' is not a whole number from " +
                             std::to_string(min) + " to " + std::to_string(max));
  }
  return value;
}

}  // namespace

MultiHost MultiHost::from_environment() {
  MultiHost self;
  self.world_size_ = parse_number("IBV_TEST_WORLD", required_env("IBV_TEST_WORLD"), 1, kPortSpan);
  self.rank_ =
      parse_number("IBV_TEST_RANK", required_env("IBV_TEST_RANK"), 0, self.world_size_ - 1);
  self.device_ = required_env("IBV_TEST_DEVICE");
  if (auto index = optional_env("IBV_TEST_GID_INDEX")) {
    self.gid_index_ = parse_number("IBV_TEST_GID_INDEX", *index, 0, 65535);
  }
  self.base_port_ = static_cast<std::uint16_t>(parse_number(
      "IBV_TEST_BASE_PORT", required_env("IBV_TEST_BASE_PORT"), 1, 65535 - kPortSpan + 1));
  for (std::uint32_t k = 0; k < self.world_size_; ++k) {
    const std::string prefix = "IBV_TEST_RANK" + std::to_string(k);
    self.ips_.push_back(required_env(prefix + "_IP"));
    self.devices_.push_back(required_env(prefix + "_DEVICE"));
  }
  if (auto kind = optional_env("IBV_TEST_BOOTSTRAP")) {
    if (*kind != "hosts" && *kind != "rendezvous" && *kind != "pmix") {
      throw std::runtime_error("IBV_TEST_BOOTSTRAP='" + *kind +
                               "' is none of hosts, rendezvous and pmix");
    }
    self.bootstrap_kind_ = *kind;
  }
  return self;
}

std::shared_ptr<net::Bootstrap> MultiHost::bootstrap(std::chrono::milliseconds timeout) {
  if (bootstrap_kind_ == "pmix") {
    if (!pmix_) {
      auto pmix = std::make_shared<net::PmixBootstrap>(net::PmixOptions{.timeout = timeout});
      if (pmix->rank() != rank_ || pmix->world_size() != world_size_) {
        throw std::runtime_error("PMIx says rank " + std::to_string(pmix->rank()) + " of " +
                                 std::to_string(pmix->world_size()) + ", the environment rank " +
                                 std::to_string(rank_) + " of " + std::to_string(world_size_));
      }
      pmix_ = std::move(pmix);
    }
    return pmix_;
  }
  const std::uint16_t offset = fresh_port_offset();
  if (bootstrap_kind_ == "rendezvous") {
    return std::make_shared<net::Rendezvous>(
        net::RootAddress{.host = ip(0), .port = port(0, offset)}, rank_, world_size_,
        net::RendezvousOptions{.timeout = timeout, .listen_address = ip(0)});
  }
  return std::make_shared<net::Exchanger>(config(offset), rank_,
                                          net::ExchangerOptions{.timeout = timeout});
}

const std::string& MultiHost::device(std::uint32_t k) const {
  if (k >= world_size_) {
    throw std::out_of_range("rank " + std::to_string(k) + " does not exist: world size " +
                            std::to_string(world_size_));
  }
  return devices_[k];
}

const std::string& MultiHost::ip(std::uint32_t k) const {
  if (k >= world_size_) {
    throw std::out_of_range("rank " + std::to_string(k) + " does not exist: world size " +
                            std::to_string(world_size_));
  }
  return ips_[k];
}

std::uint16_t MultiHost::port(std::uint32_t k, std::uint16_t port_offset) const {
  if (k >= world_size_) {
    throw std::out_of_range("rank " + std::to_string(k) + " does not exist: world size " +
                            std::to_string(world_size_));
  }
  const std::uint64_t slot = (std::uint64_t{port_offset} * world_size_) + k;
  const std::uint64_t port = base_port_ + slot;
  if (slot >= kPortSpan || port > std::numeric_limits<std::uint16_t>::max()) {
    throw std::out_of_range("port offset " + std::to_string(port_offset) +
                            " is too large: " + std::to_string(world_size_) + " ranks have " +
                            std::to_string(kPortSpan / world_size_) + " port offsets");
  }
  return static_cast<std::uint16_t>(port);
}

net::NetworkConfig MultiHost::config(std::uint16_t port_offset) const {
  net::NetworkConfigBuilder builder;
  for (std::uint32_t k = 0; k < world_size_; ++k) {
    builder.add_host({.rank = k,
                      .hostname = ip(k),
                      .port = port(k, port_offset),
                      .ibdev = device(k),
                      .comment = {}});
  }
  return builder.build();
}

std::uint16_t MultiHost::fresh_port_offset() {
  if (next_port_offset_ >= kPortSpan / world_size_) {
    throw std::out_of_range("fresh_port_offset: all " + std::to_string(kPortSpan / world_size_) +
                            " port offsets of this run are used up");
  }
  return next_port_offset_++;
}

Context MultiHost::open_device() const { return ibv::open_device(device_); }

std::string MultiHost::to_string() const {
  return "[ rank " + std::to_string(rank_) + "/" + std::to_string(world_size_) + " ] device " +
         device_ + ", GID index " +
         (gid_index_ ? std::to_string(*gid_index_) : std::string("default")) + ", IP " +
         ips_[rank_] + ", bootstrap " + bootstrap_kind_;
}

MultiHost& multi_host() {
  static MultiHost instance = MultiHost::from_environment();
  return instance;
}

}  // namespace ibv::test
