# Install rules and the Debian package (tools/package.sh: configure with prefix /usr, cpack -G DEB).
#   bin/onnxforge                              the command
#   share/man/man1/onnxforge.1.gz              its man page, generated from --help (cmake/manpage.cmake)
#   lib/<multiarch>/libonnxforge.so.*          the C++ API (include/onnxforge/onnxforge.h) with the engine inside
#   include/onnxforge/*.h                      its headers
#   lib/<multiarch>/cmake/onnxforge/           find_package(onnxforge) -> onnxforge::onnxforge
#   lib/python3/dist-packages/onnxforge/       the Python module (app/python/CMakeLists.txt)
# The installed library's interface carries only its include folder and C++17: the project's own
# flags (-Werror, -march) stay private to the build.
include(CMakePackageConfigHelpers)

if(TARGET onnxforge)
  install(TARGETS onnxforge RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)
  set(ONNXFORGE_MAN ${CMAKE_BINARY_DIR}/man/onnxforge.1.gz)
  add_custom_command(OUTPUT ${ONNXFORGE_MAN}
    COMMAND ${CMAKE_COMMAND} -DONNXFORGE=$<TARGET_FILE:onnxforge> -DOUT=${ONNXFORGE_MAN} -DVERSION=${PROJECT_VERSION}
            -P ${CMAKE_SOURCE_DIR}/cmake/manpage.cmake
    DEPENDS onnxforge ${CMAKE_SOURCE_DIR}/cmake/manpage.cmake
    COMMENT "Generating the man page from onnxforge --help" VERBATIM)
  add_custom_target(onnxforge_man ALL DEPENDS ${ONNXFORGE_MAN})
  install(FILES ${ONNXFORGE_MAN} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT cli)
endif()

if(TARGET onnxforge_shared)
  install(TARGETS onnxforge_shared EXPORT onnxforgeTargets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT lib)
  install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/onnxforge DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT lib
          FILES_MATCHING PATTERN "*.h")
  set(ONNXFORGE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/onnxforge)
  install(EXPORT onnxforgeTargets NAMESPACE onnxforge:: DESTINATION ${ONNXFORGE_CMAKE_DIR} COMPONENT lib)
  configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/onnxforgeConfig.cmake.in
                                ${CMAKE_BINARY_DIR}/cmake/onnxforgeConfig.cmake INSTALL_DESTINATION ${ONNXFORGE_CMAKE_DIR})
  # 0.x: every minor version may change the API.
  write_basic_package_version_file(${CMAKE_BINARY_DIR}/cmake/onnxforgeConfigVersion.cmake
                                   VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
  install(FILES ${CMAKE_BINARY_DIR}/cmake/onnxforgeConfig.cmake ${CMAKE_BINARY_DIR}/cmake/onnxforgeConfigVersion.cmake
          DESTINATION ${ONNXFORGE_CMAKE_DIR} COMPONENT lib)
endif()

# The .deb: onnxforge_<version>_amd64.deb. Its Depends come from the installed binaries' shared
# libraries (dpkg-shlibdeps: libc, libstdc++, TBB, protobuf, mimalloc); the Python module needs
# Debian's python3 3.11 (its extension suffix) and NumPy / onnx for arrays and ModelProtos.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME onnxforge)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "onnxforge developers <onnxforge@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "optimize ONNX models and prove the result computes the same")
set(CPACK_PACKAGE_DESCRIPTION "onnxforge loads ONNX models without copying weights, optimizes the graph with passes of known
accuracy class, verifies the result against the original with its own SIMD runtime, and explains
what it did. Command line (onnxforge), C++ library (find_package(onnxforge)) and Python module
(import onnxforge).")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "python3 (>= 3.11), python3 (<< 3.12), python3-numpy, python3-onnx")
set(CPACK_STRIP_FILES ON)
include(CPack)
