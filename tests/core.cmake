# core unit tests that belong to no other area: the real threads' clock.
bkv_add_test(test_tsc_clock GROUP unit SOURCES core/test_tsc_clock.cpp)
