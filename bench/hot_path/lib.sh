# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# bench/hot_path/lib.sh: callgrind runs of the hot-path programs, shared by bench/hot_path/run
# (the report) and bench/hot_path/guard (the regression guard). Sourced, not run.

# hot_path_callgrind DIR RUN NAMES COMMAND...: runs COMMAND (one program measuring several
# variants in turn) under callgrind, counting only the measured loops: callgrind starts a fresh
# count on entering a measured_* function and writes it out on entering end_of_measurement
# (--dump-before), so set-up and warm-ups are not counted. NAMES (space-separated) names the
# measured parts in the order the program measures them (the order of its arguments): the k-th
# part written on entering end_of_measurement is the k-th name's. Leaves DIR/RUN.log (the
# program's output) and, per name, DIR/NAME.out (its measured part) and DIR/NAME.tsv
# (callgrind.awk's figures); prints "NAME: FAILED ..." for each name without a part and returns
# 1 when the program failed or a part is missing (the parts written before a failure are kept).
# IBV_BENCH_RUN_TIMEOUT (1800 s) bounds the run.
hot_path_callgrind() {
  local dir=$1 run=$2 names=$3
  shift 3
  local awk_file
  awk_file="$(dirname "${BASH_SOURCE[0]}")/callgrind.awk"
  rm -f "$dir/$run.dump"*
  timeout "${IBV_BENCH_RUN_TIMEOUT:-1800}" valgrind --tool=callgrind \
    --dump-before='*measured_*' --dump-before='*end_of_measurement*' \
    --callgrind-out-file="$dir/$run.dump" "$@" >"$dir/$run.log" 2>&1
  local rc=$?
  # The parts that end where end_of_measurement begins are the measured loops, in order
  # (callgrind numbers its dumps .1, .2, ...).
  local -a parts
  mapfile -t parts < <(grep -l '^desc: Trigger: --dump-before=.*end_of_measurement' \
    "$dir/$run.dump".* 2>/dev/null | sort -V)
  local name k=0 missing=0
  for name in $names; do
    if [[ -n ${parts[k]:-} ]]; then
      mv "${parts[k]}" "$dir/$name.out"
      awk -f "$(dirname "$awk_file")/../callgrind_names.awk" -f "$awk_file" "$dir/$name.out" \
        >"$dir/$name.tsv"
    else
      rm -f "$dir/$name.out" "$dir/$name.tsv"
      echo "  $name: FAILED (exit $rc; $dir/$run.log)"
      missing=$((missing + 1))
    fi
    k=$((k + 1))
  done
  rm -f "$dir/$run.dump"*
  if ((rc != 0 || missing > 0)); then
    echo "  $run: exit $rc, $missing of the measurements missing"
    tail -n 5 "$dir/$run.log" | sed 's/^/    | /'
    return 1
  fi
}

# hot_path_total DIR NAME: all instructions of the measured loop of NAME (hot_path_callgrind).
hot_path_total() {
  awk -F'\t' '$1 == "total" { print $2 }' "$1/$2.tsv"
}

# hot_path_requests STYLE N: the requests a variant of STYLE measures when asked for N (the
# programs' first argument): N, or in a batch of 16 (batch16, raw-batch16), whole batches of 16,
# ceil(N / 16) of them.
hot_path_requests() {
  case $1 in
    batch16 | raw-batch16) echo $(((($2 + 15) / 16) * 16)) ;;
    *) echo "$2" ;;
  esac
}

# The summaries of a measured part's figures (DIR/NAME.tsv, hot_path_callgrind), shared by
# bench/hot_path/run and bench/datagram_path/run so that their reports count alike.

# hot_path_poll_function TSV CALLER: the provider's poll_cq, found as the function of libibverbs
# or the provider that CALLER (a raw loop's polling function, wait_for) calls: by name, or by
# address in a provider without symbols, like Soft-RoCE's. Prints nothing when not found.
hot_path_poll_function() {
  awk -F'\t' -v caller="$2" '$1 == "incl" && ($2 ~ /libibverbs|rdmav[0-9]/) { verbs[$3] = 1 }
    $1 == "edge" && $2 == caller { callee[$3] = 1 }
    END { for (f in callee) if (f in verbs) print f }' "$1" 2>/dev/null | head -n 1
}

# hot_path_summary TSV NAME OP STYLE N POLL_FUNCTION PROGRAM: one tab-separated line of figures
# per unit (N units measured: requests, datagrams): name op style total polls mallocs
# clock_reads, then per object group, then N. Object groups: verbs (libibverbs and the
# provider), malloc (libc's malloc/free), libc (the rest), libstdc++, ibverbs-cpp, program (the
# object whose path matches the regular expression PROGRAM), other (ld.so, vdso). CQ polls are
# the calls of POLL_FUNCTION (hot_path_poll_function); mallocs the calls of malloc; clock reads
# the calls of steady_clock::now. Prints nothing when TSV does not exist.
hot_path_summary() {
  local tsv=$1
  [[ -f $tsv ]] || return 0
  awk -F'\t' -v name="$2" -v op="$3" -v style="$4" -v n="$5" -v poll_function="$6" \
    -v program="$7" '
    function group(object, fn) {
      if (object ~ /libibverbs-cpp/) return "ibverbs_cpp"
      if (object ~ /libibverbs|rdmav[0-9]/) return "verbs"
      if (object ~ /libc\.so/) return (fn ~ /^(malloc|free|cfree|_int_free|_int_malloc|tcache|__libc_malloc|__libc_free|malloc_consolidate)/) ? "malloc" : "libc"
      if (object ~ /libstdc\+\+/) return "libstdcxx"
      if (object ~ program) return "program"
      return "other"
    }
    $1 == "total" { total = $2 }
    $1 == "self" { by[group($2, $3)] += $4 }
    $1 == "calls" && $2 == poll_function { polls += $3 }
    $1 == "calls" && $2 == "malloc" { mallocs += $3 }
    $1 == "calls" && $2 ~ /steady_clock::now/ { clocks += $3 }
    END {
      printf "%s\t%s\t%s\t%.1f\t%.3f\t%.3f\t%.3f", name, op, style, total / n, polls / n, mallocs / n, clocks / n
      split("verbs malloc libc libstdcxx ibverbs_cpp program other", groups, " ")
      for (i = 1; i <= 7; ++i) printf "\t%.1f", by[groups[i]] / n
      printf "\t%d\n", n
    }' "$tsv"
}

# hot_path_functions TSV N: the functions of a measured part (and what they call) per unit (N
# units measured), above 1 % of its total: inclusive, exclusive, calls, object, name (without
# argument lists and template arguments), tab-separated, the largest inclusive first. The
# measured_* loop itself, main and ld.so's functions are left out.
hot_path_functions() {
  awk -F'\t' -v n="$2" '
    function short(s,    t) {
      gsub(/\(anonymous namespace\)/, "{anon}", s)
      sub(/ \[clone [^]]*\]$/, "", s)
      while (gsub(/<[^<>]*>/, "\001", s)) {}
      while (gsub(/\([^()]*\)/, "\002", s)) {}
      gsub(/\001/, "<>", s)
      gsub(/\002/, "()", s)
      sub(/ const$/, "", s)
      return s
    }
    $1 == "total" { total = $2 }
    $1 == "self" { self[$3] = $4; object[$3] = $2 }
    $1 == "incl" { incl[$3] = $4; object[$3] = $2 }
    $1 == "calls" { calls[$2] = $3 }
    END {
      for (f in incl) {
        if (incl[f] < total / 100 || f ~ /measured_|^main$|below main|libc_start/ || object[f] ~ /ld-linux/) continue
        o = object[f]; sub(/.*\//, "", o); sub(/\.so.*/, "", o)
        printf "%.1f\t%.1f\t%.2f\t%s\t%s\n", incl[f] / n, self[f] / n, calls[f] / n, o, short(f)
      }
    }' "$1" | sort -t$'\t' -k1,1 -g -r
}
