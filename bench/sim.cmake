# Simulator engine throughput (events per wall-clock second with a realistic mix).
add_executable(bench_sim_engine ${CMAKE_CURRENT_SOURCE_DIR}/sim_engine.cpp)
target_link_libraries(bench_sim_engine PRIVATE bkv_sim)

# The simulator's own limit: the same backend steps with no event engine, over the
# instant loopback (bench/sim_limit.sh runs it beside the simulator and prints the ratio).
add_executable(bench_sim_limit ${CMAKE_CURRENT_SOURCE_DIR}/sim_limit.cpp)
target_link_libraries(bench_sim_limit PRIVATE bkv_app bkv_kv)
