# libcoring: the objects of every layer (core, net, db, http, and apps with
# the embed encoder) as one library, static (libcoring.a) and shared
# (libcoring.so.0), and what `cmake --install` puts where: the public headers,
# both libraries, coring.pc, the CMake package (find_package(coring) ->
# coring::coring, coring::coring_static), the coring binary, its man page,
# and the systemd unit and environment file of deploy/. docs/library.md is
# the user's side of it. Included by the top CMakeLists.txt after the layers.

# The ABI's number: the SONAME is libcoring.so.${CORING_SOVERSION}. 0.x may
# break the ABI in any minor release; when one does, this goes up by one
# (docs/library.md, "Versions").
set(CORING_SOVERSION 0)

set(CORING_OBJECTS "")
foreach(layer coring_core coring_net coring_db coring_http coring_embed coring_apps)
  list(APPEND CORING_OBJECTS $<TARGET_OBJECTS:${layer}>)
endforeach()

# The public headers: each layer's include/coring/LAYER/*.h, and the two
# generated into the build folder (version.h, stock.h). The embed encoder's
# (apps/embed/include) are not among them: it is part of the embed app.
set(CORING_PUBLIC_INCLUDE_DIRS
    ${PROJECT_SOURCE_DIR}/core/include ${PROJECT_BINARY_DIR}/core/include
    ${PROJECT_SOURCE_DIR}/net/include ${PROJECT_SOURCE_DIR}/db/include
    ${PROJECT_SOURCE_DIR}/http/include ${PROJECT_SOURCE_DIR}/apps/include
    ${PROJECT_BINARY_DIR}/apps/include)
file(GLOB CORING_PUBLIC_HEADERS CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/core/include/coring/core/*.h ${PROJECT_SOURCE_DIR}/net/include/coring/net/*.h
     ${PROJECT_SOURCE_DIR}/db/include/coring/db/*.h ${PROJECT_SOURCE_DIR}/http/include/coring/http/*.h
     ${PROJECT_SOURCE_DIR}/apps/include/coring/apps/*.h)
list(APPEND CORING_PUBLIC_HEADERS ${PROJECT_BINARY_DIR}/core/include/coring/core/version.h
     ${PROJECT_BINARY_DIR}/apps/include/coring/apps/stock.h)

# What the library needs at link time: the shared one records them
# (NEEDED), the static one hands them to its users' link. In an install, the
# plain names (the same as coring.pc's Libs.private).
set(CORING_LINK_BUILD PkgConfig::URING PkgConfig::SIMDJSON double-conversion::double-conversion
    PkgConfig::LIBPQ PkgConfig::CURL PkgConfig::OPENBLAS PkgConfig::UTF8PROC PkgConfig::SYSTEMD
    PkgConfig::ZSTD PkgConfig::BROTLIENC PkgConfig::LIBDEFLATE Threads::Threads m)
set(CORING_LINK_INSTALL uring simdjson double-conversion pq curl openblas utf8proc systemd zstd
    brotlienc deflate -pthread m)
list(APPEND CORING_LINK_BUILD stdc++)   # the simdjson wrapper and the float digits are C++
list(APPEND CORING_LINK_INSTALL stdc++)
set(CORING_PC_LIBS_PRIVATE "")
foreach(lib IN LISTS CORING_LINK_INSTALL)
  if(NOT lib MATCHES "^-")
    set(lib -l${lib})
  endif()
  string(APPEND CORING_PC_LIBS_PRIVATE " ${lib}")
endforeach()
string(STRIP "${CORING_PC_LIBS_PRIVATE}" CORING_PC_LIBS_PRIVATE)

# libcoring.a: what the coring binary links (cmake/library.cmake's users
# statically: coring::coring_static). Same objects as the shared library.
add_library(coring_static STATIC ${CORING_OBJECTS})
set_target_properties(coring_static PROPERTIES OUTPUT_NAME coring EXPORT_NAME coring_static
                                               LINKER_LANGUAGE CXX)
# The shared library: the public API only. The version script lists every
# function and variable the public headers declare (cmake/public_symbols.py)
# and hides the rest: the layers' internals, the C++ wrapper, simdjson's
# and double-conversion's inline code. tests/install/symbols.sh checks it.
set(CORING_VERSION_SCRIPT ${PROJECT_BINARY_DIR}/libcoring.map)
add_custom_command(OUTPUT ${CORING_VERSION_SCRIPT}
  COMMAND Python3::Interpreter ${PROJECT_SOURCE_DIR}/cmake/public_symbols.py map
          ${CORING_VERSION_SCRIPT} CORING_${CORING_SOVERSION} ${CORING_PUBLIC_HEADERS}
  DEPENDS ${PROJECT_SOURCE_DIR}/cmake/public_symbols.py ${CORING_PUBLIC_HEADERS}
  COMMENT "The symbols of libcoring.so, from the public headers" VERBATIM)
add_custom_target(coring_version_script DEPENDS ${CORING_VERSION_SCRIPT})
add_library(coring_shared SHARED ${CORING_OBJECTS})
set_target_properties(coring_shared PROPERTIES OUTPUT_NAME coring EXPORT_NAME coring
                      VERSION ${PROJECT_VERSION} SOVERSION ${CORING_SOVERSION} LINKER_LANGUAGE CXX
                      LINK_DEPENDS ${CORING_VERSION_SCRIPT})
add_dependencies(coring_shared coring_version_script)
target_link_options(coring_shared PRIVATE -Wl,--version-script=${CORING_VERSION_SCRIPT}
                    -Wl,--as-needed)
if(NOT CORING_SANITIZE AND NOT CORING_TSAN)
  # Every symbol the library uses is defined in it or in what it links
  # (a sanitizer's runtime comes with the executable instead).
  target_link_options(coring_shared PRIVATE -Wl,-z,defs)
endif()
target_link_libraries(coring_shared PRIVATE ${CORING_LINK_BUILD})

foreach(lib coring_static coring_shared)
  foreach(dir IN LISTS CORING_PUBLIC_INCLUDE_DIRS)
    target_include_directories(${lib} INTERFACE $<BUILD_INTERFACE:${dir}>)
  endforeach()
  target_include_directories(${lib} INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
endforeach()
foreach(dep IN LISTS CORING_LINK_BUILD)
  target_link_libraries(coring_static INTERFACE $<BUILD_INTERFACE:${dep}>)
endforeach()
foreach(dep IN LISTS CORING_LINK_INSTALL)
  target_link_libraries(coring_static INTERFACE $<INSTALL_INTERFACE:${dep}>)
endforeach()
add_library(coring::coring ALIAS coring_shared)
add_library(coring::coring_static ALIAS coring_static)

# --- install -------------------------------------------------------------
include(CMakePackageConfigHelpers)
set(CORING_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/coring)

install(TARGETS coring_shared EXPORT coring-targets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime
                NAMELINK_COMPONENT development)
install(TARGETS coring_static EXPORT coring-targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development)
install(DIRECTORY core/include/ net/include/ db/include/ http/include/ apps/include/
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT development
        FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/core/include/coring/core/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/coring/core COMPONENT development)
install(FILES ${PROJECT_BINARY_DIR}/apps/include/coring/apps/stock.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/coring/apps COMPONENT development)
install(EXPORT coring-targets NAMESPACE coring:: FILE coringTargets.cmake
        DESTINATION ${CORING_CMAKE_DIR} COMPONENT development)
configure_package_config_file(cmake/coringConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/cmake/coringConfig.cmake
                              INSTALL_DESTINATION ${CORING_CMAKE_DIR})
# 0.x: a minor release may break the API (docs/library.md), so a package of
# another minor version does not satisfy find_package(coring 0.1).
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/coringConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/coringConfig.cmake
              ${PROJECT_BINARY_DIR}/cmake/coringConfigVersion.cmake
        DESTINATION ${CORING_CMAKE_DIR} COMPONENT development)

# coring.pc, relocatable: its prefix is found from where it lies
# (${pcfiledir}), unless the install folders are absolute (Nix's outputs).
set(pc_dir ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(CORING_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(CORING_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  file(RELATIVE_PATH up /${pc_dir} /)
  string(REGEX REPLACE "/$" "" up "${up}")
  set(CORING_PC_PREFIX "\${pcfiledir}/${up}")
  set(CORING_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(CORING_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(CORING_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(cmake/coring.pc.in ${PROJECT_BINARY_DIR}/coring.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/coring.pc DESTINATION ${pc_dir} COMPONENT development)

# The server: the binary, its man page, the unit and environment file.
install(TARGETS coring RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT server)

# coring(1), written at build time by coring-manpage (apps/manpage.c) from
# the option rows and the apps' definitions, as --help is: it cannot drift
# from the binary.
add_executable(coring-manpage apps/manpage.c)
target_link_libraries(coring-manpage PRIVATE coring::coring_static)
add_custom_command(OUTPUT ${PROJECT_BINARY_DIR}/coring.1
  COMMAND coring-manpage > ${PROJECT_BINARY_DIR}/coring.1
  DEPENDS coring-manpage
  COMMENT "The man page coring(1), from the option rows" VERBATIM)
add_custom_target(coring_manpage ALL DEPENDS ${PROJECT_BINARY_DIR}/coring.1)
install(FILES ${PROJECT_BINARY_DIR}/coring.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1
        COMPONENT server)

# deploy/'s systemd units (every *.service and *.socket there) into
# CORING_SYSTEMD_UNIT_DIR, their paths to the binary and the environment
# file made those of this install (written at install time: --prefix may
# change them), with Documentation=man:coring(1) if they have none; and
# deploy/coring.env as SYSCONFDIR/coring/coring.env, mode 0600 (it may hold
# DATABASE_URL's password).
set(CORING_SYSTEMD_UNIT_DIR lib/systemd/system CACHE STRING
    "Where the systemd units go: relative to the prefix, or absolute (Debian: /lib/systemd/system)")
file(GLOB CORING_UNITS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/deploy/*.service
     ${PROJECT_SOURCE_DIR}/deploy/*.socket)
install(CODE "
  set(prefix \"\${CMAKE_INSTALL_PREFIX}\")
  set(bindir \"${CMAKE_INSTALL_BINDIR}\")
  if(NOT IS_ABSOLUTE \"\${bindir}\")
    set(bindir \"\${prefix}/\${bindir}\")
  endif()
  set(etc \"${CMAKE_INSTALL_SYSCONFDIR}\")
  if(NOT IS_ABSOLUTE \"\${etc}\")
    if(prefix STREQUAL \"/usr\")
      set(etc /etc)
    else()
      set(etc \"\${prefix}/\${etc}\")
    endif()
  endif()
  set(units \"${CORING_SYSTEMD_UNIT_DIR}\")
  if(NOT IS_ABSOLUTE \"\${units}\")
    set(units \"\${prefix}/\${units}\")
  endif()
  foreach(unit ${CORING_UNITS})
    get_filename_component(name \"\${unit}\" NAME)
    file(READ \"\${unit}\" text)
    string(REPLACE /usr/local/bin/coring \"\${bindir}/coring\" text \"\${text}\")
    string(REPLACE /etc/coring/coring.env \"\${etc}/coring/coring.env\" text \"\${text}\")
    if(NOT text MATCHES \"\nDocumentation=\")
      string(REGEX REPLACE \"(\nDescription=[^\n]*)\" \"\\\\1\nDocumentation=man:coring(1)\" text \"\${text}\")
    endif()
    file(WRITE \"${PROJECT_BINARY_DIR}/units/\${name}\" \"\${text}\")
    file(INSTALL \"${PROJECT_BINARY_DIR}/units/\${name}\" DESTINATION \"\${units}\")
  endforeach()
  file(INSTALL \"${PROJECT_SOURCE_DIR}/deploy/coring.env\" DESTINATION \"\${etc}/coring\"
       FILE_PERMISSIONS OWNER_READ OWNER_WRITE)
" COMPONENT server)
