bkv_add_test(test_copyrpc_wire GROUP protocol SOURCES copyrpc/test_wire.cpp)
bkv_add_test(test_copyrpc_context GROUP protocol SOURCES copyrpc/test_copyrpc_context.cpp)
bkv_add_test(test_copyrpc_property GROUP protocol SOURCES copyrpc/test_copyrpc_property.cpp)
bkv_add_test(test_copyrpc_edges GROUP protocol SOURCES copyrpc/test_copyrpc_edges.cpp)
# Bounds checks at their boundary: an out-of-range vector index aborts here (libstdc++
# assertions) rather than reading past the end unnoticed.
if(TARGET test_copyrpc_edges)
  target_compile_definitions(test_copyrpc_edges PRIVATE _GLIBCXX_ASSERTIONS)
endif()
