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
    if(IBV_WERROR)
      target_compile_options(${target} PRIVATE -Werror)
    endif()
  endif()
endfunction()
