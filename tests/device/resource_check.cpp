// SPDX-License-Identifier: MIT
// The reading half of the verbs-leak check (resource_check.hpp): the totals from RDMA netlink,
// a process's own objects from `rdma -j resource show KIND`. Compiled on its own, not in a unity
// batch: GCC's -Wnull-dereference misfires on nlohmann::json's iterators when this is inlined
// into a large translation unit. The netlink macros are not used: they do not compile warning-free
// as C++ (old-style casts, sign conversions).
#include "resource_check.hpp"

#include <linux/netlink.h>
#include <rdma/rdma_netlink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

namespace ibv::test {
namespace {

/// What `command` prints on stdout and stderr, or nullopt if it can not be started.
std::optional<std::string> command_output(const std::string& command) {
  const std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(command.c_str(), "r"), ::pclose);
  if (!pipe) return std::nullopt;
  std::string text;
  std::array<char, 4096> buffer{};
  while (const std::size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe.get())) {
    text.append(buffer.data(), n);
  }
  return text;
}

/// The start of a command's output for a message: at most 200 characters, no trailing newline.
std::string output_excerpt(const std::string& text) {
  std::string excerpt = text.substr(0, 200);
  while (!excerpt.empty() && std::isspace(static_cast<unsigned char>(excerpt.back())) != 0) {
    excerpt.pop_back();
  }
  return excerpt;
}

/// The string member `key` of a JSON object ("?" if it has none).
std::string string_member(const nlohmann::json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get_ref<const std::string&>()
                                               : std::string("?");
}

/// Netlink's 4-byte alignment of messages and attributes.
constexpr std::size_t netlink_align(std::size_t length) { return (length + 3) & ~std::size_t{3}; }

/// The attributes of one netlink message or nested attribute, in order.
class NetlinkAttributes {
 public:
  NetlinkAttributes(const void* data, std::size_t length)
      : data_(static_cast<const char*>(data)), length_(length) {}

  /// Calls `visit(type, payload, payload_length)` for each well-formed attribute.
  template <typename Visit>
  void for_each(Visit visit) const {
    std::size_t offset = 0;
    constexpr std::size_t header = netlink_align(sizeof(nlattr));
    while (offset + header <= length_) {
      nlattr attribute{};
      std::memcpy(&attribute, data_ + offset, sizeof attribute);
      if (attribute.nla_len < header || offset + attribute.nla_len > length_) return;
      const auto type = static_cast<unsigned>(attribute.nla_type) &
                        ~static_cast<unsigned>(NLA_F_NESTED | NLA_F_NET_BYTEORDER);
      visit(type, data_ + offset + header, std::size_t{attribute.nla_len} - header);
      offset += netlink_align(attribute.nla_len);
    }
  }

 private:
  const char* data_;
  std::size_t length_;
};

/// A netlink string attribute's text (it ends in a NUL, which is not part of it).
std::string attribute_string(const char* payload, std::size_t length) {
  return {payload, ::strnlen(payload, length)};
}

/// Adds one device's RDMA_NLDEV_CMD_RES_GET answer (its name and a summary entry per kind of
/// object: name and current count) to `counts`.
void add_device_summary(const NetlinkAttributes& device, ResourceCounts& counts) {
  std::string name = "?";
  std::vector<std::pair<std::string, long long>> kinds;
  device.for_each([&](unsigned type, const char* payload, std::size_t length) {
    if (type == RDMA_NLDEV_ATTR_DEV_NAME) name = attribute_string(payload, length);
    if (type != RDMA_NLDEV_ATTR_RES_SUMMARY) return;
    NetlinkAttributes(payload, length).for_each([&](unsigned, const char* entry, std::size_t size) {
      std::string kind;
      std::optional<long long> current;
      NetlinkAttributes(entry, size)
          .for_each([&](unsigned field, const char* value, std::size_t n) {
            if (field == RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME) kind = attribute_string(value, n);
            if (field == RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_CURR && n >= sizeof(std::uint64_t)) {
              std::uint64_t count = 0;
              std::memcpy(&count, value, sizeof count);
              current = static_cast<long long>(count);
            }
          });
      if (!kind.empty() && current) kinds.emplace_back(kind, *current);
    });
  });
  for (const auto& [kind, count] : kinds) counts[{name, kind}] = count;
}

}  // namespace

/// Every process's (and the kernel's) objects per device and kind, as `rdma resource show` sums
/// them up, read straight from RDMA netlink (RDMA_NLDEV_CMD_RES_GET, the request the `rdma` tool
/// sends): this look runs after every device test, and starting `rdma` for it cost about 0.15 s a
/// test under the testbed's emulation, a third of the device suite. Nullopt (with `why`) if it can
/// not be read.
std::optional<ResourceCounts> total_resource_counts(std::string& why) {
  const int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_RDMA);
  if (fd < 0) {
    why = std::string("could not open an RDMA netlink socket: ") + std::strerror(errno);
    return std::nullopt;
  }
  const std::unique_ptr<const int, void (*)(const int*)> closer(&fd,
                                                                [](const int* f) { ::close(*f); });
  nlmsghdr request{};
  request.nlmsg_len = sizeof request;
  request.nlmsg_type = (RDMA_NL_NLDEV << 10) + RDMA_NLDEV_CMD_RES_GET;  // RDMA_NL_GET_TYPE
  request.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  request.nlmsg_seq = 1;
  if (::send(fd, &request, sizeof request, 0) < 0) {
    why =
        std::string("could not ask RDMA netlink for the resource summary: ") + std::strerror(errno);
    return std::nullopt;
  }
  ResourceCounts counts;
  std::vector<char> buffer(std::size_t{1} << 16);
  constexpr std::size_t header = netlink_align(sizeof(nlmsghdr));
  for (;;) {
    const ssize_t received = ::recv(fd, buffer.data(), buffer.size(), 0);
    if (received < 0) {
      if (errno == EINTR) continue;
      why = std::string("could not read RDMA netlink's resource summary: ") + std::strerror(errno);
      return std::nullopt;
    }
    const auto length = static_cast<std::size_t>(received);
    std::size_t offset = 0;
    while (offset + header <= length) {
      nlmsghdr message{};
      std::memcpy(&message, buffer.data() + offset, sizeof message);
      if (message.nlmsg_len < header || offset + message.nlmsg_len > length) break;
      if (message.nlmsg_type == NLMSG_DONE) return counts;
      if (message.nlmsg_type == NLMSG_ERROR) {
        nlmsgerr error{};
        std::memcpy(&error, buffer.data() + offset + header,
                    std::min(sizeof error, std::size_t{message.nlmsg_len} - header));
        why = std::string("RDMA netlink refused the resource summary: ") +
              std::strerror(-error.error);
        return std::nullopt;
      }
      add_device_summary(NetlinkAttributes(buffer.data() + offset + header,
                                           std::size_t{message.nlmsg_len} - header),
                         counts);
      offset += netlink_align(message.nlmsg_len);
    }
    if (received == 0) {
      why = "RDMA netlink ended the resource summary without its end message";
      return std::nullopt;
    }
  }
}

/// The same totals as `rdma -j resource show` prints them: slower (it starts the tool), for a test
/// that the netlink reading above agrees with the tool.
std::optional<ResourceCounts> tool_resource_counts(std::string& why) {
  const auto text = command_output("rdma -j resource show 2>&1");
  const auto list = text ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
  if (!list.is_array()) {
    why = text ? "'rdma -j resource show' printed no JSON list: " + output_excerpt(*text)
               : "could not run 'rdma' (iproute2)";
    return std::nullopt;
  }
  ResourceCounts counts;
  for (const auto& device : list) {
    if (!device.is_object()) continue;
    for (const auto& [kind, value] : device.items()) {
      if (kind != "ifindex" && kind != "ifname" && value.is_number_integer()) {
        counts[{string_member(device, "ifname"), kind}] = value.get<long long>();
      }
    }
  }
  return counts;
}

/// This process's objects as `rdma -j resource show KIND` lists them (only those it owns:
/// kernel objects and other processes' do not count), or nullopt (with `why`) if they can not
/// be read.
std::optional<ResourceCounts> own_resource_counts(std::string& why) {
  std::string command = "for kind in";
  for (const char* kind : kResourceKinds) command += std::string(" ") + kind;
  command += "; do rdma -j resource show $kind || echo failed; echo; done 2>&1";
  const auto text = command_output(command);
  if (!text) {
    why = "could not run 'rdma' (iproute2)";
    return std::nullopt;
  }
  const long long self = ::getpid();
  ResourceCounts counts;
  std::istringstream lines(*text);
  std::string line;
  std::size_t kind = 0;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    const auto list = nlohmann::json::parse(line, nullptr, false);
    if (!list.is_array() || kind >= kResourceKinds.size()) {
      why = "'rdma -j resource show' printed no JSON list: " + output_excerpt(*text);
      return std::nullopt;
    }
    for (const auto& object : list) {
      if (!object.is_object()) continue;
      const auto pid = object.find("pid");
      if (pid != object.end() && pid->is_number_integer() && pid->get<long long>() == self) {
        ++counts[{string_member(object, "ifname"), kResourceKinds[kind]}];
      }
    }
    ++kind;
  }
  if (kind != kResourceKinds.size()) {
    why = "'rdma -j resource show' printed " + std::to_string(kind) + " lists, not " +
          std::to_string(kResourceKinds.size()) + ": " + output_excerpt(*text);
    return std::nullopt;
  }
  return counts;
}
}  // namespace ibv::test
