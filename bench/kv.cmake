# Workload generation speed (core/kv): pattern setup cost at simulator scale, per-sample
# cost of the uniform and zipfian generators side by side.
add_executable(bench_workload ${CMAKE_CURRENT_SOURCE_DIR}/kv/bench_workload.cpp)
target_link_libraries(bench_workload PRIVATE bkv_kv fmt::fmt)
