# Transports: the conformance suite (tests/transport/conformance.hpp) instantiated for all
# seven transports, the transport-specific tests of the wall-clock loopback and UCX
# transports, and copyrpc over each (tests/transport/).
bkv_add_test(test_conformance_instant GROUP unit SOURCES transport/test_conformance_instant.cpp)
bkv_add_test(test_conformance_des GROUP sim SOURCES transport/test_conformance_des.cpp LIBS bkv_sim)
bkv_add_test(test_paged_memory GROUP unit SOURCES transport/test_paged_memory.cpp)
if(TARGET bkv_mlx5_emulator)
  bkv_add_test(test_conformance_mlx5_emulator GROUP mlx5 SOURCES transport/test_conformance_mlx5_emulator.cpp
               LIBS bkv_mlx5_emulator)
endif()
if(TARGET bkv_ucx)
  bkv_add_test(test_ucx_transport GROUP e2e SOURCES transport/test_ucx_transport.cpp LIBS bkv_ucx)
  bkv_add_test(test_ucx_hostile GROUP e2e SOURCES transport/test_ucx_hostile.cpp LIBS bkv_ucx)
  bkv_add_test(test_copyrpc_ucx GROUP e2e SOURCES transport/test_copyrpc_ucx.cpp LIBS bkv_ucx)
  bkv_add_test(test_data_ucx GROUP e2e SOURCES data/test_data_ucx.cpp LIBS bkv_ucx bkv_kv)
endif()
bkv_add_test(test_wallclock_transport GROUP concurrency SOURCES transport/test_wallclock_transport.cpp)
bkv_add_test(test_copyrpc_wallclock GROUP concurrency SOURCES transport/test_copyrpc_wallclock.cpp)

# Verbs and mlx5 on hardware: always compiled, run only with an RDMA device. Without one
# the executable prints why and exits 77, which ctest reports as "Skipped" (not passed).
if(TARGET bkv_mlx5)
  bkv_group_enabled(mlx5 rdma_enabled)
  if(rdma_enabled)
    add_executable(test_conformance_rdma transport/test_conformance_rdma.cpp)
    target_link_libraries(test_conformance_rdma PRIVATE Catch2::Catch2 bkv_core bkv_mlx5)
    target_include_directories(test_conformance_rdma PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${PROJECT_SOURCE_DIR})
    foreach(which verbs mlx5)
      add_test(NAME conformance_${which}_hardware COMMAND test_conformance_rdma ${which})
      set_tests_properties(conformance_${which}_hardware PROPERTIES SKIP_RETURN_CODE 77 LABELS mlx5)
    endforeach()
  endif()
endif()
bkv_add_test(test_data_wallclock GROUP concurrency SOURCES data/test_data_wallclock.cpp)
