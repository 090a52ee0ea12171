# cmake -DBUILD_DIR=<eddy build> -DCONSUMER=<tests/install/consumer> -DWORK=<scratch dir>
#       -DGENERATOR=<generator> -DCXX=<compiler> -P run_consumer.cmake
# Installs the eddy build into WORK/prefix, then configures, builds and runs the consumer project
# against it through find_package(eddy); then the same against the build tree itself
# (-Deddy_DIR=BUILD_DIR, its eddyConfig.cmake and eddyTargets.cmake). Any failing step fails the test.
foreach(var BUILD_DIR CONSUMER WORK GENERATOR CXX)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_consumer.cmake: -D${var}=... is missing")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})

execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK}/prefix
                OUTPUT_QUIET COMMAND_ERROR_IS_FATAL ANY)
foreach(installed include/eddy/core/tensor.h lib/cmake/eddy/eddyConfig.cmake
                  lib/cmake/eddy/eddyConfigVersion.cmake bin/eddy)
  if(NOT EXISTS ${WORK}/prefix/${installed})
    message(FATAL_ERROR "cmake --install did not install ${installed}")
  endif()
endforeach()

# The installed command starts (it finds every shared library it needs from there).
execute_process(COMMAND ${WORK}/prefix/bin/eddy --help OUTPUT_QUIET COMMAND_ERROR_IS_FATAL ANY)

# Only the installed eddy is on the search path, not the build tree.
execute_process(COMMAND ${CMAKE_COMMAND} -S ${CONSUMER} -B ${WORK}/build -G ${GENERATOR}
                        -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CXX}
                        -DCMAKE_PREFIX_PATH=${WORK}/prefix -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON
                COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK}/build COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${WORK}/build/consumer COMMAND_ERROR_IS_FATAL ANY)

# Uninstalled: the build tree's own package (its config found the targets file missing before).
execute_process(COMMAND ${CMAKE_COMMAND} -S ${CONSUMER} -B ${WORK}/build_tree -G ${GENERATOR}
                        -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CXX} -Deddy_DIR=${BUILD_DIR}
                        -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON
                COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK}/build_tree COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${WORK}/build_tree/consumer COMMAND_ERROR_IS_FATAL ANY)
