# Simulator tests: engine, future-event sets, simulated threads, cost model, stations, NIC/network model,
# the discrete-event transport.
bkv_add_test(test_sim GROUP sim
  SOURCES sim/test_engine.cpp sim/test_event_set.cpp sim/test_sim_thread.cpp sim/test_config.cpp sim/test_stations.cpp
          sim/test_nic_model.cpp sim/test_nic_limits.cpp
  LIBS bkv_sim)
bkv_add_test(test_sim_copyrpc GROUP sim SOURCES sim/test_des_copyrpc.cpp LIBS bkv_sim)
# Whole simulated experiments: the exactly-once oracle, fault injection, the windows the figures cover.
if(TARGET bkv_sim_runner)
  bkv_add_test(test_ring_pages_choice GROUP unit SOURCES sim/test_ring_pages_choice.cpp LIBS bkv_sim_runner bkv_app)
  bkv_add_test(test_exactly_once GROUP sim SOURCES sim/test_exactly_once.cpp sim/test_faults.cpp
    sim/test_metric_windows.cpp LIBS bkv_sim_runner bkv_app)
endif()
