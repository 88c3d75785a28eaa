# Runs lazyx-fuzz with one bad option and checks that it exits with status 2 and a message
# naming the problem (cmake -DEXE=... -DOPT=... -DVALUE=... -DMESSAGE=... -P this file).
execute_process(COMMAND ${EXE} ${OPT} ${VALUE} --cases 1 RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "lazyx-fuzz ${OPT} ${VALUE}: exit status ${rc}, expected 2\n${out}${err}")
endif()
string(FIND "${err}" "${MESSAGE}" at)
if(at LESS 0)
  message(FATAL_ERROR "lazyx-fuzz ${OPT} ${VALUE}: stderr lacks \"${MESSAGE}\":\n${err}")
endif()
message(STATUS "refused as expected: ${err}")
