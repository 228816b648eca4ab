# core/shm micro-benchmarks: each prints its setup and ratios measured side by side.
foreach(b ipc delegation delegation_calls flux)
  add_executable(bench_shm_${b} ${CMAKE_CURRENT_SOURCE_DIR}/shm_${b}.cpp)
  target_link_libraries(bench_shm_${b} PRIVATE bkv_core)
endforeach()
