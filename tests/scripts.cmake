# The plotting scripts of scripts/ against small inputs (not Catch tests). They need
# matplotlib and pandas: the Debian packages, for the system interpreter.
bkv_group_enabled(unit BKV_SCRIPT_TESTS)
if(BKV_SCRIPT_TESTS AND EXISTS /usr/bin/python3 AND TARGET benchkv)
  add_test(NAME plot_epochs_script
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/scripts/check_plot_epochs.py
                   ${PROJECT_SOURCE_DIR} $<TARGET_FILE:benchkv>)
  set_tests_properties(plot_epochs_script PROPERTIES LABELS unit TIMEOUT 300)
endif()
if(BKV_SCRIPT_TESTS AND EXISTS /usr/bin/python3)
  add_test(NAME plot_sweep_script
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/scripts/check_plot_sweep.py ${PROJECT_SOURCE_DIR})
  set_tests_properties(plot_sweep_script PROPERTIES LABELS unit TIMEOUT 120)
endif()
if(BKV_SCRIPT_TESTS AND Python3_EXECUTABLE)
  add_test(NAME c1_accounting_script
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/scripts/check_c1_accounting.py ${PROJECT_SOURCE_DIR})
  set_tests_properties(c1_accounting_script PROPERTIES LABELS unit TIMEOUT 60)
endif()
if(BKV_SCRIPT_TESTS AND EXISTS /usr/bin/python3)
  add_test(NAME plot_inputs_script
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/scripts/check_plot_inputs.py ${PROJECT_SOURCE_DIR})
  set_tests_properties(plot_inputs_script PROPERTIES LABELS unit TIMEOUT 60)
endif()
if(BKV_SCRIPT_TESTS AND Python3_EXECUTABLE)
  add_test(NAME doc_paths
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/scripts/check_doc_paths.py ${PROJECT_SOURCE_DIR})
  set_tests_properties(doc_paths PROPERTIES LABELS unit TIMEOUT 60)
endif()
