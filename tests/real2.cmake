# Real runs (issue 5): the threaded runtime over the wall-clock loopback (group
# concurrency, also under ThreadSanitizer), benchkv over MPI + UCX and the real-path CLI
# checks (group e2e).
bkv_add_test(test_real_wallclock GROUP concurrency SOURCES real2/test_real_wallclock.cpp LIBS bkv_kv bkv_bench)
