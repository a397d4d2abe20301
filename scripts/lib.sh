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
