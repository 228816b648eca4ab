# mlx5 transport tests. The WQE/CQE byte-layout tests are protocol tests (also run
# under ASan+UBSan in CI); the direct data path against the software NIC emulator and
# the device tests (no RDMA device needed: they check the "no device" errors) are mlx5.
if(TARGET bkv_mlx5_emulator)
  bkv_add_test(test_mlx5_layout GROUP protocol SOURCES mlx5/test_wqe_layout.cpp LIBS bkv_mlx5_direct)
  bkv_add_test(test_mlx5_emulator GROUP mlx5 SOURCES mlx5/test_direct_emulator.cpp LIBS bkv_mlx5_emulator)
  bkv_add_test(test_mlx5_copyrpc GROUP mlx5 SOURCES mlx5/test_copyrpc_mlx5.cpp LIBS bkv_mlx5_emulator)
  bkv_add_test(test_rpc_mlx5 GROUP mlx5 SOURCES mlx5/test_rpc_mlx5.cpp LIBS bkv_mlx5_emulator)
  bkv_add_test(test_data_mlx5 GROUP mlx5 SOURCES data/test_data_mlx5.cpp LIBS bkv_mlx5_emulator bkv_kv)
  bkv_add_test(test_mlx5_rules GROUP mlx5 SOURCES mlx5/test_mlx5_rules.cpp LIBS bkv_mlx5_emulator)
endif()
if(TARGET bkv_mlx5)
  bkv_add_test(test_mlx5_device GROUP mlx5 SOURCES mlx5/test_device.cpp LIBS bkv_mlx5)
endif()
