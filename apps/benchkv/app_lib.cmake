# bkv_app: benchkv's options (CLI + JSON) and results (CSV, summary JSON). Included from the
# top level even when apps/benchkv itself is skipped, because tests of real-run pieces
# (also in the sanitizer builds) read options and write results.
add_library(bkv_app STATIC ${PROJECT_SOURCE_DIR}/apps/benchkv/options.cpp ${PROJECT_SOURCE_DIR}/apps/benchkv/results.cpp)
target_link_libraries(bkv_app PUBLIC bkv_kv fmt::fmt nlohmann_json::nlohmann_json PRIVATE CLI11::CLI11)
