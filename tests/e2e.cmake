# End-to-end tests of `benchkv --transport sim` (tests/e2e/): the benchkv binary runs as a
# child process in a scratch directory; its CSV, summary, trace and in-flight outputs are
# read back and checked. Group e2e (normal build only).
if(TARGET benchkv)
  # Its cases that start mpirun (tag [mpirun], the sweep as MPI ranks) take the lock the
  # other mpirun tests take.
  bkv_add_test(test_benchkv_e2e GROUP e2e LOCK mpirun LOCK_TAG "[mpirun]"
    SOURCES e2e/test_sim_runs.cpp e2e/test_determinism_config.cpp e2e/test_bad_input.cpp e2e/test_rpc.cpp e2e/test_sweep.cpp
            e2e/test_report.cpp e2e/test_data.cpp e2e/test_fast_paths.cpp e2e/test_interrupt.cpp
    LIBS nlohmann_json::nlohmann_json)
  if(TARGET test_benchkv_e2e)
    target_compile_definitions(test_benchkv_e2e PRIVATE BENCHKV_BIN="$<TARGET_FILE:benchkv>"
                                                         BKV_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
                                                         BKV_LIBIBVERBS_VERSION="${IBVERBS_libibverbs_VERSION}"
                                                         BKV_SANITIZE_FOR_TEST="${BKV_SANITIZE}"
                                                         BKV_FUZZ_FOR_TEST=$<BOOL:${BKV_FUZZ}>
                                                         BKV_BUILD_TYPE_FOR_TEST="${CMAKE_BUILD_TYPE}")
    add_dependencies(test_benchkv_e2e benchkv)
    if(MPI_C_FOUND AND MPIEXEC_EXECUTABLE)  # the sweep as MPI ranks (e2e/test_sweep.cpp)
      target_compile_definitions(test_benchkv_e2e PRIVATE MPIEXEC_BIN="${MPIEXEC_EXECUTABLE}")
      if(BKV_MPIRUN_SANITIZER_ENV)  # for its mpirun runs only (e2e::mpirun_env)
        target_compile_definitions(test_benchkv_e2e PRIVATE BKV_MPIRUN_SANITIZER_ENV="${BKV_MPIRUN_SANITIZER_ENV}")
      endif()
    endif()
  endif()
endif()

# benchkv probe and calibrate (tests/e2e/test_probe.cpp): the closed loop over the simulator,
# and the probe over the mlx5 NIC emulator.
if(TARGET benchkv)
  bkv_add_test(test_probe_e2e GROUP e2e SOURCES e2e/test_probe.cpp LIBS nlohmann_json::nlohmann_json)
  if(TARGET test_probe_e2e)
    target_compile_definitions(test_probe_e2e PRIVATE BENCHKV_BIN="$<TARGET_FILE:benchkv>" BKV_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
    add_dependencies(test_probe_e2e benchkv)
    if(TARGET bkv_mlx5_emulator)  # benchkv probe --transport mlx5-emu is built
      target_compile_definitions(test_probe_e2e PRIVATE BKV_TEST_PROBE_EMULATOR=1)
    endif()
    if(MPI_C_FOUND AND TARGET bkv_mlx5)  # benchkv probe --transport mlx5/verbs looks the device up
      target_compile_definitions(test_probe_e2e PRIVATE BKV_REAL_RDMA=1)
    endif()
  endif()
  bkv_plain_driver(test_benchkv_e2e)
  bkv_plain_driver(test_probe_e2e)
endif()
