# Real runs: CPU pinning and the MPI orchestration helpers, the threaded runtime over the
# wall-clock loopback (group concurrency, also under ThreadSanitizer), benchkv over MPI +
# UCX and the real-path CLI checks (group e2e).
bkv_add_test(test_runtime GROUP concurrency SOURCES real_runs/test_runtime.cpp LIBS bkv_cpu_topology)

# mpirun -np 2 smoke test of the MPI orchestration helpers (+ a UCX exchange between the
# two processes when UCX is built). Registered directly with CTest: it is not a Catch test.
# Also built for the ThreadSanitizer build (the watchdog thread); there TSan's report of a
# lock-order inversion inside Open MPI's TCP transport (mca_btl_tcp_add_procs /
# mca_btl_tcp_proc_remove, under mpi::Session) is suppressed (BKV_MPIRUN_SANITIZER_ENV).
bkv_group_enabled(e2e BKV_REAL_E2E)
if("threaded" IN_LIST BKV_TEST_GROUPS)
  set(BKV_REAL_E2E ON)
endif()
if(BKV_REAL_E2E AND MPI_C_FOUND AND MPIEXEC_EXECUTABLE)
  add_executable(test_mpi_smoke real_runs/test_mpi_smoke.cpp ${PROJECT_SOURCE_DIR}/apps/benchkv/real/mpi_orchestration.cpp
                 ${PROJECT_SOURCE_DIR}/apps/benchkv/cli/stop_signals.cpp)
  target_link_libraries(test_mpi_smoke PRIVATE bkv_core MPI::MPI_C nlohmann_json::nlohmann_json)
  if(TARGET bkv_ucx)
    target_link_libraries(test_mpi_smoke PRIVATE bkv_ucx)
    target_compile_definitions(test_mpi_smoke PRIVATE BKV_HAVE_UCX=1)
  endif()
  add_test(NAME mpi_smoke_np2
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 --oversubscribe $<TARGET_FILE:test_mpi_smoke>)
  set_tests_properties(mpi_smoke_np2 PROPERTIES LABELS e2e TIMEOUT 300 RESOURCE_LOCK mpirun
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
  # The watchdog backstop ends a rank stuck outside a collective: its message, then the
  # job's exit status (rank 0's kPeerLostExitCode, 3, as mpirun passes it on). Its quiet
  # period (3 s + 2 x 0.5 s) outlasts the start-up bound (3 s): the start-up guard, which
  # the first collective ends, must not end the rank first (status 4). In these expressions
  # a '.' stands for each ';' of the message: CMake would split the expression there into
  # a list, any one of whose items passes the test.
  add_test(NAME mpi_watchdog
           COMMAND sh -c "\"$1\" -np 1 \"$2\" --watchdog 3; echo \"exit status $?\"" sh
                   ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:test_mpi_smoke>)
  set_tests_properties(mpi_watchdog PROPERTIES LABELS e2e TIMEOUT 120 RESOURCE_LOCK mpirun
    PASS_REGULAR_EXPRESSION "rank 0: no collective completed for 4\\.0 s \\(the longest phase plus twice BENCHKV_PEER_TIMEOUT=0\\.5 s\\): a peer rank is stopped, dead or unreachable. ending this rank.*exit status 3"
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;BENCHKV_PEER_TIMEOUT=0.5;BENCHKV_STARTUP_TIMEOUT=3")
  # The shut-down guard ends a rank whose peer stopped after the last collective: rank 0
  # waits for it in MPI_Finalize until BENCHKV_PEER_TIMEOUT (1 s) has passed, then says so
  # and exits 3 (mpirun passes it on and ends the stopped rank). Without the guard rank 0
  # waits for ever: `timeout` turns that into status 124.
  add_test(NAME mpi_finalize_guard
           COMMAND sh -c "timeout 60 \"$1\" -np 2 --oversubscribe \"$2\" --stop-before-finalize; echo \"exit status $?\"" sh
                   ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:test_mpi_smoke>)
  set_tests_properties(mpi_finalize_guard PROPERTIES LABELS e2e TIMEOUT 120 RESOURCE_LOCK mpirun
    PASS_REGULAR_EXPRESSION "benchkv: rank 0: shut-down did not finish within BENCHKV_PEER_TIMEOUT=1 s \\(waiting in MPI_Finalize\\): a peer rank may be stopped, dead or unreachable. ending this rank.*exit status 3"
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;BENCHKV_PEER_TIMEOUT=1")
  if(BKV_MPIRUN_SANITIZER_ENV)
    set_property(TEST mpi_smoke_np2 mpi_watchdog mpi_finalize_guard APPEND PROPERTY ENVIRONMENT "${BKV_MPIRUN_SANITIZER_ENV}")
  endif()
endif()

bkv_add_test(test_real_wallclock GROUP concurrency SOURCES real_runs/test_real_wallclock.cpp LIBS bkv_kv bkv_app)

# benchkv on the real path: CLI rejections (no MPI needed) and mpirun -np 2 runs over UCX.
# The mpirun runs are THREADED (benchkv's real runs: a thread per server and client).
if(TARGET benchkv)
  bkv_add_test(test_real_cli GROUP e2e SOURCES real_runs/test_real_cli.cpp LIBS nlohmann_json::nlohmann_json)
  if(TARGET test_real_cli)
    target_compile_definitions(test_real_cli PRIVATE BENCHKV_BIN="$<TARGET_FILE:benchkv>")
    add_dependencies(test_real_cli benchkv)
    if(MPI_C_FOUND AND TARGET bkv_mlx5)  # benchkv's --transport mlx5/verbs looks the device up
      target_compile_definitions(test_real_cli PRIVATE BKV_REAL_RDMA=1)
    endif()
  endif()
  bkv_plain_driver(test_real_cli)
  if(MPI_C_FOUND AND MPIEXEC_EXECUTABLE AND TARGET bkv_ucx_am)
    foreach(t test_real_mpi test_data_mpi)
      bkv_add_test(${t} GROUP e2e THREADED LOCK mpirun SOURCES real_runs/${t}.cpp LIBS nlohmann_json::nlohmann_json)
    endforeach()
    # benchkv probe between two processes (a few seconds; worker threads in each).
    bkv_add_test(test_probe_mpi GROUP e2e THREADED LOCK mpirun SOURCES real_runs/test_probe_mpi.cpp LIBS nlohmann_json::nlohmann_json)
    foreach(t test_real_mpi test_data_mpi test_probe_mpi)
      if(TARGET ${t})
        target_compile_definitions(${t} PRIVATE BENCHKV_BIN="$<TARGET_FILE:benchkv>" MPIEXEC_BIN="${MPIEXEC_EXECUTABLE}")
        if(BKV_MPIRUN_SANITIZER_ENV)  # e2e::mpirun_env
          target_compile_definitions(${t} PRIVATE BKV_MPIRUN_SANITIZER_ENV="${BKV_MPIRUN_SANITIZER_ENV}")
        endif()
        add_dependencies(${t} benchkv)
      endif()
      bkv_plain_driver(${t})
    endforeach()
  endif()
endif()

# The ucx-am baseline in one process (threads, and a stranger's malformed messages). The
# library is declared here too (once, whoever comes first), so that a tree without
# apps/benchkv (the ThreadSanitizer build) still has it.
include(${PROJECT_SOURCE_DIR}/backends/ucx_am/ucx_am.cmake)
if(TARGET bkv_ucx_am)
  bkv_add_test(test_ucx_am GROUP unit THREADED SOURCES real_runs/test_ucx_am.cpp LIBS bkv_ucx_am bkv_app)
  bkv_add_test(test_ucx_am_data GROUP unit SOURCES real_runs/test_ucx_am_data.cpp LIBS bkv_ucx_am)
endif()
