# Real-run pieces: wall-clock loopback transport, UCX transport, threaded runtime,
# MPI orchestration (tests/real/).
if(TARGET bkv_ucx)
  bkv_add_test(test_ucx_transport GROUP e2e SOURCES real/test_ucx_transport.cpp LIBS bkv_ucx)
endif()
