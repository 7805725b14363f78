# `cmake --install` and `cpack -G DEB`: the two binaries, the systemd units (their ExecStart
# pointing at the installed daemon), the example configuration as the default
# stripesolve/stripesolved.yaml, a logrotate snippet and the docs. tests/packaging checks both.
#
# The units and the files for etc are placed by install(CODE) at install time, when the final
# prefix is known: /usr (the .deb, CPack installs with DESTDIR) puts them in /etc and points the
# units at /usr/bin; any other prefix P uses P/etc and P/bin.
include(GNUInstallDirs)

install(TARGETS stripesolved stripesolve RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/daemon/stripesolved.example.yaml
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(CODE "
  set(prefix \"\${CMAKE_INSTALL_PREFIX}\")
  if(prefix STREQUAL \"/usr\")
    set(etc \"/etc\")
  else()
    set(etc \"\${prefix}/etc\")
  endif()
  set(STRIPESOLVE_INSTALL_BINDIR \"\${prefix}/${CMAKE_INSTALL_BINDIR}\")
  set(STRIPESOLVE_ETC \"\${etc}\")
  foreach(kind system user)
    configure_file(\"${PROJECT_SOURCE_DIR}/packaging/systemd/\${kind}/stripesolved.service.in\"
                   \"${PROJECT_BINARY_DIR}/packaging/\${kind}/stripesolved.service\" @ONLY)
    file(INSTALL \"${PROJECT_BINARY_DIR}/packaging/\${kind}/stripesolved.service\"
         DESTINATION \"\${prefix}/${CMAKE_INSTALL_LIBDIR}/systemd/\${kind}\")
  endforeach()
  file(INSTALL \"${PROJECT_SOURCE_DIR}/daemon/stripesolved.example.yaml\"
       DESTINATION \"\${etc}/stripesolve\" RENAME stripesolved.yaml)
  file(INSTALL \"${PROJECT_SOURCE_DIR}/packaging/logrotate/stripesolved\"
       DESTINATION \"\${etc}/logrotate.d\")
")

set(CPACK_PACKAGE_NAME stripesolve)
set(CPACK_PACKAGE_VENDOR stripesolve)
set(CPACK_PACKAGE_CONTACT "stripesolve maintainers <maintainers@stripesolve.invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_SET_DESTDIR ON)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
# The shared libraries the binaries load (Debian 12 names); the CUDA runtime of a CUDA build
# comes from the CUDA toolkit, outside Debian's packages, so it is not listed.
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "libstdc++6, libspdlog1.10, libfmt9, libyaml-cpp0.7, libopenblas0 | libblas3, liblapacke, libtmglib3, liburing2, libsqlite3-0")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/packaging/debian/postinst
                                      ${PROJECT_SOURCE_DIR}/packaging/debian/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
include(CPack)
