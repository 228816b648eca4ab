# Direct mlx5 data path: instructions per posted WRITE+IMM and per polled CQE, counted
# with callgrind over the software NIC emulator (run bench/mlx5_callgrind.sh).
if(TARGET bkv_mlx5_emulator)
  add_executable(bench_mlx5_instructions ${CMAKE_CURRENT_SOURCE_DIR}/mlx5_instructions.cpp)
  target_link_libraries(bench_mlx5_instructions PRIVATE bkv_mlx5_emulator)
endif()
