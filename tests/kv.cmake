# core/kv (types, store, workload) and core/bench (options, results) unit tests.
bkv_add_test(test_kv GROUP unit
  SOURCES kv/test_types.cpp kv/test_store.cpp kv/test_workload.cpp
  LIBS bkv_kv)
bkv_add_test(test_bench GROUP unit
  SOURCES bench/test_options.cpp bench/test_results.cpp
  LIBS bkv_bench)
