if(TARGET bkv_sim_runner)
  bkv_add_test(test_calibration GROUP sim SOURCES calibration/test_c1_regimes.cpp LIBS bkv_sim_runner bkv_app)
  if(TARGET test_calibration)
    target_compile_definitions(test_calibration PRIVATE BKV_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  endif()
  bkv_add_test(test_answer_handoff GROUP sim SOURCES calibration/test_answer_handoff.cpp LIBS bkv_sim_runner bkv_app)
  if(TARGET test_answer_handoff)
    target_compile_definitions(test_answer_handoff PRIVATE BKV_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  endif()
  bkv_add_test(test_timed_writes GROUP sim SOURCES calibration/test_timed_writes.cpp LIBS bkv_sim_runner bkv_app)
  if(TARGET test_timed_writes)
    target_compile_definitions(test_timed_writes PRIVATE BKV_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  endif()
endif()

# The calibration suite's script against real summaries (not a Catch test).
find_package(Python3 COMPONENTS Interpreter)
bkv_group_enabled(sim BKV_CALIBRATE_SCRIPT)
if(BKV_CALIBRATE_SCRIPT AND Python3_FOUND AND TARGET benchkv)
  add_test(NAME calibrate_script
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/calibration/check_calibrate_script.py
                   ${PROJECT_SOURCE_DIR} $<TARGET_FILE:benchkv>)
  set_tests_properties(calibrate_script PROPERTIES LABELS sim TIMEOUT 300)
  # The suite's C3 QD=256 windows lie past the start-up burst (steady, as measured).
  add_test(NAME calibrate_steady_windows
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/calibration/check_steady_windows.py
                   ${PROJECT_SOURCE_DIR} $<TARGET_FILE:benchkv>)
  set_tests_properties(calibrate_steady_windows PROPERTIES LABELS sim TIMEOUT 300)
endif()
