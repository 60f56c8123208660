# The Python extension modules for CPythons other than the one CMake found (the self-contained
# wheel, scripts/wheel.sh): one module per version from that version's headers alone, named with
# its SOABI, so that the one py3 wheel carries a module for each and CPython imports its own.
#   STALLSCOPE_EXTRA_PYTHONS: a list of X.Y=INCLUDE_DIR[,INCLUDE_DIR...] (Python.h's folder and,
#   where it lies apart, pyconfig.h's), e.g. 3.13=/h/usr/include/python3.13,/h/usr/include/x86_64-linux-gnu/python3.13
# An extension module links no libpython on Linux: the interpreter that imports it provides the API.
set(STALLSCOPE_EXTRA_PYTHONS "" CACHE STRING "Other CPythons to build the extension modules for: X.Y=INCLUDE_DIR[,DIR]...")

# stallscope_extra_python_modules(NAME SOURCES <files> LIBRARIES <targets> INCLUDES <dirs>): NAME's module for each
# of STALLSCOPE_EXTRA_PYTHONS, built into ${CMAKE_BINARY_DIR}/lib and installed into lib/.
function(stallscope_extra_python_modules name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES;INCLUDES" ${ARGN})
  foreach(entry IN LISTS STALLSCOPE_EXTRA_PYTHONS)
    if(NOT entry MATCHES "^([0-9]+)\\.([0-9]+)=(.+)$")
      message(FATAL_ERROR "STALLSCOPE_EXTRA_PYTHONS: '${entry}' is not X.Y=INCLUDE_DIR[,INCLUDE_DIR]")
    endif()
    set(nodot "${CMAKE_MATCH_1}${CMAKE_MATCH_2}")
    string(REPLACE "," ";" dirs "${CMAKE_MATCH_3}")
    set(target ${name}_py${nodot})
    add_library(${target} MODULE ${ARG_SOURCES})
    target_include_directories(${target} PRIVATE ${ARG_INCLUDES})
    target_include_directories(${target} SYSTEM PRIVATE ${dirs})
    target_link_libraries(${target} PRIVATE ${ARG_LIBRARIES})
    set_target_properties(${target} PROPERTIES
      OUTPUT_NAME ${name} PREFIX "" SUFFIX ".cpython-${nodot}-${CMAKE_SYSTEM_PROCESSOR}-linux-gnu.so"
      LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
    install(TARGETS ${target} LIBRARY DESTINATION lib)
  endforeach()
endfunction()
