# What `cmake --install` puts under its prefix, by component (CPack's packages are these):
#   server  bin/gpuscan-server
#   cli     bin/gpuscan
#   dev     the C++ client (gpuscan::client: libgpuscan_client.a with the generated proto and wire
#           archives it needs, include/gpuscan/*.h and include/gpuscan/v1/*.pb.h), the C API
#           (gpuscan::capi: libgpuscan_capi.so, include/gpuscan_capi.h), the proto itself, and the
#           files that find them: lib/cmake/gpuscan/gpuscanConfig.cmake, lib/pkgconfig/gpuscan.pc
#           and gpuscan-capi.pc.
# Libraries go to <prefix>/lib (not a multiarch directory): gpuscan._native looks for the C API
# there. tests/install builds README.md's C++ example against an installed prefix both ways.
include(CMakePackageConfigHelpers)
set(GPUSCAN_INSTALL_LIBDIR lib)
set(GPUSCAN_INSTALL_CMAKEDIR ${GPUSCAN_INSTALL_LIBDIR}/cmake/gpuscan)

set_target_properties(gpuscan_client PROPERTIES EXPORT_NAME client)
set_target_properties(gpuscan_capi PROPERTIES EXPORT_NAME capi)
set_target_properties(gpuscan_proto PROPERTIES EXPORT_NAME proto)
set_target_properties(gpuscan_wire PROPERTIES EXPORT_NAME wire)
install(TARGETS gpuscan_client gpuscan_proto gpuscan_wire
        EXPORT gpuscanTargets
        ARCHIVE DESTINATION ${GPUSCAN_INSTALL_LIBDIR} COMPONENT dev)
install(TARGETS gpuscan_capi
        EXPORT gpuscanTargets
        LIBRARY DESTINATION ${GPUSCAN_INSTALL_LIBDIR} COMPONENT dev)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/client/include/gpuscan
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/proto/gpuscan/v1/gpuscan.pb.h ${PROJECT_BINARY_DIR}/proto/gpuscan/v1/gpuscan.grpc.pb.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gpuscan/v1 COMPONENT dev)
install(FILES ${PROJECT_SOURCE_DIR}/client/capi/gpuscan_capi.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
install(FILES ${PROJECT_SOURCE_DIR}/proto/gpuscan/v1/gpuscan.proto
        DESTINATION ${CMAKE_INSTALL_DATADIR}/gpuscan/proto/gpuscan/v1 COMPONENT dev)

install(EXPORT gpuscanTargets NAMESPACE gpuscan:: DESTINATION ${GPUSCAN_INSTALL_CMAKEDIR} COMPONENT dev)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/gpuscanConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/cmake/gpuscanConfig.cmake
                              INSTALL_DESTINATION ${GPUSCAN_INSTALL_CMAKEDIR})
# 0.x: a minor version may change the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/gpuscanConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/gpuscanConfig.cmake ${PROJECT_BINARY_DIR}/cmake/gpuscanConfigVersion.cmake
        DESTINATION ${GPUSCAN_INSTALL_CMAKEDIR} COMPONENT dev)
foreach(_pc gpuscan gpuscan-capi)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/${_pc}.pc.in ${PROJECT_BINARY_DIR}/cmake/${_pc}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/cmake/${_pc}.pc DESTINATION ${GPUSCAN_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)
endforeach()
