# SPDX-License-Identifier: MIT
# FindIBVerbs
# -----------
# Finds libibverbs and librdmacm (rdma-core); both are required.
#
# Imported targets:
#   IBVerbs::IBVerbs   libibverbs (required)
#   IBVerbs::RDMACM    librdmacm (required: Channel::connect and ChannelListener use it)
#
# Result variables:
#   IBVerbs_FOUND, IBVerbs_VERSION, IBVerbs_INCLUDE_DIR, IBVerbs_LIBRARY,
#   IBVerbs_RDMACM_FOUND, IBVerbs_RDMACM_LIBRARY
#
# pkg-config (module `libibverbs`) is used for hints when available; plain find_path and
# find_library do the rest, so pkg-config is not needed to use the installed ibverbs-cpp package.
# This file is installed next to ibverbs-cpp-config.cmake, which uses it to re-find libibverbs
# for consumers.

find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(PC_IBVERBS QUIET libibverbs)
  pkg_check_modules(PC_RDMACM QUIET librdmacm)
endif()

find_path(
  IBVerbs_INCLUDE_DIR
  NAMES infiniband/verbs.h
  HINTS ${PC_IBVERBS_INCLUDEDIR} ${PC_IBVERBS_INCLUDE_DIRS})
find_library(
  IBVerbs_LIBRARY
  NAMES ibverbs
  HINTS ${PC_IBVERBS_LIBDIR} ${PC_IBVERBS_LIBRARY_DIRS})

if(PC_IBVERBS_VERSION)
  set(IBVerbs_VERSION "${PC_IBVERBS_VERSION}")
endif()

find_path(
  IBVerbs_RDMACM_INCLUDE_DIR
  NAMES rdma/rdma_cma.h
  HINTS ${PC_RDMACM_INCLUDEDIR} ${PC_RDMACM_INCLUDE_DIRS})
find_library(
  IBVerbs_RDMACM_LIBRARY
  NAMES rdmacm
  HINTS ${PC_RDMACM_LIBDIR} ${PC_RDMACM_LIBRARY_DIRS})
if(IBVerbs_RDMACM_INCLUDE_DIR AND IBVerbs_RDMACM_LIBRARY)
  set(IBVerbs_RDMACM_FOUND TRUE)
else()
  set(IBVerbs_RDMACM_FOUND FALSE)
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(
  IBVerbs
  REQUIRED_VARS IBVerbs_LIBRARY IBVerbs_INCLUDE_DIR IBVerbs_RDMACM_LIBRARY
                IBVerbs_RDMACM_INCLUDE_DIR
  VERSION_VAR IBVerbs_VERSION
  HANDLE_COMPONENTS
  REASON_FAILURE_MESSAGE
    "libibverbs or librdmacm not found: on Debian/Ubuntu install libibverbs-dev and librdmacm-dev (scripts/install-deps does)"
)

if(IBVerbs_FOUND AND NOT TARGET IBVerbs::IBVerbs)
  add_library(IBVerbs::IBVerbs UNKNOWN IMPORTED)
  set_target_properties(
    IBVerbs::IBVerbs
    PROPERTIES IMPORTED_LOCATION "${IBVerbs_LIBRARY}"
               INTERFACE_INCLUDE_DIRECTORIES "${IBVerbs_INCLUDE_DIR}")
endif()

if(IBVerbs_FOUND AND IBVerbs_RDMACM_FOUND AND NOT TARGET IBVerbs::RDMACM)
  add_library(IBVerbs::RDMACM UNKNOWN IMPORTED)
  set_target_properties(
    IBVerbs::RDMACM
    PROPERTIES IMPORTED_LOCATION "${IBVerbs_RDMACM_LIBRARY}"
               INTERFACE_INCLUDE_DIRECTORIES "${IBVerbs_RDMACM_INCLUDE_DIR}"
               INTERFACE_LINK_LIBRARIES IBVerbs::IBVerbs)
endif()

mark_as_advanced(IBVerbs_INCLUDE_DIR IBVerbs_LIBRARY IBVerbs_RDMACM_INCLUDE_DIR
                 IBVerbs_RDMACM_LIBRARY)
