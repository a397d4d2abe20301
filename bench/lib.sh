# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# bench/lib.sh: what every benchmark script records with its figures: the commit they were
# measured at and the command that made them; and where the two sides of a client-server
# benchmark run (bench_pinning). Sourced by the bench/ scripts.

# bench_commit ROOT: `git rev-parse --short HEAD` of the tree at ROOT, with "-dirty" when it has
# uncommitted changes outside bench/results/ (the figures of an earlier run, which a benchmark
# does not read); IBV_BENCH_COMMIT when set (a script that re-runs itself in the testbed passes
# it in: the guest may not see a worktree's git directory); else "unknown".
bench_commit() {
  local root=$1 commit
  if [[ -n ${IBV_BENCH_COMMIT:-} ]]; then
    echo "$IBV_BENCH_COMMIT"
    return
  fi
  commit=$(git -c safe.directory='*' -C "$root" rev-parse --short HEAD 2>/dev/null) || {
    echo unknown
    return
  }
  if [[ -n $(git -c safe.directory='*' -C "$root" status --porcelain --untracked-files=no \
    -- . ':(exclude)bench/results' 2>/dev/null) ]]; then
    commit+=-dirty
  fi
  echo "$commit"
}

# bench_command ROOT PROGRAM ARGS...: the command line as one could type it again from ROOT
# (PROGRAM relative to ROOT when it is inside it, every argument shell-quoted).
bench_command() {
  local root=$1 program=$2
  shift 2
  program=$(realpath -s "$program" 2>/dev/null || echo "$program")
  program=${program#"$root"/}
  local text
  text=$(printf '%q ' "$program" "$@")
  echo "${text% }"
}

# perftest as a user would name it: the version of the Debian package. Its tools print another
# number (Debian's 4.5+0.17-1 says "Version: 6.06"), so both are recorded. Looked up where dpkg
# is (the host) and passed into the testbed's guest, which has no dpkg, as an IBV_* variable.
if [[ -z ${IBV_PERFTEST_PACKAGE:-} ]] && command -v dpkg-query >/dev/null 2>&1; then
  IBV_PERFTEST_PACKAGE=$(dpkg-query -W -f '${Version}' perftest 2>/dev/null)
  export IBV_PERFTEST_PACKAGE
fi

# bench_perftest_version: "4.5+0.17-1 (its tools say 6.06)", or what is known of the two.
bench_perftest_version() {
  local tool
  tool=$(ib_write_bw --version 2>/dev/null | awk '/[0-9]/ { print $NF; exit }')
  if [[ -n ${IBV_PERFTEST_PACKAGE:-} && -n $tool ]]; then
    echo "$IBV_PERFTEST_PACKAGE (its tools say $tool)"
  else
    echo "${IBV_PERFTEST_PACKAGE:-${tool:-?}}"
  fi
}

# bench_carry_env PREFIX...: testbed/run passes only IBV_* and GTEST_* variables into the
# guest, so a script that re-runs itself there would lose its own overrides (BENCH_LAT_REPEAT,
# WAIT_BENCH_GAPS, ...). On the host, before testbed/run: exports every variable whose name
# starts with a PREFIX as IBV_CARRIED_<name>. bench_restore_env, in the guest, sets them back.
bench_carry_env() {
  local prefix name
  for prefix in "$@"; do
    while IFS= read -r name; do
      if [[ $name == "$prefix"* ]]; then export "IBV_CARRIED_$name=${!name}"; fi
    done < <(compgen -e)
  done
}

# bench_restore_env: sets every IBV_CARRIED_<name> back as <name> (see bench_carry_env). Call
# it before the script reads its overrides; on the host there is none, and it does nothing.
bench_restore_env() {
  local carried
  while IFS= read -r carried; do
    if [[ $carried == IBV_CARRIED_* ]]; then export "${carried#IBV_CARRIED_}=${!carried}"; fi
  done < <(compgen -e)
}

# bench_pinning: decides where the two sides of a client-server benchmark run, the same for
# every tool it compares, and sets
#   bench_pin_server, bench_pin_client  arrays of words to put before the side's command
#                                       (empty when not pinned)
#   bench_pin_text                      what was decided, for the report
# The rule: when this machine (the guest, in the testbed) lets the process run on at least two
# CPUs, the server goes to the second of them and the client to the first (`taskset -c 1` and
# `taskset -c 0` where those are CPUs 0 and 1), so that the two busy-polling processes never
# share a CPU and do not wander between them; on one CPU nothing is pinned. BENCH_PIN=0 turns
# pinning off (for a comparison with it on). The kernel's work (Soft-RoCE, the network stack)
# is not pinned: it runs wherever the scheduler puts it.
# shellcheck disable=SC2034  # the three are read by the scripts that source this file
bench_pinning() {
  bench_pin_server=() bench_pin_client=()
  local list part lo hi c
  local -a cpus=() parts=()
  list=$(awk '/^Cpus_allowed_list:/ { print $2 }' /proc/self/status 2>/dev/null)
  [[ -n $list ]] || list=0-$(($(nproc 2>/dev/null || echo 1) - 1))
  IFS=, read -r -a parts <<<"$list"
  for part in "${parts[@]}"; do
    lo=${part%-*} hi=${part#*-}
    for ((c = lo; c <= hi && ${#cpus[@]} < 2; ++c)); do cpus+=("$c"); done
  done
  if [[ ${BENCH_PIN:-1} == 0 ]]; then
    bench_pin_text="none (BENCH_PIN=0)"
  elif ! command -v taskset >/dev/null 2>&1; then
    bench_pin_text="none (taskset is not installed)"
  elif ((${#cpus[@]} < 2)); then
    bench_pin_text="none (one CPU)"
  else
    bench_pin_server=(taskset -c "${cpus[1]}") bench_pin_client=(taskset -c "${cpus[0]}")
    bench_pin_text="server on CPU ${cpus[1]} (taskset -c ${cpus[1]}), client on CPU ${cpus[0]} (taskset -c ${cpus[0]}), for both tools"
  fi
}
