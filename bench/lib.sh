# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# bench/lib.sh: what every benchmark script records with its figures: the commit they were
# measured at and the command that made them. Sourced by the bench/ scripts.

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
