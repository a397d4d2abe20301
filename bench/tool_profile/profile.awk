# SPDX-License-Identifier: MIT
# bench/tool_profile/profile.awk: reads one callgrind file written with --dump-instr=yes
# --collect-jumps=yes and prints tab-separated figures about it:
#   total  IR                          all instructions collected
#   self   OBJECT  FUNCTION  IR        exclusive instructions of each function
#   incl   OBJECT  FUNCTION  IR        inclusive instructions (itself plus what it called)
#   calls  OBJECT  FUNCTION  COUNT     how often each function was called
#   edge   OBJECT  FUNCTION  OBJECT  CALLEE  COUNT  IR   calls from one function to another,
#          and their inclusive cost
#   loop   OBJECT  FUNCTION  HEAD  BACK  TAKEN  PASSES  ENTRIES  BUSY  PASS_COST  SPIN
#          one line per backward jump taken at least min_taken times (-v min_taken=N,
#          default 1000): the loop from HEAD to BACK (instruction addresses, hex), TAKEN
#          backward jumps, PASSES executions of its head, ENTRIES = PASSES - TAKEN, BUSY the
#          passes that did something besides the loop's always-run path (the most executed
#          instruction or call site of the range that runs on fewer than half the passes),
#          PASS_COST the instructions of one pass along the always-run path (instructions of
#          the range run on at least half the passes, once each, plus the average inclusive
#          cost of each call made on at least half the passes), and
#          SPIN = (PASSES - ENTRIES - BUSY) * PASS_COST: the passes that only looked.
# Functions are keyed by object and name: a stripped object's functions are named by offset,
# the same in every program that loads it.
# Usage: awk [-v min_taken=N] -f ../callgrind_names.awk -f profile.awk callgrind.out.NAME
BEGIN {
  OFS = "\t"
  if (min_taken == "") min_taken = 1000
  hexdigits = "0123456789abcdef"
}

function hex(s,    v, i, c) {
  s = tolower(s)
  sub(/^0x/, "", s)
  v = 0
  for (i = 1; i <= length(s); ++i) {
    c = index(hexdigits, substr(s, i, 1))
    if (c == 0) break
    v = v * 16 + c - 1
  }
  return v
}

# A position: absolute (0x...), relative (+N, -N) or the same (*), relative to the last one.
function pos(spec) {
  if (spec == "*") return last
  if (spec ~ /^\+/) return last + substr(spec, 2)
  if (spec ~ /^-/) return last - substr(spec, 2)
  return hex(spec)
}

# name_of(): bench/callgrind_names.awk, given to awk before this file.

/^ob=/ { ob = name_of(substr($0, 4), "ob"); next }
/^cob=/ { cob = name_of(substr($0, 5), "ob"); cob_set = 1; next }
/^fn=/ { fn = ob SUBSEP name_of(substr($0, 4), "fn"); functions[fn] = 1; cob_set = 0; next }
/^cfn=/ {
  cfn = (cob_set ? cob : ob) SUBSEP name_of(substr($0, 5), "fn")
  cob_set = 0
  next
}
/^calls=/ {
  split(substr($0, 7), parts, " ")
  call_count = parts[1]
  calls[cfn] += call_count
  edges[fn SUBSEP cfn] += call_count
  call_next = 1
  next
}
/^(jump|jcnd)=/ {
  # jump=COUNT TARGET, jcnd=EXECUTED/TAKEN TARGET; the next line is the jump's own position.
  split($0, parts, /[= \/]/)
  if (parts[1] == "jump") { jump_taken = parts[2]; jump_target = pos(parts[3]) }
  else { jump_taken = parts[3]; jump_target = pos(parts[4]) }
  jump_next = 1
  next
}
/^(fl|fi|fe|cfi|cfl)=/ { next }
/^totals:/ { total = $2; next }
/^summary:/ { if (total == "") total = $2; next }
/^[0-9a-fx+*-]/ {
  here = pos($1)
  last = here
  if (jump_next) {
    jump_next = 0
    if (jump_target <= here) back[fn, jump_target, here] += jump_taken
    next
  }
  value = $3 + 0
  if (call_next) {
    call_next = 0
    called[fn] += value
    edge_cost[fn SUBSEP cfn] += value
    if (!((fn, here) in site_calls)) sites[fn] = sites[fn] " " here
    site_calls[fn, here] += call_count
    site_cost[fn, here] += value
    next
  }
  self[fn] += value
  if (!((fn, here) in count)) addresses[fn] = addresses[fn] " " here
  count[fn, here] += value
  next
}

END {
  print "total", total + 0
  for (f in functions) {
    split(f, k, SUBSEP)
    print "self", k[1], k[2], self[f] + 0
    print "incl", k[1], k[2], self[f] + called[f]
  }
  for (f in calls) {
    split(f, k, SUBSEP)
    print "calls", k[1], k[2], calls[f]
  }
  for (e in edges) {
    split(e, k, SUBSEP)
    print "edge", k[1], k[2], k[3], k[4], edges[e], edge_cost[e] + 0
  }
  # Loops: every instruction and call site of the function whose address is in [head, back].
  for (key in back) {
    if (back[key] < min_taken) continue
    split(key, k, SUBSEP)
    f = k[1] SUBSEP k[2]
    head = k[3] + 0
    tail = k[4] + 0
    passes = count[f, head] + 0
    if (passes == 0) continue
    taken = back[key]
    entries = passes - taken
    if (entries < 0) entries = 0
    cost = 0
    busy = 0
    m = split(addresses[f], list, " ")
    for (i = 1; i <= m; ++i) {
      a = list[i] + 0
      if (a < head || a > tail) continue
      n = count[f, list[i]]
      if (n * 2 >= passes) cost += 1
      else if (n > busy) busy = n
    }
    m = split(sites[f], list, " ")
    for (i = 1; i <= m; ++i) {
      a = list[i] + 0
      if (a < head || a > tail) continue
      n = site_calls[f, list[i]]
      if (n * 2 >= passes) cost += site_cost[f, list[i]] / n
      else if (n > busy) busy = n
    }
    spin = (taken - busy) * cost
    if (spin < 0) spin = 0
    printf "loop\t%s\t%s\t%x\t%x\t%d\t%d\t%d\t%d\t%.1f\t%.0f\n", k[1], k[2], head, tail, taken, passes, entries, busy, cost, spin
  }
}
