# SPDX-License-Identifier: MIT
# bench/callgrind_names.awk: callgrind's name compression, for the awk readers of its files
# (hot_path/callgrind.awk, tool_profile/profile.awk): give it first, `awk -f
# callgrind_names.awk -f READER.awk FILE`.

# "(12) name" defines id 12 of `kind`; "(12)" refers to it; a bare name has no id.
function name_of(spec, kind,    id, rest) {
  if (match(spec, /^\([0-9]+\)/)) {
    id = substr(spec, 2, RLENGTH - 2)
    rest = substr(spec, RLENGTH + 1)
    sub(/^ /, "", rest)
    if (rest != "") names[kind, id] = rest
    return names[kind, id]
  }
  return spec
}
