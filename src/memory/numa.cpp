// SPDX-License-Identifier: MIT
// NUMA placement: device nodes from sysfs (PCI device, or the netdev under a software device),
// thread pinning with sched_setaffinity, CPU list parsing.
#include "ibv/memory/numa.hpp"

#include <fcntl.h>
#include <numa.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <filesystem>
#include <memory>
#include <sstream>

#include "ibv/error.hpp"
#include "memory/sysfs.hpp"

namespace ibv {
namespace detail {

std::optional<std::string> read_text_file(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  std::array<char, 4096> chunk{};
  for (;;) {
    const ssize_t got = read(fd, chunk.data(), chunk.size());
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      close(fd);
      if (got < 0) return std::nullopt;
      return text;
    }
    text.append(chunk.data(), static_cast<std::size_t>(got));
  }
}

std::optional<long long> read_integer_file(const std::string& path) {
  const auto text = read_text_file(path);
  if (!text) return std::nullopt;
  const auto begin = text->find_first_not_of(" \t\n");
  if (begin == std::string::npos) return std::nullopt;
  long long value = 0;
  const char* end = text->data() + text->size();
  const auto [at, ec] = std::from_chars(text->data() + begin, end, value);
  if (ec != std::errc{}) return std::nullopt;
  if (std::any_of(at, end, [](char c) { return c != ' ' && c != '\t' && c != '\n'; })) {
    return std::nullopt;
  }
  return value;
}

std::string size_text(std::size_t bytes) {
  constexpr std::size_t kKiB = 1024;
  if (bytes != 0 && bytes % (kKiB * kKiB * kKiB) == 0) {
    return std::to_string(bytes / (kKiB * kKiB * kKiB)) + " GiB";
  }
  if (bytes != 0 && bytes % (kKiB * kKiB) == 0)
    return std::to_string(bytes / (kKiB * kKiB)) + " MiB";
  if (bytes != 0 && bytes % kKiB == 0) return std::to_string(bytes / kKiB) + " KiB";
  return std::to_string(bytes) + " B";
}

namespace {

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// The netdev under a software RDMA device: rxe's `parent` attribute, else the GID table.
std::optional<std::string> netdev_of(const std::string& device_dir) {
  if (auto parent = read_text_file(device_dir + "/parent")) {
    if (auto name = trimmed(*parent); !name.empty()) return name;
  }
  for (int index = 0; index < 4; ++index) {
    if (auto ndev =
            read_text_file(device_dir + "/ports/1/gid_attrs/ndevs/" + std::to_string(index))) {
      if (auto name = trimmed(*ndev); !name.empty()) return name;
    }
  }
  return std::nullopt;
}

std::string listing(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : ", ") + name;
  return text.empty() ? std::string("none") : text;
}

}  // namespace

DeviceNumaNode device_numa_node_in(const std::string& sys_root, std::string_view device_name) {
  const std::string name(device_name);
  const std::string class_dir = sys_root + "/class/infiniband";
  const std::string device_dir = class_dir + "/" + name;
  if (name.empty() || name.find('/') != std::string::npos || !std::filesystem::exists(device_dir)) {
    throw Error(ErrorKind::not_found, "device_numa_node", ENODEV,
                "no RDMA device \"" + name + "\" in " + class_dir +
                    " (devices: " + listing(class_dir) + ")");
  }
  DeviceNumaNode result{name, std::nullopt, {}, {}};
  const std::string own = device_dir + "/device/numa_node";
  if (const auto node = read_integer_file(own)) {
    if (*node >= 0) {
      result.node = static_cast<int>(*node);
      result.source = own;
    } else {
      result.reason = own + " is " + std::to_string(*node) +
                      ": the device reports no NUMA affinity (a single-node machine, or firmware "
                      "that does not say)";
    }
    return result;
  }
  const auto netdev = netdev_of(device_dir);
  if (!netdev) {
    result.reason = name + " has no device of its own (" + own +
                    " is missing) and names no network device (no parent, no ndevs in its GID "
                    "table)";
    return result;
  }
  const std::string via = sys_root + "/class/net/" + *netdev + "/device/numa_node";
  if (const auto node = read_integer_file(via)) {
    if (*node >= 0) {
      result.node = static_cast<int>(*node);
      result.source = via;
    } else {
      result.reason = name + " is a software device over " + *netdev + ", whose device reports " +
                      "no NUMA affinity (" + via + " is " + std::to_string(*node) + ")";
    }
    return result;
  }
  result.reason = name + " has no device of its own (a software device such as rxe) and its " +
                  "network device " + *netdev +
                  " has none either (a virtual netdev: dummy, veth, bridge, lo), so " + via +
                  " does not exist";
  return result;
}

std::vector<int> node_cpus_in(const std::string& sys_root, int node) {
  const std::string node_dir = sys_root + "/devices/system/node";
  if (!std::filesystem::exists(node_dir)) {
    throw Error(ErrorKind::unsupported, "pin_thread_to_node", ENOENT,
                "NUMA node " + std::to_string(node) + " asked for, but " + node_dir +
                    " does not exist (a kernel without NUMA support)");
  }
  const std::string file = node_dir + "/node" + std::to_string(node) + "/cpulist";
  const auto text = node < 0 ? std::nullopt : read_text_file(file);
  if (!text) {
    const auto online = read_text_file(node_dir + "/online");
    throw Error(ErrorKind::not_found, "pin_thread_to_node", ENODEV,
                "NUMA node " + std::to_string(node) + " does not exist; nodes online: " +
                    (online ? trimmed(*online) : std::string("unknown")),
                "see " + node_dir + "/ or `numactl --hardware`");
  }
  return parse_cpu_list(*text);
}

}  // namespace detail

std::vector<int> parse_cpu_list(std::string_view text) {
  constexpr int kMaxCpu = 1 << 20;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  std::vector<int> cpus;
  const auto fail = [&](std::string_view part, std::string_view problem) {
    throw_invalid_argument("parse_cpu_list", "CPU list entry \"" + std::string(part) + "\"",
                           problem);
  };
  const auto number = [&](std::string_view part, std::string_view digits) {
    int value = 0;
    const auto [at, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (digits.empty() || ec != std::errc{} || at != digits.data() + digits.size() || value < 0 ||
        value > kMaxCpu) {
      fail(part, "is not a number or a range (expected e.g. 0-3,8)");
    }
    return value;
  };
  while (!text.empty()) {
    const auto comma = text.find(',');
    const std::string_view part = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    if (comma != std::string_view::npos && text.empty()) fail(part, "is followed by a lone comma");
    const auto dash = part.find('-');
    const int first = number(part, part.substr(0, dash));
    const int last = dash == std::string_view::npos ? first : number(part, part.substr(dash + 1));
    if (last < first) fail(part, "is a range that ends before it starts");
    for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string format_cpu_list(std::span<const int> cpus) {
  std::string text;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!text.empty()) text += ',';
    text += std::to_string(cpus[i]);
    if (j > i) text += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return text;
}

std::string DeviceNumaNode::to_string() const {
  if (node) return device + ": NUMA node " + std::to_string(*node) + " (from " + source + ")";
  return device + ": NUMA node unknown: " + reason;
}

DeviceNumaNode device_numa_node(std::string_view device_name) {
  return detail::device_numa_node_in("/sys", device_name);
}

DeviceNumaNode device_numa_node(const Context& context) { return device_numa_node(context.name()); }

std::string ThreadPlacement::to_string() const {
  return "thread pinned to NUMA node " + std::to_string(node) + ": CPUs " + format_cpu_list(cpus);
}

ThreadPlacement pin_thread_to_node(int node) {
  constexpr std::string_view kOperation = "pin_thread_to_node";
  const std::vector<int> cpus = detail::node_cpus_in("/sys", node);
  if (cpus.empty()) {
    throw Error(ErrorKind::unsupported, kOperation, EINVAL,
                "NUMA node " + std::to_string(node) + " has no CPUs (a memory-only node)");
  }
  const auto set_cpus = static_cast<std::size_t>(std::max(cpus.back() + 1, 4096));
  const auto free_set = [](cpu_set_t* set) { CPU_FREE(set); };
  std::unique_ptr<cpu_set_t, decltype(free_set)> set(CPU_ALLOC(set_cpus), free_set);
  if (!set) throw Error(ErrorKind::resource, kOperation, ENOMEM, "CPU_ALLOC");
  const std::size_t set_size = CPU_ALLOC_SIZE(set_cpus);
  CPU_ZERO_S(set_size, set.get());
  for (const int cpu : cpus) CPU_SET_S(static_cast<std::size_t>(cpu), set_size, set.get());
  if (sched_setaffinity(0, set_size, set.get()) != 0) {
    const int error = errno;
    throw Error(error == EINVAL ? ErrorKind::invalid_argument : ErrorKind::permission,
                "sched_setaffinity", error,
                "pinning this thread to NUMA node " + std::to_string(node) + " (CPUs " +
                    format_cpu_list(cpus) + ")",
                error == EINVAL ? "none of these CPUs is allowed for this process (cpuset "
                                  "cgroup, taskset); see /proc/self/status Cpus_allowed_list"
                                : "");
  }
  ThreadPlacement placement{node, {}};
  CPU_ZERO_S(set_size, set.get());
  if (sched_getaffinity(0, set_size, set.get()) == 0) {
    for (std::size_t cpu = 0; cpu < set_cpus; ++cpu) {
      if (CPU_ISSET_S(cpu, set_size, set.get())) placement.cpus.push_back(static_cast<int>(cpu));
    }
  }
  return placement;
}

std::string DevicePlacement::to_string() const {
  return device.to_string() + "; " + (thread ? thread->to_string() : "thread not pinned");
}

DevicePlacement pin_thread_to_device(const Context& context) {
  DevicePlacement placement{device_numa_node(context), std::nullopt};
  if (placement.device.node) placement.thread = pin_thread_to_node(*placement.device.node);
  return placement;
}

AllocationOptions near_device(const Context& context, AllocationOptions options) {
  if (const auto node = device_numa_node(context).node) options.numa_node = node;
  return options;
}

std::vector<int> numa_nodes() {
  if (numa_available() < 0) {
    throw Error(ErrorKind::unsupported, "numa_nodes", ENOSYS,
                "NUMA is not available here (get_mempolicy fails)",
                "a kernel without CONFIG_NUMA, or a seccomp policy (containers) that refuses the "
                "NUMA system calls");
  }
  std::vector<int> nodes;
  for (int node = 0; node <= numa_max_node(); ++node) {
    if (numa_bitmask_isbitset(numa_all_nodes_ptr, static_cast<unsigned>(node)) != 0) {
      nodes.push_back(node);
    }
  }
  return nodes;
}

}  // namespace ibv
