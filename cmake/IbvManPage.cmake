# SPDX-License-Identifier: MIT
# cmake -D IBVCPP=<built ibvcpp> -D OUT=<ibvcpp.1.gz> -D VERSION=<x.y.z> -D GZIP=<gzip> -P ...
#
# The manual page of ibvcpp for the tools package (cmake/IbvPackaging.cmake), made from the
# tool's own help texts, so that it says what the built tool does: the usage, `devices -h` and
# `perf -h`, each as preformatted text, compressed as Debian wants (gzip -9n).
foreach(var IN ITEMS IBVCPP OUT VERSION GZIP)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "IbvManPage.cmake: -D${var}=... is required")
  endif()
endforeach()

# help_text(VAR ARGS...): the output of `ibvcpp ARGS`, escaped for roff.
function(help_text var)
  execute_process(
    COMMAND "${IBVCPP}" ${ARGN}
    RESULT_VARIABLE rc
    OUTPUT_VARIABLE out
    ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "IbvManPage.cmake: ${IBVCPP} ${ARGN} failed (${rc}): ${err}")
  endif()
  string(REPLACE "\\" "\\e" out "${out}")
  string(REPLACE "-" "\\-" out "${out}")
  # A line starting with . or ' would be a request.
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" out "${out}")
  string(STRIP "${out}" out)
  set(${var} "${out}" PARENT_SCOPE)
endfunction()

help_text(usage --help)
help_text(devices devices --help)
help_text(perf perf --help)

set(page ".TH IBVCPP 1 \"\" \"ibverbs-cpp ${VERSION}\" \"User Commands\"
.SH NAME
ibvcpp \\- list RDMA devices and run perftest-style benchmarks on ibverbs-cpp
.SH SYNOPSIS
.nf
${usage}
.fi
.SH DESCRIPTION
.B ibvcpp devices
lists the RDMA devices of this host.
.B ibvcpp perf
measures bandwidth or latency between a server and a client the way perftest's
ib_send_bw, ib_write_lat and their siblings do, on the ibverbs\\-cpp library.
.SH DEVICES
.nf
${devices}
.fi
.SH PERF
.nf
${perf}
.fi
.SH SEE ALSO
.BR ibv_devices (1),
.BR ib_write_bw (1)
")
get_filename_component(dir "${OUT}" DIRECTORY)
file(MAKE_DIRECTORY "${dir}")
string(REGEX REPLACE "\\.gz$" "" plain "${OUT}")
file(WRITE "${plain}" "${page}")
execute_process(COMMAND "${GZIP}" -9nf "${plain}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "IbvManPage.cmake: gzip failed (${rc})")
endif()
