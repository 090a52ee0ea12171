# `cmake --install build --prefix <dir>` gives the engine's headers and static libraries, the
# solvers', the `eddy` command, and the package a C++ project finds with find_package(eddy):
#
#   find_package(eddy REQUIRED)
#   target_link_libraries(app PRIVATE eddy::eddy)   # the engine; eddy::pinn etc. for the solvers
#
# Not for the Python wheel: scikit-build-core installs into the wheel, which needs only the module.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(EDDY_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/eddy)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/src/eddy/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/eddy
        FILES_MATCHING PATTERN "*.h" PATTERN "*.def")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/solvers/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/solvers
        FILES_MATCHING PATTERN "*.h")

set(eddy_layer_targets "")
foreach(layer IN LISTS EDDY_LAYERS)
  list(APPEND eddy_layer_targets eddy_${layer})
endforeach()
install(TARGETS ${eddy_layer_targets} eddy eddy_solvers_common eddy_pinn eddy_operator eddy_classical eddy_lm
        EXPORT eddyTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT eddyTargets NAMESPACE eddy:: DESTINATION ${EDDY_INSTALL_CMAKEDIR})
# The same targets from the build tree, beside its eddyConfig.cmake: a project may find this build
# uninstalled (-Deddy_DIR=<build>).
export(EXPORT eddyTargets NAMESPACE eddy:: FILE ${PROJECT_BINARY_DIR}/eddyTargets.cmake)

# The command keeps the run path to libraries found outside the system's directories (NVRTC).
set_target_properties(eddy_cli PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
install(TARGETS eddy_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/eddyConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/eddyConfig.cmake
                              INSTALL_DESTINATION ${EDDY_INSTALL_CMAKEDIR})
# 0.x: a minor release may break the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/eddyConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/eddyConfig.cmake ${PROJECT_BINARY_DIR}/eddyConfigVersion.cmake
        DESTINATION ${EDDY_INSTALL_CMAKEDIR})
