# The scripts of scripts/ against small inputs, and the docs' path check (not Catch tests).
bkv_group_enabled(unit BKV_SCRIPT_TESTS)
# bkv_script_test(<name> <script in tests/scripts/> SYSTEM|ANY TIMEOUT <s> [BENCHKV]): a
# unit-labelled test running the script with the source root as its argument (and the
# benchkv binary after it with BENCHKV), by /usr/bin/python3 (SYSTEM: the plotting scripts
# need the Debian matplotlib and pandas) or by any Python 3 (ANY); left out when that
# interpreter (or benchkv) is missing.
function(bkv_script_test name script interpreter)
  cmake_parse_arguments(S "BENCHKV" "TIMEOUT" "" ${ARGN})
  if(interpreter STREQUAL "SYSTEM" AND EXISTS /usr/bin/python3)
    set(python /usr/bin/python3)
  elseif(interpreter STREQUAL "ANY" AND Python3_EXECUTABLE)
    set(python ${Python3_EXECUTABLE})
  else()
    return()
  endif()
  set(args ${PROJECT_SOURCE_DIR})
  if(S_BENCHKV)
    if(NOT TARGET benchkv)
      return()
    endif()
    list(APPEND args $<TARGET_FILE:benchkv>)
  endif()
  add_test(NAME ${name} COMMAND ${python} ${CMAKE_CURRENT_SOURCE_DIR}/scripts/${script} ${args})
  set_tests_properties(${name} PROPERTIES LABELS unit TIMEOUT ${S_TIMEOUT})
endfunction()

if(BKV_SCRIPT_TESTS)
  bkv_script_test(plot_epochs_script check_plot_epochs.py SYSTEM TIMEOUT 300 BENCHKV)
  bkv_script_test(plot_sweep_script check_plot_sweep.py SYSTEM TIMEOUT 120)
  bkv_script_test(plot_figures_script check_plot_figures.py SYSTEM TIMEOUT 300 BENCHKV)
  bkv_script_test(c1_accounting_script check_c1_accounting.py ANY TIMEOUT 60)
  bkv_script_test(c1_table_script check_c1_table.py ANY TIMEOUT 60)
  bkv_script_test(trace_phases_script check_trace_phases.py ANY TIMEOUT 60)
  bkv_script_test(plot_inputs_script check_plot_inputs.py SYSTEM TIMEOUT 60)
  bkv_script_test(doc_paths check_doc_paths.py ANY TIMEOUT 60)
  bkv_script_test(latency_histogram_script check_latency_histogram.py SYSTEM TIMEOUT 300 BENCHKV)
  bkv_script_test(doc_traces check_doc_traces.py ANY TIMEOUT 300 BENCHKV)
endif()
