# core/kv unit tests: types, store, workload.
bkv_add_test(test_kv GROUP unit
  SOURCES kv/test_types.cpp kv/test_store.cpp kv/test_workload.cpp
  LIBS bkv_kv)
