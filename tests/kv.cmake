# core/kv unit tests: types, store, workload.
bkv_add_test(test_kv GROUP unit THREADED
  SOURCES kv/test_types.cpp kv/test_store.cpp kv/test_workload.cpp kv/test_history_oracle.cpp
  LIBS bkv_kv)
bkv_add_test(test_data_wire GROUP unit SOURCES data/test_blob_store.cpp LIBS bkv_kv)
