# core/shm: shared-memory segments, delegationrpc (MPSC), ipc (SPSC RPC), flux.
bkv_add_test(test_shm_protocol GROUP protocol
  SOURCES shm/test_segment.cpp shm/test_delegationrpc.cpp shm/test_ipc.cpp shm/test_flux.cpp
          shm/test_forged_shm.cpp shm/test_shm_edges.cpp)
bkv_add_test(test_shm_threads GROUP concurrency SOURCES shm/test_shm_threads.cpp)
