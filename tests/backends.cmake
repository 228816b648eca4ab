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
# bench_client_latency (bench/kv/): its bare setups once spun forever (their fake remote
# path lost the calls the client made while it answered). A short run of every setup that
# runs on one thread, each way, must complete its requests and record each once (the bench
# checks the counts itself). Only in trees that build the benchmarks.
bkv_group_enabled(unit BKV_BENCH_CLIENT_LATENCY_TEST)
if(BKV_BENCH_CLIENT_LATENCY_TEST AND TARGET bench_client_latency)
  add_test(NAME bench_client_latency_short
           COMMAND bench_client_latency 20000 2000 bare,bare-rawtsc,ipc-1t,deleg-1t)
  set_tests_properties(bench_client_latency_short PROPERTIES LABELS unit TIMEOUT 120)
endif()
