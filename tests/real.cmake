# Real-run pieces: wall-clock loopback transport, UCX transport, threaded runtime,
# MPI orchestration (tests/real/).
if(TARGET bkv_ucx)
  bkv_add_test(test_ucx_transport GROUP e2e SOURCES real/test_ucx_transport.cpp LIBS bkv_ucx)
  bkv_add_test(test_copyrpc_ucx GROUP e2e SOURCES real/test_copyrpc_ucx.cpp LIBS bkv_ucx)
endif()
bkv_add_test(test_wallclock_transport GROUP concurrency SOURCES real/test_wallclock_transport.cpp)
bkv_add_test(test_copyrpc_wallclock GROUP concurrency SOURCES real/test_copyrpc_wallclock.cpp)
bkv_add_test(test_runtime GROUP concurrency SOURCES real/test_runtime.cpp)

# mpirun -np 2 smoke test of the MPI orchestration helpers (+ a UCX exchange between the
# two processes when UCX is built). Registered directly with CTest: it is not a Catch test.
bkv_group_enabled(e2e BKV_REAL_E2E)
if(BKV_REAL_E2E AND MPI_C_FOUND AND MPIEXEC_EXECUTABLE)
  add_executable(test_mpi_smoke real/test_mpi_smoke.cpp ${PROJECT_SOURCE_DIR}/apps/benchkv/mpi_orchestration.cpp)
  target_link_libraries(test_mpi_smoke PRIVATE bkv_core MPI::MPI_C)
  if(TARGET bkv_ucx)
    target_link_libraries(test_mpi_smoke PRIVATE bkv_ucx)
    target_compile_definitions(test_mpi_smoke PRIVATE BKV_HAVE_UCX=1)
  endif()
  add_test(NAME mpi_smoke_np2
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 --oversubscribe $<TARGET_FILE:test_mpi_smoke>)
  set_tests_properties(mpi_smoke_np2 PROPERTIES LABELS e2e TIMEOUT 300
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
endif()
