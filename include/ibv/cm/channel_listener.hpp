// SPDX-License-Identifier: MIT
// ChannelListener: accepts Channels that clients open with Channel::connect (or rdma_cm
// clients such as rdma-core's rping and ucmatose) on an IP address and port.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "ibv/channel/channel.hpp"
#include "ibv/cm/connect_options.hpp"
#include "ibv/duration.hpp"

namespace ibv {

/// Listens for rdma_cm connection requests on one address and port; accept() turns each into a
/// connected Channel built with the listener's ConnectOptions (with a protection domain in the
/// options, every accepted channel shares it). Move-only; one thread at a time.
///
///     ibv::ChannelListener listener("0.0.0.0", 7471, options);
///     ibv::Channel channel = listener.accept(std::chrono::seconds(10));
///
/// The constructor checks the address (an IPv4 or IPv6 literal; "" or "0.0.0.0" / "::" listen
/// on every address), the options, and binds and listens: ibv::Error invalid_argument for bad
/// input, connection (EADDRINUSE) when another listener has the port, not_found when the
/// address is not one of this host's. Port 0 picks a free port: see port(). Destroying the
/// listener stops listening (clients then see "no listener"); accepted channels live on.
class ChannelListener {
 public:
  /// Listens on `address` and `port` (checks and errors: see the class comment); `options`
  /// apply to every accepted channel, `backlog` bounds the connection requests not yet
  /// accepted.
  ChannelListener(std::string_view address, std::uint16_t port, ConnectOptions options = {},
                  int backlog = 16);
  /// Takes over the listener; the moved-from object listens no more.
  ChannelListener(ChannelListener&&) noexcept;
  /// Stops this listener (as the destructor), then takes over the other.
  ChannelListener& operator=(ChannelListener&&) noexcept;
  ChannelListener(const ChannelListener&) = delete;
  ChannelListener& operator=(const ChannelListener&) = delete;
  ~ChannelListener();

  /// Waits up to `timeout` for a connection request, builds the channel on the device the
  /// request came in on (a protection domain from the options must be on it), and accepts it:
  /// returns once the client has confirmed (within the options' connect_timeout). Throws
  /// ibv::Error: invalid_argument for a timeout that is not positive; timeout when no request
  /// came; for a request it can not take (protection domain on another device, settings the
  /// device can not meet) the error of building the channel, after rejecting the request so
  /// that the client learns at once; connection when the client gave up meanwhile.
  [[nodiscard]] Channel accept(Duration timeout);

  /// Waits up to `timeout` for a connection request and rejects it (the client's connect
  /// fails with "rejected by the server"). Returns false when no request came in time.
  bool reject(Duration timeout);

  /// The port listened on (the one chosen by the system when 0 was given).
  [[nodiscard]] std::uint16_t port() const noexcept;
  /// The address listened on, as given ("0.0.0.0" for any).
  [[nodiscard]] const std::string& address() const noexcept;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace ibv
