# Simulator engine throughput (events per wall-clock second with a realistic mix).
add_executable(bench_sim_engine ${CMAKE_CURRENT_SOURCE_DIR}/sim_engine.cpp)
target_link_libraries(bench_sim_engine PRIVATE bkv_sim)
