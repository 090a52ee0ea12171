# Makes the layer order of src/CMakeLists.txt hold (docs/architecture.md). Included from there,
# after the layer libraries are defined; EDDY_LAYERS lists them bottom to top.
#
# Static libraries link with unresolved symbols, so an upward call would go unnoticed until some
# program linked the whole engine. Two checks fail the build instead:
#  - calls: each layer, with the layers below it and nothing else, is linked into a shared library
#    with --no-undefined; a layer that calls a function defined above it fails that link;
#  - includes: cmake/check_layer_includes.cmake rejects an #include "eddy/<layer>/..." of a layer
#    above the including file's own (and it runs in ctest too, test `layer_includes`).
# A third catches what neither sees, a member that a lower layer's header declares and only a
# higher layer defines (nothing below calls it, so every lower link succeeds):
#  - definitions: cmake/check_layer_definitions.py reads the layers' libraries with nm and rejects
#    a member defined above the layer whose header defines its class (needs Python 3).
option(EDDY_CHECK_LAYERS "Fail the build on an upward include or call between layers" ON)
if(NOT EDDY_CHECK_LAYERS)
  return()
endif()

set(eddy_layer_check_source ${CMAKE_CURRENT_BINARY_DIR}/layer_check.cpp)
# Written only when its text changes (file(WRITE) touched it at every configure, which rebuilt
# and relinked every layer check library).
file(CONFIGURE OUTPUT ${eddy_layer_check_source}
     CONTENT "// Empty: the layer check libraries consist of one layer and the layers below it.\n")
foreach(layer IN LISTS EDDY_LAYERS)
  add_library(eddy_${layer}_layer_check SHARED ${eddy_layer_check_source})
  target_link_libraries(eddy_${layer}_layer_check PRIVATE $<LINK_LIBRARY:WHOLE_ARCHIVE,eddy_${layer}>)
  target_link_options(eddy_${layer}_layer_check PRIVATE LINKER:--no-undefined)
  set_target_properties(eddy_${layer}_layer_check PROPERTIES
    LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/layer_checks)
endforeach()

file(GLOB_RECURSE eddy_layer_files CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/src/eddy/*.h ${PROJECT_SOURCE_DIR}/src/eddy/*.cpp)
set(eddy_layer_includes_stamp ${PROJECT_BINARY_DIR}/layer_checks/includes.stamp)
list(JOIN EDDY_LAYERS "," eddy_layer_list)
add_custom_command(
  OUTPUT ${eddy_layer_includes_stamp}
  COMMAND ${CMAKE_COMMAND} -DLAYERS=${eddy_layer_list} -DROOT=${PROJECT_SOURCE_DIR}/src/eddy
          -P ${PROJECT_SOURCE_DIR}/cmake/check_layer_includes.cmake
  COMMAND ${CMAKE_COMMAND} -E touch ${eddy_layer_includes_stamp}
  DEPENDS ${eddy_layer_files} ${PROJECT_SOURCE_DIR}/cmake/check_layer_includes.cmake
  COMMENT "Checking that every #include in src/eddy goes down the layers"
  VERBATIM)
add_custom_target(eddy_layer_includes_check ALL DEPENDS ${eddy_layer_includes_stamp})
# The layers' objects wait for the include check, so an upward include stops the build early.
foreach(layer IN LISTS EDDY_LAYERS)
  add_dependencies(eddy_${layer} eddy_layer_includes_check)
endforeach()

find_package(Python3 QUIET COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  set(eddy_layer_libraries "")
  foreach(layer IN LISTS EDDY_LAYERS)
    list(APPEND eddy_layer_libraries $<TARGET_FILE:eddy_${layer}>)
  endforeach()
  set(eddy_layer_definitions_stamp ${PROJECT_BINARY_DIR}/layer_checks/definitions.stamp)
  add_custom_command(
    OUTPUT ${eddy_layer_definitions_stamp}
    COMMAND Python3::Interpreter ${PROJECT_SOURCE_DIR}/cmake/check_layer_definitions.py
            --root ${PROJECT_SOURCE_DIR}/src/eddy --layers ${eddy_layer_list}
            --lib-dir $<TARGET_FILE_DIR:eddy_core> --nm ${CMAKE_NM} --stamp ${eddy_layer_definitions_stamp}
    DEPENDS ${eddy_layer_libraries} ${eddy_layer_files} ${PROJECT_SOURCE_DIR}/cmake/check_layer_definitions.py
    COMMENT "Checking that every layer defines only members of its own classes"
    VERBATIM)
  add_custom_target(eddy_layer_definitions_check ALL DEPENDS ${eddy_layer_definitions_stamp})
  # For the ctest of the same name (tests/CMakeLists.txt).
  set(EDDY_LAYER_CHECK_PYTHON ${Python3_EXECUTABLE} PARENT_SCOPE)
else()
  message(STATUS "eddy: no Python 3, so the build does not check where layers define members")
endif()
