# Real runs: the threaded runtime over the wall-clock loopback (group
# concurrency, also under ThreadSanitizer), benchkv over MPI + UCX and the real-path CLI
# checks (group e2e).
bkv_add_test(test_real_wallclock GROUP concurrency SOURCES real2/test_real_wallclock.cpp LIBS bkv_kv bkv_bench)

# benchkv on the real path: CLI rejections (no MPI needed) and mpirun -np 2 runs over UCX.
bkv_group_enabled(e2e BKV_REAL2_E2E)
if(BKV_REAL2_E2E AND TARGET benchkv)
  bkv_add_test(test_real_cli GROUP e2e SOURCES real2/test_real_cli.cpp LIBS nlohmann_json::nlohmann_json)
  target_compile_definitions(test_real_cli PRIVATE BENCHKV_BIN="$<TARGET_FILE:benchkv>")
  add_dependencies(test_real_cli benchkv)
  if(MPI_C_FOUND AND TARGET bkv_mlx5)  # benchkv's --transport mlx5/verbs looks the device up
    target_compile_definitions(test_real_cli PRIVATE BKV_REAL_RDMA=1)
  endif()
  if(MPI_C_FOUND AND MPIEXEC_EXECUTABLE AND TARGET bkv_ucx_am)
    bkv_add_test(test_real_mpi GROUP e2e SOURCES real2/test_real_mpi.cpp LIBS nlohmann_json::nlohmann_json)
    target_compile_definitions(test_real_mpi PRIVATE BENCHKV_BIN="$<TARGET_FILE:benchkv>"
                                                     MPIEXEC_BIN="${MPIEXEC_EXECUTABLE}")
    add_dependencies(test_real_mpi benchkv)
  endif()
endif()

# The ucx-am baseline in one process (threads, and a stranger's malformed messages).
if(TARGET bkv_ucx_am)
  bkv_add_test(test_ucx_am GROUP unit SOURCES real2/test_ucx_am.cpp LIBS bkv_ucx_am bkv_bench)
endif()
