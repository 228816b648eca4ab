# core unit tests that belong to no other area: the real threads' clock.
bkv_add_test(test_tsc_clock GROUP unit SOURCES core/test_tsc_clock.cpp)
# core/strict_json.hpp: the nesting limit and bounded excerpts of values.
bkv_add_test(test_strict_json GROUP unit SOURCES core/test_strict_json.cpp LIBS nlohmann_json::nlohmann_json)
# The latency histogram against exactly known distributions.
bkv_add_test(test_latency_histogram GROUP unit SOURCES core/test_latency_histogram.cpp)
