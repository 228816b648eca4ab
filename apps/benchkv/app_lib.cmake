# bkv_app: benchkv's options (CLI + JSON) and results (CSV, summary JSON). Included from the
# top level even when apps/benchkv itself is skipped, because tests of real-run pieces
# (also in the sanitizer builds) read options and write results.
add_library(bkv_app STATIC ${PROJECT_SOURCE_DIR}/apps/benchkv/cli/option_table.cpp
            ${PROJECT_SOURCE_DIR}/apps/benchkv/cli/applicability.cpp
            ${PROJECT_SOURCE_DIR}/apps/benchkv/cli/validate.cpp
            ${PROJECT_SOURCE_DIR}/apps/benchkv/cli/config_file.cpp
            ${PROJECT_SOURCE_DIR}/apps/benchkv/cli/command_line.cpp
            ${PROJECT_SOURCE_DIR}/apps/benchkv/results/results.cpp
            ${PROJECT_SOURCE_DIR}/apps/benchkv/results/provenance.cpp
            ${PROJECT_SOURCE_DIR}/apps/benchkv/results/statistics.cpp
            ${PROJECT_SOURCE_DIR}/apps/benchkv/cli/stop_signals.cpp)
target_link_libraries(bkv_app PUBLIC bkv_kv fmt::fmt nlohmann_json::nlohmann_json PRIVATE CLI11::CLI11 bkv_sim_faults)

# The simulator's fault descriptions alone (sim/faults.cpp): the options check --fault
# while parsing, so this is built with bkv_app also when sim/ is skipped (sanitizer
# builds); bkv_sim links it.
add_library(bkv_sim_faults STATIC ${PROJECT_SOURCE_DIR}/sim/faults.cpp)
target_link_libraries(bkv_sim_faults PUBLIC bkv_core nlohmann_json::nlohmann_json)

# CPUs and NUMA nodes for pinning real runs (apps/benchkv/real/cpu_topology.cpp).
pkg_check_modules(HWLOC REQUIRED IMPORTED_TARGET hwloc)
add_library(bkv_cpu_topology STATIC ${PROJECT_SOURCE_DIR}/apps/benchkv/real/cpu_topology.cpp)
target_link_libraries(bkv_cpu_topology PUBLIC bkv_core PRIVATE PkgConfig::HWLOC)

# Provenance (apps/benchkv/results/provenance.hpp): the git commit and dirty flag are read at
# every build, the rest comes from this configure step.
set(BKV_BUILD_INFO_DIR ${CMAKE_BINARY_DIR}/generated)
if(MPI_C_FOUND)
  string(REGEX REPLACE "[\r\n\"].*" "" bkv_mpi_version "${MPI_C_LIBRARY_VERSION_STRING}")
  string(STRIP "${bkv_mpi_version}" bkv_mpi_version)
  if(bkv_mpi_version STREQUAL "")
    pkg_check_modules(BKV_OMPI QUIET ompi-c)
    if(BKV_OMPI_FOUND)
      set(bkv_mpi_version "Open MPI ${BKV_OMPI_VERSION} (MPI ${MPI_C_VERSION})")
    else()
      set(bkv_mpi_version "MPI ${MPI_C_VERSION}")
    endif()
  endif()
else()
  set(bkv_mpi_version "")
endif()
# rdma-core: libibverbs's pkg-config version is 1.<ABI>.<rdma-core release>, e.g.
# 1.14.44.0 for rdma-core 44.0; both are recorded.
set(bkv_rdma_core_version "")
if(IBVERBS_FOUND)
  set(bkv_rdma_core_version "libibverbs ${IBVERBS_libibverbs_VERSION}")
  if(IBVERBS_libibverbs_VERSION MATCHES "^1\\.[0-9]+\\.([0-9]+\\.[0-9]+)$")
    set(bkv_rdma_core_version "${CMAKE_MATCH_1} (libibverbs ${IBVERBS_libibverbs_VERSION})")
  endif()
endif()
# What else changes the code a build generates, so a real run's timing: the sanitizer
# (instrumented loads and stores, -O0 parts under TSan), libFuzzer's coverage, and the C++
# flags of the build type and CMAKE_CXX_FLAGS (-O level, -march, a profile's -fprofile-use).
if(BKV_SANITIZE STREQUAL "")
  set(bkv_sanitizer "none")
else()
  set(bkv_sanitizer "${BKV_SANITIZE}")
endif()
if(BKV_FUZZ)
  string(APPEND bkv_sanitizer " (with libFuzzer coverage)")
endif()
string(TOUPPER "${CMAKE_BUILD_TYPE}" bkv_build_type_upper)
string(STRIP "${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_${bkv_build_type_upper}}" bkv_cxx_flags)
add_custom_target(bkv_build_info
  COMMAND ${CMAKE_COMMAND} -DSRC=${PROJECT_SOURCE_DIR} -DOUT=${BKV_BUILD_INFO_DIR}/bkv_build_info.hpp
          -DBUILD_TYPE=${CMAKE_BUILD_TYPE}
          "-DCOMPILER=${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}"
          "-DSANITIZER=${bkv_sanitizer}" "-DCXX_FLAGS=${bkv_cxx_flags}"
          "-DUCX_VERSION=${UCX_VERSION}" "-DMPI_VERSION=${bkv_mpi_version}"
          "-DRDMA_CORE_VERSION=${bkv_rdma_core_version}"
          -P ${PROJECT_SOURCE_DIR}/cmake/build_info.cmake
  BYPRODUCTS ${BKV_BUILD_INFO_DIR}/bkv_build_info.hpp
  COMMENT "Recording the git commit for benchkv's provenance" VERBATIM)
add_dependencies(bkv_app bkv_build_info)
target_include_directories(bkv_app PRIVATE ${BKV_BUILD_INFO_DIR})
