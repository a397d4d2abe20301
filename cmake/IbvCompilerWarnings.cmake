# SPDX-License-Identifier: MIT
# ibv_target_warnings(<target>)
#
# Turns on the project's warning set for one of our own targets. The flags are PRIVATE, so they
# never reach consumers through the library's interface. With IBV_WERROR=ON (the `ci` preset)
# warnings are errors.
include_guard(GLOBAL)

set(IBV_WARNING_FLAGS
    -Wall
    -Wextra
    -Wpedantic
    -Wshadow
    -Wconversion
    -Wsign-conversion
    -Wnon-virtual-dtor
    -Wold-style-cast
    -Wcast-align
    -Woverloaded-virtual
    -Wnull-dereference
    -Wdouble-promotion
    -Wformat=2
    -Wimplicit-fallthrough)

function(ibv_target_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE ${IBV_WARNING_FLAGS})
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
      # GCC 12 at -O3 warns of overlapping copies inside libstdc++'s own std::string code
      # (char_traits.h, "accessing 9223372036854775810 or more bytes"): GCC bug 105329, fixed in
      # GCC 13. The Release build would fail with IBV_WERROR=ON on correct code.
      target_compile_options(${target} PRIVATE -Wno-restrict)
    endif()
    if(IBV_WERROR)
      target_compile_options(${target} PRIVATE -Werror)
    endif()
  endif()
endfunction()
