bkv_add_test(test_backends_instant GROUP protocol SOURCES backends/test_backends_instant.cpp LIBS bkv_kv)
bkv_add_test(test_client_latency GROUP protocol SOURCES backends/test_client_latency.cpp LIBS bkv_kv)
bkv_add_test(test_client_loop GROUP protocol SOURCES backends/test_client_loop.cpp LIBS bkv_kv)
bkv_add_test(test_loop_policies GROUP protocol SOURCES backends/test_loop_policies.cpp LIBS bkv_kv)
bkv_add_test(test_daemon_services GROUP protocol SOURCES backends/test_daemon_services.cpp LIBS bkv_kv)
bkv_add_test(test_data_instant GROUP protocol SOURCES data/test_data_instant.cpp LIBS bkv_kv)
# A daemon's bounds checks at their boundary: an out-of-range vector index aborts here
# (libstdc++ assertions) rather than reading past the end unnoticed.
if(TARGET test_daemon_services)
  target_compile_definitions(test_daemon_services PRIVATE _GLIBCXX_ASSERTIONS)
endif()
