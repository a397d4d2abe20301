// SPDX-License-Identifier: MIT
// ibvcpp perf: the session. Opens and checks the device, connects over TCP (started by a launcher
// as 2 ranks, the ranks find each other through the bootstrap: launched.hpp), compares settings
// with the peer, builds one Channel and one registered buffer per queue pair, exchanges
// addresses, handshakes, then runs every size and prints the report. Each phase maps its
// failures to its exit status: device 3, connection 4, settings 2, measurement 1.
#include "ibvcpp/perf.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <utility>

#include "ibv/ibv.hpp"
#include "ibv/net/bootstrap_from_environment.hpp"
#include "ibvcpp/engine.hpp"
#include "ibvcpp/exit_code.hpp"
#include "ibvcpp/launched.hpp"
#include "ibvcpp/protocol.hpp"
#include "ibvcpp/report.hpp"
#include "ibvcpp/tcp.hpp"

namespace ibvcpp {
namespace {

/// How long a client retries a server that is not listening yet.
constexpr std::chrono::seconds kConnectRetry{5};
/// How long a launched client tries each address rank 0 published (it listens already).
constexpr std::chrono::seconds kLaunchedDialPerHost{2};

/// Runs `step`; any failure that is not a ToolError becomes one with `code`.
template <typename Step>
auto in_phase(ExitCode code, Step&& step) {
  try {
    return std::forward<Step>(step)();
  } catch (const ToolError&) {
    throw;
  } catch (const std::exception& error) {
    throw ToolError(code, error.what());
  }
}

/// The device, port and GID as this side will use them.
struct DeviceSetup {
  ibv::Context context;
  ibv::PortAttributes port;
  ibv::DeviceAttributes attributes;
  std::optional<std::uint32_t> gid_index;  // -x, else the default on Ethernet
  std::uint32_t mtu = 0;                   // -m, else the port's active MTU
};

DeviceSetup open_checked_device(const PerfOptions& options) {
  return in_phase(ExitCode::device, [&] {
    // Without -d: IBV_DEVICE (per local rank under a launcher), else the first active device.
    ibv::Context context = options.device ? ibv::open_device(*options.device)
                                          : ibv::net::open_device_from_environment();
    const ibv::PortNumber port_number{options.ib_port};
    const ibv::PortAttributes port = context.query_port(port_number);
    if (port.state != ibv::PortState::active) {
      throw ToolError(ExitCode::device,
                      context.name() + " port " + std::to_string(options.ib_port) + " is " +
                          std::string(ibv::to_string(port.state)) + ", not ACTIVE");
    }
    std::optional<std::uint32_t> gid_index = options.gid_index;
    if (gid_index) {
      (void)context.query_gid(*gid_index, port_number);  // throws, listing the valid entries
    } else if (port.link_layer == ibv::LinkLayer::ethernet) {
      gid_index = context.default_gid_index(port_number);
    }
    const std::uint32_t active = port.active_mtu.bytes();
    if (options.mtu && *options.mtu > active) {
      throw ToolError(ExitCode::device, "-m " + std::to_string(*options.mtu) +
                                            " is above the active MTU " + std::to_string(active) +
                                            " of " + context.name() + " port " +
                                            std::to_string(options.ib_port));
    }
    ibv::DeviceAttributes attributes = context.query_device();
    return DeviceSetup{std::move(context), port, std::move(attributes), gid_index,
                       options.mtu.value_or(active)};
  });
}

/// Outstanding RDMA reads per QP: as many as the device allows (perftest's default).
std::uint8_t read_depth(const ibv::DeviceAttributes& attributes) {
  const int limit = std::min({attributes.max_qp_rd_atom, attributes.max_qp_init_rd_atom, 255});
  return static_cast<std::uint8_t>(std::max(limit, 1));
}

ibv::QueuePairSettings queue_pair_settings(const PerfOptions& options, const DeviceSetup& device,
                                           std::uint32_t mtu) {
  ibv::QueuePairSettings settings;
  settings.port = ibv::PortNumber{options.ib_port};
  settings.gid_index = device.gid_index;
  settings.access = ibv::RemoteAccess::write() | ibv::RemoteAccess::read();
  // The channel signals by itself every max_send_wr / 2 unsignaled requests: leave room for
  // perftest's moderation, so that the signaling pattern is perftest's.
  std::uint32_t moderation = 1;
  for (const auto size : options.sizes)
    moderation = std::max(moderation, options.cq_moderation(size));
  settings.max_send_wr = ibv::QueueDepth(std::max({options.tx_depth, 2 * moderation, 2U}));
  settings.max_recv_wr = ibv::QueueDepth(options.test.verb == Verb::send ? options.rx_depth() : 1);
  settings.max_inline_data = ibv::InlineSize(options.inline_size);
  settings.post_interface = options.post_interface;
  settings.mtu = ibv::Mtu::from_bytes(mtu);
  if (options.test.verb == Verb::send) {
    // perftest's receiver-not-ready handling: retry until receives are posted, every 0.64 ms
    // (the test's own timeout bounds the wait).
    settings.rnr_retry = ibv::RnrRetryCount::infinite();
    settings.min_rnr_timer = ibv::RnrTimer(12);
  }
  if (options.test.verb == Verb::read) {
    settings.max_rd_atomic = ibv::ReadAtomicDepth(read_depth(device.attributes));
    settings.max_dest_rd_atomic = ibv::ReadAtomicDepth(read_depth(device.attributes));
  }
  return settings;
}

std::string hex(std::uint64_t value) {
  std::array<char, 32> text{};
  std::snprintf(text.data(), text.size(), "0x%llx", static_cast<unsigned long long>(value));
  return text.data();
}

std::string describe(const QpAddress& address) {
  if (address.datagram) return address.datagram->to_string();
  return address.endpoint.to_string() + " RKey " + hex(address.inbox.rkey()) + " VAddr " +
         hex(address.outbox.address());
}

RunInfo run_info(const PerfOptions& options, const DeviceSetup& device, std::uint32_t mtu,
                 const std::vector<engine::QueuePairSlot>& qps) {
  RunInfo info;
  info.test = options.test;
  info.client = options.is_client();
  info.device = device.context.name();
  info.ib_port = options.ib_port;
  info.link_layer = device.port.link_layer == ibv::LinkLayer::ethernet ? "Ethernet" : "IB";
  // With -R rdma_cm chose the path MTU.
  info.mtu = options.rdma_cm ? qps.front().channel->queue_pair().settings().mtu->bytes() : mtu;
  if (device.gid_index) {
    info.gid_index = qps.front().datagrams ? qps.front().datagrams->qp.gid_index()
                                           : qps.front().channel->queue_pair().gid_index();
  }
  info.connection = options.connection;
  info.qps = options.qps;
  info.iterations = options.iterations;
  info.tx_depth = options.tx_depth;
  info.rx_depth = options.rx_depth();
  info.post_list = options.post_list;
  const auto [smallest, largest] = std::ranges::minmax(options.sizes);
  info.cq_moderation = options.cq_moderation(smallest);
  if (options.cq_moderation(largest) != info.cq_moderation) {
    info.cq_moderation_large = options.cq_moderation(largest);
  }
  info.inline_size = options.test.verb == Verb::read ? 0 : options.inline_size;
  info.outstanding_reads = options.test.verb == Verb::read ? read_depth(device.attributes) : 0;
  info.post_interface = options.post_interface;
  info.report_gbits = options.report_gbits;
  info.rdma_cm = options.rdma_cm;
  return info;
}

/// -c UD: a slot's UD queue pair with its completion queues: room for the TX depth of sends
/// and for every receive kept posted, the port and GID index as for RC.
engine::DatagramLane datagram_lane(const PerfOptions& options, const DeviceSetup& device,
                                   const ibv::ProtectionDomain& pd) {
  const auto send_depth = std::max<std::uint32_t>(options.tx_depth, 1);
  const auto recv_depth = std::max<std::uint32_t>(options.rx_depth(), 1);
  ibv::CompletionQueue send_cq(device.context, static_cast<int>(send_depth));
  ibv::CompletionQueue recv_cq(device.context, static_cast<int>(recv_depth));
  ibv::UdQueuePairBuilder builder(pd, send_cq, recv_cq);
  builder.port(ibv::PortNumber{options.ib_port})
      .max_send_wr(ibv::QueueDepth(send_depth))
      .max_recv_wr(ibv::QueueDepth(recv_depth))
      .max_inline_data(ibv::InlineSize(options.inline_size));
  if (device.gid_index) builder.gid_index(*device.gid_index);
  ibv::UdQueuePair qp = builder.build();
  return {std::move(send_cq), std::move(recv_cq), std::move(qp), std::nullopt};
}

/// -c UD: the route from a slot's queue pair to the peer's, once its address is known.
ibv::AddressHandle datagram_route(const PerfOptions& options, const DeviceSetup& device,
                                  const ibv::ProtectionDomain& pd, const ibv::UdAddress& peer) {
  ibv::AddressHandleSettings route;
  route.port = ibv::PortNumber{options.ib_port};
  route.gid_index = device.gid_index;
  return ibv::AddressHandle::to(pd, peer, route);
}

/// -R: the settings of a queue pair connected with rdma_cm (which chooses the GID and the path
/// MTU), in the session's protection domain (so -d must name the device the address is on).
ibv::ConnectOptions cm_options(const PerfOptions& options, const DeviceSetup& device,
                               const ibv::ProtectionDomain& pd) {
  ibv::ConnectOptions cm;
  cm.channel.queue_pair = queue_pair_settings(options, device, device.mtu);
  cm.channel.queue_pair.gid_index.reset();
  cm.channel.queue_pair.mtu.reset();
  cm.channel.timeouts = {.operation = options.timeout, .drop = std::chrono::seconds(1)};
  cm.protection_domain = pd;
  cm.connect_timeout = options.timeout;
  return cm;
}

/// -R: connects `slot`'s channel, the client to the server's address, the server by accepting
/// (in the order the client connects); returns its endpoint, which is then only reported.
ibv::Endpoint connect_with_rdma_cm(engine::QueuePairSlot& slot, const PerfOptions& options,
                                   const DeviceSetup& device, const ibv::ProtectionDomain& pd,
                                   std::optional<ibv::ChannelListener>& listener) {
  slot.channel.emplace(in_phase(ExitCode::connection, [&] {
    return options.is_client() ? ibv::Channel::connect(*options.server, options.tcp_port,
                                                       cm_options(options, device, pd))
                               : listener->accept(options.timeout);
  }));
  return slot.channel->queue_pair().local_endpoint();
}

/// One buffer, registration and queue pair per QP into `qps`: a Channel (prepared, or
/// connected by rdma_cm with -R), or with -c UD a UD queue pair. Returns this side's addresses.
std::vector<QpAddress> make_slots(std::vector<engine::QueuePairSlot>& qps,
                                  const PerfOptions& options, const DeviceSetup& device,
                                  const ibv::ProtectionDomain& pd, std::uint32_t mtu,
                                  std::optional<ibv::ChannelListener>& cm_listener) {
  const bool datagrams = options.connection == Transport::ud;
  const ibv::ChannelBuilder builder =
      ibv::ChannelBuilder(pd)
          .queue_pair(queue_pair_settings(options, device, mtu))
          .timeouts({.operation = options.timeout, .drop = std::chrono::seconds(1)});
  std::vector<QpAddress> addresses;
  qps.reserve(options.qps);
  for (std::uint32_t i = 0; i < options.qps; ++i) {
    // A UD receive starts with the 40-byte GRH area: the inbox holds it too.
    auto& slot =
        qps.emplace_back(options.max_size() + (datagrams ? ibv::GlobalRouteHeader::kSize : 0));
    slot.mr.emplace(pd.register_remote_accessible(
        slot.buffer.bytes(), ibv::RemoteAccess::write() | ibv::RemoteAccess::read()));
    const ibv::RemoteMemoryRegion whole = slot.mr->remote();
    QpAddress address{
        {}, std::nullopt, whole.sub_region(slot.half, slot.half), whole.sub_region(0, slot.half)};
    if (datagrams) {
      address.datagram = slot.datagrams.emplace(datagram_lane(options, device, pd)).qp.address();
    } else {
      address.endpoint = options.rdma_cm
                             ? connect_with_rdma_cm(slot, options, device, pd, cm_listener)
                             : slot.prepared.emplace(builder.build()).endpoint();
    }
    addresses.push_back(address);
  }
  return addresses;
}

/// Connects each slot to the peer's queue pair: the Channel's handshake, or with -c UD a route
/// (no handshake); nothing for -R (connected by rdma_cm already).
void connect_slots(std::vector<engine::QueuePairSlot>& qps,
                   const std::vector<QpAddress>& peer_addresses, const PerfOptions& options,
                   const DeviceSetup& device, const ibv::ProtectionDomain& pd) {
  for (std::size_t i = 0; i < qps.size(); ++i) {
    auto& slot = qps[i];
    slot.peer = peer_addresses[i];
    if (options.connection == Transport::ud) {
      slot.datagrams->route.emplace(datagram_route(options, device, pd, *slot.peer.datagram));
    } else if (!options.rdma_cm) {
      slot.channel.emplace(std::move(*slot.prepared).handshake(slot.peer.endpoint));
      slot.prepared.reset();
    }
  }
}

void print(const std::string& text) {
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

/// The pair this process is one rank of, when a launcher started it as one (launched.hpp).
std::optional<LaunchedPair> launched_pair(const PerfOptions& options) {
  if (!in_phase(ExitCode::usage,
                [&] { return runs_as_launched_pair(options, ibv::net::process_environment()); })) {
    return std::nullopt;
  }
  return std::optional<LaunchedPair>(std::in_place, options);
}

/// The TCP connection: the server listens (a port in use fails here), the client dials. A
/// launched client learns where from rank 0 and records the address it reached in
/// `options.server` (-R connects there).
Connection connect_tcp(PerfOptions& options, const DeviceSetup& device, LaunchedPair* launched) {
  if (launched != nullptr && !launched->is_server()) {
    const ServerAddresses server = launched->exchange(std::nullopt);
    return dial_first(server, kLaunchedDialPerHost, options.server.emplace());
  }
  if (options.is_client()) {
    return Connection::dial(*options.server, options.tcp_port, kConnectRetry);
  }
  Listener listener = Listener::open(options.tcp_port);
  if (launched != nullptr) {
    (void)launched->exchange(
        ServerAddresses{options.tcp_port, local_addresses(device.context, options.ib_port)});
  } else if (!options.json) {
    print(
        "\n************************************\n"
        "* Waiting for client to connect... *\n"
        "************************************\n");
  }
  return listener.accept(options.timeout);
}

}  // namespace

namespace engine {

AlignedBuffer::AlignedBuffer(std::size_t size)
    : size_(size), data_(static_cast<std::byte*>(::operator new(size, kAlignment))) {
  std::memset(data_.get(), 0, size_);
}

void Session::sync() const {
  connection.send(MessageType::ready);
  (void)connection.expect(MessageType::ready, options.timeout, "the peer to get ready");
}

void post_datagram_receive(QueuePairSlot& slot, std::uint64_t size) {
  const std::array into{slot.mr->scatter(slot.inbox(ibv::GlobalRouteHeader::kSize + size))};
  ibv::ReceiveRequest request(0, into);
  slot.datagrams->qp.post_receive(request);
}

ibv::UdSendRequest datagram_to_peer(QueuePairSlot& slot, std::span<const ibv::GatherElement> data) {
  return ibv::UdSendRequest::to(0, data, *slot.datagrams->route, *slot.peer.datagram);
}

void abort_run(const std::string& message) {
  std::fflush(stdout);
  std::fprintf(stderr, "ibvcpp: %s\n", message.c_str());
  std::fflush(stderr);
  std::_Exit(static_cast<int>(ExitCode::run_failed));
}

}  // namespace engine

int run_perf(const PerfOptions& given_options) {
  // Under a launcher, rank 1 becomes the client of rank 0 once it knows where rank 0 listens.
  std::optional<LaunchedPair> launched = launched_pair(given_options);
  PerfOptions options = given_options;
  const bool client = launched ? !launched->is_server() : options.is_client();
  // Only one rank of a launched pair prints: the report (or JSON document) stays whole.
  const bool report = !launched || launched->is_server();
  const DeviceSetup device = open_checked_device(options);

  const ibv::ProtectionDomain pd =
      in_phase(ExitCode::device, [&] { return ibv::ProtectionDomain(device.context); });
  // -R: the server listens with rdma_cm before it accepts the TCP connection, so that the
  // client's rdma_cm requests find a listener once the settings agree.
  std::optional<ibv::ChannelListener> cm_listener;
  if (options.rdma_cm && !client) {
    in_phase(ExitCode::connection, [&] {
      cm_listener.emplace("0.0.0.0", options.tcp_port, cm_options(options, device, pd));
    });
  }

  std::optional<Connection> connection;
  connection.emplace(connect_tcp(options, device, launched ? &*launched : nullptr));
  connection->set_io_timeout(options.timeout);

  // Settings: both sides must run the same test; the path MTU is the smaller of the two.
  const PeerSettings mine = settings_of(options, device.mtu);
  connection->send(MessageType::settings, encode_settings(mine));
  const PeerSettings peer = decode_settings(
      connection->expect(MessageType::settings, options.timeout, "the peer's settings").text());
  if (auto mismatch = settings_mismatch(mine, peer, client)) throw UsageError(*mismatch);
  const std::uint32_t mtu = std::min(mine.mtu, peer.mtu);
  fit_datagram_sizes(options, mtu);  // -c UD: a datagram is one packet

  // One buffer, registration and queue pair per QP.
  std::vector<engine::QueuePairSlot> qps;
  const std::vector<QpAddress> addresses = in_phase(
      ExitCode::device, [&] { return make_slots(qps, options, device, pd, mtu, cm_listener); });

  // Addresses, then the handshake of every queue pair.
  connection->send(MessageType::addresses, encode_addresses(addresses));
  const auto peer_addresses = decode_addresses(
      connection->expect(MessageType::addresses, options.timeout, "the peer's addresses").payload,
      qps.size(), options.connection);
  in_phase(ExitCode::device, [&] { connect_slots(qps, peer_addresses, options, device, pd); });

  const RunInfo info = run_info(options, device, mtu, qps);
  if (report && !options.json) {
    std::string text = format_header(info);
    for (std::size_t i = 0; i < qps.size(); ++i) {
      text += " local address: " + describe(addresses[i]) + "\n";
      text += " remote address: " + describe(peer_addresses[i]) + "\n";
    }
    text += result_line() + format_column_titles(info);
    print(text);
  }

  // Both connected; from here on a broken connection is a failed run.
  engine::Session session{options, *connection, qps};
  session.sync();
  connection->set_failure_code(ExitCode::run_failed);

  std::vector<BwResult> bw_results;
  std::vector<LatResult> lat_results;
  for (std::size_t i = 0; i < options.sizes.size(); ++i) {
    const std::uint64_t size = options.sizes[i];
    if (options.test.measure == Measure::bw) {
      bw_results.push_back(engine::run_bw(session, size));
      if (report && !options.json) print(format_row(bw_results.back(), options.report_gbits));
    } else {
      lat_results.push_back(engine::run_lat(session, size));
      if (report && !options.json) print(format_row(lat_results.back()));
    }
    if (report && options.sizes.size() > 1) {
      std::fputs(format_progress(options.test, size, i + 1, options.sizes.size()).c_str(), stderr);
    }
  }
  if (report && options.json) {
    print(options.test.measure == Measure::bw ? format_json(info, bw_results)
                                              : format_json(info, lat_results));
  } else if (report) {
    print(result_line());
  }
  return static_cast<int>(ExitCode::ok);
}

}  // namespace ibvcpp
