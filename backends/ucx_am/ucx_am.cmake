# backends/ucx_am: the pure UCX active-message baseline (bkv_ucx_am). Included by
# apps/benchkv/CMakeLists.txt and tests/real_runs.cmake (the top level adds no backends/
# directory; the first declares it); built only when UCX was found.
if(TARGET PkgConfig::UCX AND NOT TARGET bkv_ucx_am)
  add_library(bkv_ucx_am STATIC ${CMAKE_CURRENT_LIST_DIR}/ucp_worker.cpp ${CMAKE_CURRENT_LIST_DIR}/ucx_am.cpp
              ${CMAKE_CURRENT_LIST_DIR}/ucx_am_data.cpp)
  target_include_directories(bkv_ucx_am PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(bkv_ucx_am PUBLIC bkv_core bkv_kv PkgConfig::UCX)
endif()
