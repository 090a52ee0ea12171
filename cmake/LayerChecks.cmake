# Makes the layer order of src/CMakeLists.txt hold (docs/architecture.md). Included from there,
# after the layer libraries are defined; EDDY_LAYERS lists them bottom to top.
#
# Static libraries link with unresolved symbols, so an upward call would go unnoticed until some
# program linked the whole engine. Two checks fail the build instead:
#  - calls: each layer, with the layers below it and nothing else, is linked into a shared library
#    with --no-undefined; a layer that calls a function defined above it fails that link;
#  - includes: cmake/check_layer_includes.cmake rejects an #include "eddy/<layer>/..." of a layer
#    above the including file's own (and it runs in ctest too, test `layer_includes`).
option(EDDY_CHECK_LAYERS "Fail the build on an upward include or call between layers" ON)
if(NOT EDDY_CHECK_LAYERS)
  return()
endif()

set(eddy_layer_check_source ${CMAKE_CURRENT_BINARY_DIR}/layer_check.cpp)
file(WRITE ${eddy_layer_check_source}
     "// Empty: the layer check libraries consist of one layer and the layers below it.\n")
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
