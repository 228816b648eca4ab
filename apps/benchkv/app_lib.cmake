# bkv_app: benchkv's options (CLI + JSON) and results (CSV, summary JSON). Included from the
# top level even when apps/benchkv itself is skipped, because tests of real-run pieces
# (also in the sanitizer builds) read options and write results.
add_library(bkv_app STATIC ${PROJECT_SOURCE_DIR}/apps/benchkv/options.cpp ${PROJECT_SOURCE_DIR}/apps/benchkv/results.cpp
            ${PROJECT_SOURCE_DIR}/apps/benchkv/provenance.cpp)
target_link_libraries(bkv_app PUBLIC bkv_kv fmt::fmt nlohmann_json::nlohmann_json PRIVATE CLI11::CLI11)

# Provenance (apps/benchkv/provenance.hpp): the git commit and dirty flag are read at
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
add_custom_target(bkv_build_info
  COMMAND ${CMAKE_COMMAND} -DSRC=${PROJECT_SOURCE_DIR} -DOUT=${BKV_BUILD_INFO_DIR}/bkv_build_info.hpp
          -DBUILD_TYPE=${CMAKE_BUILD_TYPE}
          "-DCOMPILER=${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}"
          "-DUCX_VERSION=${UCX_VERSION}" "-DMPI_VERSION=${bkv_mpi_version}"
          -P ${PROJECT_SOURCE_DIR}/cmake/build_info.cmake
  BYPRODUCTS ${BKV_BUILD_INFO_DIR}/bkv_build_info.hpp
  COMMENT "Recording the git commit for benchkv's provenance" VERBATIM)
add_dependencies(bkv_app bkv_build_info)
target_include_directories(bkv_app PRIVATE ${BKV_BUILD_INFO_DIR})
