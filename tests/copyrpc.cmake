bkv_add_test(test_copyrpc_wire GROUP protocol SOURCES copyrpc/test_wire.cpp)
