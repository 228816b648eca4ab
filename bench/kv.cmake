# Workload generation speed (core/kv): pattern setup cost at simulator scale, per-sample
# cost of the uniform and zipfian generators side by side.
add_executable(bench_workload ${CMAKE_CURRENT_SOURCE_DIR}/kv/bench_workload.cpp)
target_link_libraries(bench_workload PRIVATE bkv_kv fmt::fmt)

# What recording request latency costs a client (backends/client.hpp), with and without:
# the bare client and real paths (shared-memory ipc on two threads, nodes stepped in one).
add_executable(bench_client_latency ${CMAKE_CURRENT_SOURCE_DIR}/kv/bench_client_latency.cpp)
target_link_libraries(bench_client_latency PRIVATE bkv_app bkv_kv bkv_core fmt::fmt)
