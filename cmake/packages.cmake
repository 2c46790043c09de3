# Debian packages through CPack (`make deb`: build/packages/*.deb), one per install component
# (cmake/install.cmake):
#   gpuscan-server   bin/gpuscan-server, its systemd unit, its settings' default; postinst makes
#                    the gpuscan system user and /etc/default/gpuscan-server (cmake/deb/server/)
#   gpuscan-cli      bin/gpuscan
#   libgpuscan-dev   the C++ client and the C API, headers, CMake package, pkg-config files
#   python3-gpuscan  the Python package with its C API library (if the package is built)
# Runtime libraries are found by dpkg-shlibdeps; tests/packages installs them into a clean
# Debian 12 root (`make test-debs`).
install(FILES ${PROJECT_SOURCE_DIR}/deploy/systemd/gpuscan-server.service
        DESTINATION lib/systemd/system COMPONENT server)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/systemd/gpuscan-server.default
        DESTINATION ${CMAKE_INSTALL_DATADIR}/gpuscan-server COMPONENT server)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME gpuscan)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_CONTACT "gpuscan maintainers <gpuscan@localhost>")
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_STRIP_FILES ON)  # the build's line tables stay in the build tree
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_COMPONENTS_ALL server cli dev)

set(CPACK_DEBIAN_SERVER_PACKAGE_NAME gpuscan-server)
set(CPACK_COMPONENT_SERVER_DESCRIPTION "gpuscan server: prefix scans, reductions, compaction, sort and histograms on GPUs (CPU fallback) as a gRPC service")
set(CPACK_DEBIAN_SERVER_PACKAGE_DEPENDS "passwd")
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_EXTRA
    ${CMAKE_CURRENT_LIST_DIR}/deb/server/postinst ${CMAKE_CURRENT_LIST_DIR}/deb/server/prerm
    ${CMAKE_CURRENT_LIST_DIR}/deb/server/postrm)
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)

set(CPACK_DEBIAN_CLI_PACKAGE_NAME gpuscan-cli)
set(CPACK_COMPONENT_CLI_DESCRIPTION "gpuscan command-line client: scan, reduce, compact, sort, histogram and resident arrays from files or stdin")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libgpuscan-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_COMPONENT_DEV_DESCRIPTION "gpuscan C++ client and C API: headers, static client libraries, the C API's shared library, CMake package (gpuscan::client, gpuscan::capi) and pkg-config files")
# What the installed headers and gpuscanConfig.cmake / gpuscan.pc need to build against.
# protobuf-compiler-grpc: Debian's gRPCConfig.cmake fails without the grpc_cpp_plugin it names.
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libgrpc++-dev, libprotobuf-dev, protobuf-compiler-grpc, pkg-config")

if(TARGET gpuscan_python)
  list(APPEND CPACK_COMPONENTS_ALL python)
  set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-gpuscan)
  set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
  set(CPACK_COMPONENT_PYTHON_DESCRIPTION "gpuscan Python client (gpuscan, gpuscan.aio, gpuscan.dask) with its native data path")
  set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS "python3, python3-grpcio, python3-protobuf, python3-numpy")
endif()
include(CPack)
