# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# Shared helpers for scripts/*. Source it: . "$(dirname "$0")/lib.sh"   (bash)

# The repository root (absolute).
ibv_repo_root() { (cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd); }

# Prints the names of this host's RDMA devices, one a line (nothing if there are none).
ibv_host_rdma_devices() {
  local devs=""
  if [[ -d /sys/class/infiniband ]]; then
    devs=$(ls -1 /sys/class/infiniband 2>/dev/null || true)
  fi
  if [[ -z $devs ]] && command -v ibv_devices >/dev/null 2>&1; then
    # ibv_devices prints a header, a dashed line, then one device a line.
    devs=$(ibv_devices 2>/dev/null | awk 'seen && NF { print $1 } /^[[:space:]]*-+/ { seen = 1 }' || true)
  fi
  [[ -n $devs ]] && printf '%s\n' "$devs"
  return 0
}

# Where device tests and the demo run: prints "host" or "testbed".
# IBV_RUN_ON=host|testbed overrides the automatic choice.
ibv_where_to_run() {
  case ${IBV_RUN_ON:-auto} in
    host|testbed) echo "$IBV_RUN_ON"; return 0 ;;
    auto) ;;
    *) echo "IBV_RUN_ON must be host, testbed or auto (is '$IBV_RUN_ON')" >&2; return 2 ;;
  esac
  if [[ -n $(ibv_host_rdma_devices) ]]; then echo host; else echo testbed; fi
}

# Explains a testbed/run exit status (124 timeout, 125 set-up failure), or nothing.
ibv_testbed_status_text() {
  case $1 in
    124) echo "the testbed timed out (exit 124)" ;;
    125) echo "the testbed could not be set up (exit 125): see the testbed messages above" ;;
    126|127) echo "could not start the command (exit $1)" ;;
    *) if (($1 > 128)); then echo "killed by signal $(($1 - 128)) (exit $1)"; fi ;;
  esac
}

# Checks that testbed/run exists; prints why not and returns 1 otherwise.
ibv_require_testbed() {
  local root=$1
  if [[ ! -x $root/testbed/run ]]; then
    cat >&2 <<MSG
error: this machine has no RDMA device, and the QEMU Soft-RoCE testbed that stands in for one
       is not available: $root/testbed/run does not exist or is not executable.
       Either run on a machine with an RDMA device (see 'ibv_devices'), or add the testbed
       (testbed/run). IBV_RUN_ON=host forces running on this machine anyway.
MSG
    return 1
  fi
}

# On a machine with an RDMA device (IBV_RUN_ON=host): exports IBV_TEST_DEVICE, IBV_TEST_GID_INDEX
# and IBV_TEST_IP for the device tests, as the testbed does for its rxe0, unless they are set
# already: the first device with an ACTIVE port; on RoCE its first RoCE v2 GID that maps an IPv4
# address (index and address from sysfs); on InfiniBand GID index 0 and the IPv4 address of the
# device's IPoIB interface, when it has one (the rdma_cm tests need it). Prints what it chose;
# returns 1 (with the reason) when no device is ACTIVE.
ibv_export_test_device() {
  local dev="" d port gid_dir g i gid type h ip="" index="" netdev
  if [[ -z ${IBV_TEST_DEVICE:-} ]]; then
    for d in $(ibv_host_rdma_devices); do
      if grep -qs ACTIVE /sys/class/infiniband/"$d"/ports/1/state; then dev=$d; break; fi
    done
    [[ -n $dev ]] || { echo "no RDMA device here has an ACTIVE port 1 (ibv_devinfo shows the states)"; return 1; }
    export IBV_TEST_DEVICE=$dev
  fi
  dev=$IBV_TEST_DEVICE
  port=/sys/class/infiniband/$dev/ports/1
  if [[ $(cat "$port/link_layer" 2>/dev/null) == Ethernet ]]; then
    for gid_dir in "$port"/gids/*; do
      i=${gid_dir##*/}
      gid=$(cat "$gid_dir" 2>/dev/null) || continue
      [[ $gid == 0000:0000:0000:0000:0000:ffff:* ]] || continue
      type=$(cat "$port/gid_attrs/types/$i" 2>/dev/null) || continue
      [[ $type == "RoCE v2" ]] || continue
      h=${gid:30:4}${gid:35:4}
      index=$i ip=$((16#${h:0:2})).$((16#${h:2:2})).$((16#${h:4:2})).$((16#${h:6:2}))
      break
    done
  else
    index=0
    for netdev in /sys/class/infiniband/"$dev"/device/net/*; do
      [[ -e $netdev ]] || continue
      ip=$(ip -4 -o addr show dev "${netdev##*/}" 2>/dev/null | awk '{ sub(/\/.*/, "", $4); print $4; exit }')
      [[ -n $ip ]] && break
    done
  fi
  [[ -n ${IBV_TEST_GID_INDEX:-} || -z $index ]] || export IBV_TEST_GID_INDEX=$index
  [[ -n ${IBV_TEST_IP:-} || -z $ip ]] || export IBV_TEST_IP=$ip
  echo "device $IBV_TEST_DEVICE, GID index ${IBV_TEST_GID_INDEX:-(the library chooses)}, IP ${IBV_TEST_IP:-(none: the rdma_cm tests will fail)}"
}
