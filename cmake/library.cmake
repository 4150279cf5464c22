# libdelayq as an application gets it: one static archive, libdelayq.a, made
# of the object files of the layers in DELAYQ_LIBRARY_LAYERS (set by the
# top-level CMakeLists.txt before it includes this file), with the public
# headers (include/delayq/, and the generated version.h) as its only include
# root. In the tree it is `delayq::delayq` (an ALIAS of the target libdelayq),
# installed it is `delayq::delayq` from find_package(delayq CONFIG) or
# `pkg-config delayq`: the examples build the same way a user's program does.
#
# Why one static archive and not a shared library: the layers are static
# libraries already (no PIC, no symbol visibility to manage), an application
# links one file and the third-party libraries named below, and nothing of a
# layer's internals becomes an ABI to keep.
#
# The third-party libraries are not a second list: they are read from the
# layers' own target_link_libraries (PUBLIC and PRIVATE), so a layer that
# starts to use a library brings it into the package by itself. How an
# installed package finds each one (find_dependency in delayqConfig.cmake,
# a module in delayq.pc's Requires) is derived from its CMake name below; a
# name this file cannot place stops the configure with a message saying so.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
find_package(PkgConfig REQUIRED)

set(objects "")
set(third_party "")
foreach(layer IN LISTS DELAYQ_LIBRARY_LAYERS)
  if(NOT TARGET delayq_${layer})
    message(FATAL_ERROR "DELAYQ_LIBRARY_LAYERS names ${layer}, but there is no delayq_${layer} "
                        "(add_subdirectory(src/${layer}) must come before cmake/library.cmake)")
  endif()
  list(APPEND objects $<TARGET_OBJECTS:delayq_${layer}>)
  get_target_property(links delayq_${layer} INTERFACE_LINK_LIBRARIES)
  if(NOT links)
    continue()
  endif()
  foreach(link IN LISTS links)
    # A static library's PRIVATE links appear here as $<LINK_ONLY:x>.
    string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" link "${link}")
    if(link MATCHES "^delayq_(.*)$")
      if(NOT CMAKE_MATCH_1 IN_LIST DELAYQ_LIBRARY_LAYERS)
        message(FATAL_ERROR "delayq_${layer} links ${link}, which is not in "
                            "DELAYQ_LIBRARY_LAYERS: libdelayq.a would miss its objects")
      endif()
    else()
      list(APPEND third_party ${link})
    endif()
  endforeach()
endforeach()
list(REMOVE_DUPLICATES third_party)

add_library(libdelayq STATIC ${objects})
add_library(delayq::delayq ALIAS libdelayq)
set_target_properties(libdelayq PROPERTIES OUTPUT_NAME delayq EXPORT_NAME delayq
                                           LINKER_LANGUAGE CXX)
target_compile_features(libdelayq INTERFACE cxx_std_20)  # the public headers need C++20
target_include_directories(libdelayq INTERFACE
                           $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                           $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>  # version.h
                           $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)

# What delayqConfig.cmake runs to define the imported targets named in
# libdelayq's link interface, and what delayq.pc requires, one entry per
# third-party target.
set(find_code "")
set(pc_requires "")
set(pc_libs "")
set(cmake_packages "")
foreach(dep IN LISTS third_party)
  if(dep STREQUAL "Threads::Threads")
    list(APPEND cmake_packages Threads)
    string(APPEND pc_libs " -pthread")
  elseif(dep MATCHES "^PkgConfig::(.+)$")
    set(pc_prefix ${CMAKE_MATCH_1})
    set(module "${${pc_prefix}_MODULE_NAME}")
    if(NOT module)
      message(FATAL_ERROR "${dep}: no ${pc_prefix}_MODULE_NAME (pkg_check_modules with one "
                          "module sets it)")
    endif()
    list(APPEND cmake_packages PkgConfig)
    # pkg_check_modules' targets are seen only in the folder that made them:
    # make this one here too (from the cache: no second pkg-config run).
    if(NOT TARGET ${dep})
      pkg_check_modules(${pc_prefix} REQUIRED QUIET IMPORTED_TARGET ${module})
    endif()
    string(APPEND find_code "if(NOT TARGET ${dep})\n"
           "  pkg_check_modules(${pc_prefix} REQUIRED QUIET IMPORTED_TARGET ${module})\n"
           "endif()\n")
    list(APPEND pc_requires ${module})
  elseif(dep MATCHES "^absl::(.+)$")
    list(APPEND cmake_packages absl)
    list(APPEND pc_requires absl_${CMAKE_MATCH_1})
  elseif(dep MATCHES "^(simdjson|fmt|spdlog)::")
    list(APPEND cmake_packages ${CMAKE_MATCH_1})
    list(APPEND pc_requires ${CMAKE_MATCH_1})
    # Imported targets are seen only in the folder that found them.
    if(NOT TARGET ${dep})
      find_package(${CMAKE_MATCH_1} REQUIRED)
    endif()
  elseif(dep STREQUAL "OpenSSL::Crypto" OR dep STREQUAL "OpenSSL::SSL")
    # libcrypto (HMAC of webhook signatures), libssl (TLS: src/net/tls.h)
    list(APPEND cmake_packages OpenSSL)
    if(dep STREQUAL "OpenSSL::SSL")
      list(APPEND pc_requires libssl)
    else()
      list(APPEND pc_requires libcrypto)
    endif()
    if(NOT TARGET ${dep})
      find_package(OpenSSL REQUIRED)
    endif()
  else()
    message(FATAL_ERROR "libdelayq links ${dep}: say in cmake/library.cmake how an installed "
                        "package finds it (CMake package, pkg-config module)")
  endif()
endforeach()
list(REMOVE_DUPLICATES cmake_packages)
list(REMOVE_DUPLICATES pc_requires)
set(find_dependencies "")
foreach(package IN LISTS cmake_packages)
  string(APPEND find_dependencies "find_dependency(${package})\n")
endforeach()
string(PREPEND find_code "${find_dependencies}")
string(REPLACE ";" ", " pc_requires "${pc_requires}")
# PRIVATE: an application links them but does not see their headers (no
# public header includes one).
target_link_libraries(libdelayq PRIVATE ${third_party})

# The objects of a sanitized build (-DDELAYQ_SANITIZE=ON) call the
# sanitizers' runtimes: whoever links them links those too.
if(DELAYQ_SANITIZE)
  target_link_options(libdelayq INTERFACE -fsanitize=address,undefined)
  string(APPEND pc_libs " -fsanitize=address,undefined")
endif()

# `cmake --install build --prefix P`: P/include/delayq/*.h (every public
# header: a new one is installed without a list to keep), P/lib/libdelayq.a,
# P/lib/cmake/delayq/ (the CMake package), P/lib/pkgconfig/delayq.pc.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/delayq DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/include/delayq/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/delayq)
install(TARGETS libdelayq EXPORT delayqTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
set(package_dir ${CMAKE_INSTALL_LIBDIR}/cmake/delayq)
install(EXPORT delayqTargets NAMESPACE delayq:: DESTINATION ${package_dir})
set(DELAYQ_FIND_DEPENDENCIES "${find_code}")
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/delayqConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/package/delayqConfig.cmake
                              INSTALL_DESTINATION ${package_dir})
# SameMajorVersion: 0.1.0 satisfies find_package(delayq 0.1), not (delayq 1).
write_basic_package_version_file(${PROJECT_BINARY_DIR}/package/delayqConfigVersion.cmake
                                 COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/package/delayqConfig.cmake
              ${PROJECT_BINARY_DIR}/package/delayqConfigVersion.cmake
        DESTINATION ${package_dir})
# delayq.pc finds the prefix from where it lies (${pcfiledir}), so that
# --prefix at install time moves it with the rest.
file(RELATIVE_PATH DELAYQ_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" DELAYQ_PC_TO_PREFIX "${DELAYQ_PC_TO_PREFIX}")
set(DELAYQ_PC_REQUIRES "${pc_requires}")
set(DELAYQ_PC_LIBS "${pc_libs}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/delayq.pc.in ${PROJECT_BINARY_DIR}/package/delayq.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/package/delayq.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
