# SPDX-License-Identifier: MIT
# IBV_SANITIZE: build everything of this project (library, tests, tools, examples) with GCC's
# or Clang's runtime sanitizers, for the `asan` and `tsan` presets.
#
#   -D IBV_SANITIZE=address,undefined   AddressSanitizer (with LeakSanitizer) + UBSan
#   -D IBV_SANITIZE=thread              ThreadSanitizer
#
# Any comma- or semicolon-separated subset of address, undefined, leak, thread; thread does not
# combine with address or leak. Every finding is fatal (-fno-sanitize-recover=all), so a test
# run fails on the first report instead of printing it and passing. The flags are directory-wide
# compile and link options, not part of the library's interface: an installed library does not
# pass them on to its consumers.
include_guard(GLOBAL)

set(IBV_SANITIZE "" CACHE STRING
    "Sanitizers to build with: a comma-separated subset of address,undefined,leak,thread")

function(ibv_enable_sanitizers)
  if(IBV_SANITIZE STREQUAL "")
    return()
  endif()
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    message(FATAL_ERROR "IBV_SANITIZE needs GCC or Clang (compiler: ${CMAKE_CXX_COMPILER_ID})")
  endif()
  string(REPLACE "," ";" _list "${IBV_SANITIZE}")
  list(REMOVE_DUPLICATES _list)
  foreach(_name IN LISTS _list)
    if(NOT _name MATCHES "^(address|undefined|leak|thread)$")
      message(FATAL_ERROR "IBV_SANITIZE: unknown sanitizer '${_name}' "
                          "(known: address, undefined, leak, thread)")
    endif()
  endforeach()
  if("thread" IN_LIST _list AND ("address" IN_LIST _list OR "leak" IN_LIST _list))
    message(FATAL_ERROR "IBV_SANITIZE: thread does not combine with address or leak")
  endif()
  list(JOIN _list "," _joined)
  set(_flags "-fsanitize=${_joined}" -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_compile_options(${_flags})
  add_link_options("-fsanitize=${_joined}")
  message(STATUS "ibverbs-cpp: sanitizers ${_joined} (every target of this project)")
endfunction()
