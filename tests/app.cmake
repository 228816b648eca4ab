# benchkv's options (CLI and JSON) and results (CSV, summary JSON).
bkv_add_test(test_app GROUP unit
  SOURCES app/test_options.cpp app/test_results.cpp app/test_statistics.cpp
  LIBS bkv_app)
