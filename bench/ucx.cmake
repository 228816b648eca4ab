# UCX transport benchmarks: copyrpc and raw WRITE+IMM message rate over UCX, compared
# with ucx_perftest -t ucp_am_bw by bench/ucx_compare.sh.
if(TARGET bkv_ucx)
  add_executable(bench_ucx_copyrpc_rate ${CMAKE_CURRENT_SOURCE_DIR}/ucx_copyrpc_rate.cpp)
  target_link_libraries(bench_ucx_copyrpc_rate PRIVATE bkv_ucx CLI11::CLI11)
endif()
