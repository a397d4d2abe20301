# SPDX-License-Identifier: MIT
# cmake -P tests/install/check.cmake (run by the ctest test `install_consumer`)
#
# 1. cmake --install the build IBV_BUILD_DIR into <IBV_WORK_DIR>/prefix
# 2. configure, build and run tests/install/ against it via CMAKE_PREFIX_PATH (find_package)
# 3. compile and run the same main.cpp with `pkg-config --cflags --libs ibverbs-cpp`
# 4. check that the private dependency nlohmann_json leaks into neither package file
# 5. if IBV_EXPECT_TOOL (the build has the ibvcpp tool): the installed bin/ibvcpp runs
# Any failing step stops the script with FATAL_ERROR (non-zero exit).
cmake_minimum_required(VERSION 3.25)

foreach(var IN ITEMS IBV_BUILD_DIR IBV_CONSUMER_DIR IBV_WORK_DIR IBV_LIBDIR IBV_VERSION IBV_CXX)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "check.cmake: -D${var}=... is required")
  endif()
endforeach()
if(NOT IBV_CONFIG)
  set(IBV_CONFIG Release)
endif()

set(prefix "${IBV_WORK_DIR}/prefix")
set(consumer_build "${IBV_WORK_DIR}/consumer-build")
set(pc_exe "${IBV_WORK_DIR}/consumer-pkgconfig")

function(step title)
  message(STATUS "install_consumer: ${title}")
endfunction()

# Run a command; on failure print its output and stop.
function(run)
  execute_process(
    COMMAND ${ARGN}
    RESULT_VARIABLE rc
    OUTPUT_VARIABLE out
    ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    string(JOIN " " cmdline ${ARGN})
    message(FATAL_ERROR "install_consumer: FAILED (${rc}): ${cmdline}\n${out}")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${IBV_WORK_DIR}")
file(MAKE_DIRECTORY "${IBV_WORK_DIR}")

step("installing ${IBV_BUILD_DIR} into ${prefix}")
run("${CMAKE_COMMAND}" --install "${IBV_BUILD_DIR}" --prefix "${prefix}" --config "${IBV_CONFIG}")

foreach(f IN ITEMS "include/ibv/ibv.hpp" "include/ibv/version.hpp"
               "${IBV_LIBDIR}/cmake/ibverbs-cpp/ibverbs-cpp-config.cmake"
               "${IBV_LIBDIR}/cmake/ibverbs-cpp/ibverbs-cpp-config-version.cmake"
               "${IBV_LIBDIR}/pkgconfig/ibverbs-cpp.pc")
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "install_consumer: FAILED: ${f} was not installed")
  endif()
endforeach()

# --- CMake package -------------------------------------------------------------------------
set(generator_args)
if(IBV_GENERATOR)
  set(generator_args -G "${IBV_GENERATOR}")
endif()
step("configuring tests/install against the installed package")
run("${CMAKE_COMMAND}" -S "${IBV_CONSUMER_DIR}" -B "${consumer_build}" ${generator_args}
    "-DCMAKE_PREFIX_PATH=${prefix}" "-DCMAKE_BUILD_TYPE=${IBV_CONFIG}"
    "-DCMAKE_CXX_COMPILER=${IBV_CXX}")
step("building the consumer")
run("${CMAKE_COMMAND}" --build "${consumer_build}" --config "${IBV_CONFIG}")
find_program(cmake_consumer consumer PATHS "${consumer_build}" "${consumer_build}/${IBV_CONFIG}"
             NO_DEFAULT_PATH NO_CACHE REQUIRED)
step("running ${cmake_consumer}")
run("${cmake_consumer}")
if(NOT run_output MATCHES "ibverbs-cpp ${IBV_VERSION}")
  message(FATAL_ERROR "install_consumer: FAILED: expected 'ibverbs-cpp ${IBV_VERSION}', the "
                      "CMake-built consumer printed: ${run_output}")
endif()

# --- pkg-config ----------------------------------------------------------------------------
find_program(pkg_config NAMES pkg-config pkgconf NO_CACHE REQUIRED)
set(pc_path "${prefix}/${IBV_LIBDIR}/pkgconfig")
if(DEFINED ENV{PKG_CONFIG_PATH} AND NOT "$ENV{PKG_CONFIG_PATH}" STREQUAL "")
  set(ENV{PKG_CONFIG_PATH} "${pc_path}:$ENV{PKG_CONFIG_PATH}")
else()
  set(ENV{PKG_CONFIG_PATH} "${pc_path}")
endif()
step("pkg-config --cflags --libs ibverbs-cpp (PKG_CONFIG_PATH=${pc_path})")
run("${pkg_config}" --cflags --libs ibverbs-cpp)
string(STRIP "${run_output}" pc_flags)
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
run("${pkg_config}" --modversion ibverbs-cpp)
string(STRIP "${run_output}" pc_version)
if(NOT pc_version STREQUAL IBV_VERSION)
  message(FATAL_ERROR "install_consumer: FAILED: ibverbs-cpp.pc says version '${pc_version}', "
                      "expected '${IBV_VERSION}'")
endif()
step("compiling main.cpp with: ${IBV_CXX} -std=c++20 ... ${pc_flags}")
run("${IBV_CXX}" -std=c++20 -Wall -Wextra -Werror "${IBV_CONSUMER_DIR}/main.cpp" -o "${pc_exe}"
    ${pc_flags} "-Wl,-rpath,${prefix}/${IBV_LIBDIR}")
step("running ${pc_exe}")
run("${pc_exe}")
if(NOT run_output MATCHES "ibverbs-cpp ${IBV_VERSION}")
  message(FATAL_ERROR "install_consumer: FAILED: expected 'ibverbs-cpp ${IBV_VERSION}', the "
                      "pkg-config-built consumer printed: ${run_output}")
endif()

# --- private dependencies stay private -----------------------------------------------------
file(GLOB_RECURSE package_files "${prefix}/${IBV_LIBDIR}/cmake/ibverbs-cpp/*.cmake"
     "${pc_path}/ibverbs-cpp.pc")
foreach(f IN LISTS package_files)
  file(READ "${f}" content)
  if(content MATCHES "nlohmann")
    message(FATAL_ERROR "install_consumer: FAILED: ${f} mentions nlohmann_json, a private "
                        "dependency that consumers must not need")
  endif()
endforeach()

# --- the installed tool runs (it finds the installed library through its RPATH) -----------
if(IBV_EXPECT_TOOL)
  step("running the installed ${prefix}/bin/ibvcpp --help")
  run("${prefix}/bin/ibvcpp" --help)
  if(NOT run_output MATCHES "ibvcpp perf")
    message(FATAL_ERROR "install_consumer: FAILED: the installed ibvcpp --help printed: "
                        "${run_output}")
  endif()
endif()

message(STATUS "install_consumer: OK (CMake package and pkg-config consumers both built and ran)")
