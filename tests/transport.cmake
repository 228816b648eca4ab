# Transports on real threads: the wall-clock loopback and UCX transports, and copyrpc over
# each (tests/transport/).
if(TARGET bkv_ucx)
  bkv_add_test(test_ucx_transport GROUP e2e SOURCES transport/test_ucx_transport.cpp LIBS bkv_ucx)
  bkv_add_test(test_copyrpc_ucx GROUP e2e SOURCES transport/test_copyrpc_ucx.cpp LIBS bkv_ucx)
endif()
bkv_add_test(test_wallclock_transport GROUP concurrency SOURCES transport/test_wallclock_transport.cpp)
bkv_add_test(test_copyrpc_wallclock GROUP concurrency SOURCES transport/test_copyrpc_wallclock.cpp)
