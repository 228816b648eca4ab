bkv_add_test(test_backends_instant GROUP protocol SOURCES backends/test_backends_instant.cpp LIBS bkv_kv)
bkv_add_test(test_loop_policies GROUP protocol SOURCES backends/test_loop_policies.cpp LIBS bkv_kv)
bkv_add_test(test_daemon_services GROUP protocol SOURCES backends/test_daemon_services.cpp LIBS bkv_kv)
bkv_add_test(test_data_instant GROUP protocol SOURCES data/test_data_instant.cpp LIBS bkv_kv)
