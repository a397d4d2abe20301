# SPDX-License-Identifier: MIT
# Debian packages of ibverbs-cpp, made by CPack's DEB generator from this build (`make package`
# configures the `package` preset, builds it and runs cpack; the .deb files land in build/debs/).
#
#   libibverbs-cpp0.2   component runtime: libibverbs-cpp.so.0.2 (the SONAME: IBV_SOVERSION in
#                       CMakeLists.txt, which also names the package) and the real file;
#                       Debian's name for a library package is the SONAME's name and number
#   libibverbs-cpp-dev  component dev: headers, the libibverbs-cpp.so link, the CMake package
#                       ibverbs-cpp and ibverbs-cpp.pc; depends on the runtime package of the same
#                       version and on what the two package files name (libibverbs-dev, and
#                       librdmacm-dev and libpmix-dev, whose .pc files ibverbs-cpp.pc requires
#                       privately: pkg-config reads them for --cflags too)
#   ibverbs-cpp-tools   component tools: the ibvcpp command-line tool
#
# The library and tool dependencies are computed by dpkg-shlibdeps (libibverbs1, libstdc++6,
# ...); the runtime package ships a shlibs file, so that other packages built against it get
# "libibverbs-cpp0.2 (>= VERSION)". Versions are the project's (project(VERSION) in
# CMakeLists.txt). tests/package/run builds, lints, installs and removes them (make test's suite
# `package`).
#
# IBV_PACKAGE_DEB (ON in the package preset) also installs what Debian wants in every package:
# /usr/share/doc/<package>/copyright and changelog.gz, and ibvcpp's manual page (made from its
# help texts). Off, `cmake --install` installs no such files.
option(IBV_PACKAGE_DEB
       "Install the Debian doc files (copyright, changelog) and ibvcpp's manual page; cpack needs it"
       OFF)

set(IBV_DEB_MAINTAINER "ibverbs-cpp maintainers <maintainers@users.noreply.a-seed-f5d8d464.example>")
set(IBV_DEB_RUNTIME "libibverbs-cpp${IBV_SOVERSION}")
set(IBV_DEB_DEV "libibverbs-cpp-dev")
set(IBV_DEB_TOOLS "ibverbs-cpp-tools")

if(IBV_PACKAGE_DEB)
  find_program(IBV_GZIP gzip REQUIRED)
  # A native package's changelog, in Debian's format (lintian parses it), dated by
  # SOURCE_DATE_EPOCH when set so that a rebuild makes the same bytes.
  string(TIMESTAMP IBV_DEB_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
  configure_file("${PROJECT_SOURCE_DIR}/cmake/debian/changelog.in"
                 "${PROJECT_BINARY_DIR}/debian/changelog" @ONLY)
  execute_process(
    COMMAND "${IBV_GZIP}" -9nf "${PROJECT_BINARY_DIR}/debian/changelog"
    RESULT_VARIABLE _ibv_gzip_rc)
  if(NOT _ibv_gzip_rc EQUAL 0)
    message(FATAL_ERROR "IbvPackaging: gzip failed (${_ibv_gzip_rc})")
  endif()
  foreach(_ibv_pair IN ITEMS "runtime;${IBV_DEB_RUNTIME}" "dev;${IBV_DEB_DEV}"
                             "tools;${IBV_DEB_TOOLS}")
    list(GET _ibv_pair 0 _ibv_component)
    list(GET _ibv_pair 1 _ibv_package)
    install(FILES "${PROJECT_SOURCE_DIR}/cmake/debian/copyright"
                  "${PROJECT_BINARY_DIR}/debian/changelog.gz"
            DESTINATION "${CMAKE_INSTALL_DATADIR}/doc/${_ibv_package}"
            COMPONENT ${_ibv_component})
  endforeach()
  # ibvcpp's manual page, from its help texts (cmake/IbvManPage.cmake).
  if(TARGET ibvcpp)
    set(_ibv_man "${PROJECT_BINARY_DIR}/debian/man/ibvcpp.1.gz")
    add_custom_command(
      OUTPUT "${_ibv_man}"
      COMMAND "${CMAKE_COMMAND}" "-DIBVCPP=$<TARGET_FILE:ibvcpp>" "-DOUT=${_ibv_man}"
              "-DVERSION=${PROJECT_VERSION}" "-DGZIP=${IBV_GZIP}" -P
              "${PROJECT_SOURCE_DIR}/cmake/IbvManPage.cmake"
      DEPENDS ibvcpp "${PROJECT_SOURCE_DIR}/cmake/IbvManPage.cmake"
      COMMENT "ibvcpp.1 from ibvcpp's help texts"
      VERBATIM)
    add_custom_target(ibvcpp_manpage ALL DEPENDS "${_ibv_man}")
    install(FILES "${_ibv_man}" DESTINATION "${CMAKE_INSTALL_MANDIR}/man1" COMPONENT tools)
  endif()
  # The runtime package activates the ldconfig trigger (Debian policy 8.1.1) instead of calling
  # ldconfig from maintainer scripts, which CPack writes for a library unless the package brings
  # its own postinst and postrm: these do nothing.
  file(WRITE "${PROJECT_BINARY_DIR}/debian/runtime/triggers" "activate-noawait ldconfig\n")
  foreach(_ibv_script IN ITEMS postinst postrm)
    file(WRITE "${PROJECT_BINARY_DIR}/debian/runtime/${_ibv_script}"
         "#!/bin/sh\n# ldconfig runs through the trigger (see triggers)\nset -e\nexit 0\n")
    file(CHMOD "${PROJECT_BINARY_DIR}/debian/runtime/${_ibv_script}"
         PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ
                     WORLD_EXECUTE)
  endforeach()
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ibverbs-cpp)
set(CPACK_PACKAGE_VENDOR "ibverbs-cpp")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_CONTACT "${IBV_DEB_MAINTAINER}")
# CPackDeb puts this summary above every component's description unless it is CPack's own
# default; each component's description starts with its own synopsis line instead.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${CMAKE_PROJECT_NAME} built using CMake")
set(CPACK_STRIP_FILES ON)
set(CPACK_COMPONENTS_ALL runtime dev tools)
set(CPACK_DEB_COMPONENT_INSTALL ON)

set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${IBV_DEB_MAINTAINER}")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # <package>_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# ibvcpp links libibverbs-cpp.so.0.2 from this build: dpkg-shlibdeps finds it here (the tools
# package's dependency on it is declared below, since no installed package describes it yet).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS "${PROJECT_BINARY_DIR}/lib")
# The shlibs file (only the runtime package has a shared object): "libibverbs-cpp 0.2
# libibverbs-cpp0.2 (>= VERSION)". CPack 3.25 reads this switch for all packages, not per component.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")

set(_ibv_exact "(= ${PROJECT_VERSION})")

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME "${IBV_DEB_RUNTIME}")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION
    "C++20 interface to RDMA verbs - shared library
ibverbs-cpp is a C++20 library over libibverbs (rdma-core) for RDMA on
InfiniBand and RoCE: RAII verbs objects, safe point-to-point channels with
scoped completion polling, one channel per peer, and ranked networks with
barriers.
.
This package contains the shared library.")
if(IBV_PACKAGE_DEB)
  set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA "${PROJECT_BINARY_DIR}/debian/runtime/triggers"
                                                 "${PROJECT_BINARY_DIR}/debian/runtime/postinst"
                                                 "${PROJECT_BINARY_DIR}/debian/runtime/postrm")
endif()

set(CPACK_DEBIAN_DEV_PACKAGE_NAME "${IBV_DEB_DEV}")
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(_ibv_dev_depends "${IBV_DEB_RUNTIME} ${_ibv_exact}" libibverbs-dev librdmacm-dev)
if(IBV_HAVE_PMIX)
  list(APPEND _ibv_dev_depends libpmix-dev)
endif()
list(JOIN _ibv_dev_depends ", " CPACK_DEBIAN_DEV_PACKAGE_DEPENDS)
set(CPACK_COMPONENT_DEV_DESCRIPTION
    "C++20 interface to RDMA verbs - development files
ibverbs-cpp is a C++20 library over libibverbs (rdma-core) for RDMA on
InfiniBand and RoCE.
.
This package contains the headers, the CMake package (find_package(ibverbs-cpp)
with the target ibverbs-cpp::ibverbs-cpp) and the pkg-config file
ibverbs-cpp.pc.")

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME "${IBV_DEB_TOOLS}")
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION net)
set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS "${IBV_DEB_RUNTIME} ${_ibv_exact}")
set(CPACK_COMPONENT_TOOLS_DESCRIPTION
    "C++20 interface to RDMA verbs - command-line tool
ibverbs-cpp is a C++20 library over libibverbs (rdma-core) for RDMA on
InfiniBand and RoCE.
.
This package contains ibvcpp, which lists RDMA devices and runs perftest-style
bandwidth and latency benchmarks built on the library.")

include(CPack)
