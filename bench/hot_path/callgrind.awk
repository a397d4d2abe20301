# SPDX-License-Identifier: MIT
# bench/hot_path/callgrind.awk: reads one callgrind output file (callgrind.out.*, any of
# callgrind's name and position compressions) and prints tab-separated figures:
#   total  IR                       all instructions collected
#   self   OBJECT  FUNCTION  IR     exclusive instructions of each function
#   incl   OBJECT  FUNCTION  IR     inclusive instructions (itself plus what it called)
#   calls  FUNCTION  COUNT          how often each function was called
#   edge   CALLER  CALLEE  COUNT  IR  calls from one function to another, and their cost
# Usage: awk -f ../callgrind_names.awk -f callgrind.awk callgrind.out.NAME
BEGIN { OFS = "\t" }

# name_of(): bench/callgrind_names.awk, given to awk before this file.

/^ob=/ { ob = name_of(substr($0, 4), "ob"); next }
/^cob=/ { name_of(substr($0, 5), "ob"); next }
/^fn=/ { fn = name_of(substr($0, 4), "fn"); object[fn] = ob; next }
/^cfn=/ { cfn = name_of(substr($0, 5), "fn"); next }
/^calls=/ {
  split(substr($0, 7), parts, " ")
  calls[cfn] += parts[1]
  edge_calls[fn, cfn] += parts[1]
  call_cost_next = 1
  next
}
/^(fl|fi|fe|cfi|cfl)=/ { next }
/^totals:/ { total = $2; next }
/^summary:/ { if (total == "") total = $2; next }
/^[0-9+*-]/ {
  value = $NF + 0
  if (call_cost_next) {
    called[fn] += value
    edge_cost[fn, cfn] += value
    call_cost_next = 0
  } else {
    self[fn] += value
  }
  next
}

END {
  print "total", total + 0
  for (f in self) print "self", object[f], f, self[f]
  for (f in object) print "incl", object[f], f, self[f] + called[f]
  for (f in calls) print "calls", f, calls[f]
  for (e in edge_calls) {
    split(e, ends, SUBSEP)
    print "edge", ends[1], ends[2], edge_calls[e], edge_cost[e] + 0
  }
}
