# Precompiled headers: parsing the standard library, GoogleTest and eddy's own headers was a
# quarter to a third of every file's compile time (tests/nn/test_nn.cpp: 4.8 s, 3.3 s with a
# precompiled header; solvers/pinn/problem.cpp 13.4 s, 12.0 s), and a cold `make test` compiles
# about 400 files (docs/building.md).
#
# Each group of targets shares one header, compiled once by the group's first target and reused
# by the rest (REUSE_FROM), since compiling it costs 5-6 s, more than one file gains. Reuse needs
# the same compile flags, which each group has: the libraries and the command compile at the build
# type's flags, the tests at -Og (tests/CMakeLists.txt). Where the flags differ anyway, GCC ignores
# the header (-Winvalid-pch says so) and parses the sources as before.
#
# The libraries' header holds only the standard library: one that brought in eddy's own headers
# would let a layer use a layer above it without the #include that cmake/LayerChecks.cmake reads.

set(EDDY_STD_PCH_HEADERS
    <algorithm> <array> <chrono> <cmath> <complex> <cstdint> <cstring> <filesystem> <functional>
    <map> <memory> <numeric> <optional> <set> <sstream> <string> <string_view> <unordered_map>
    <utility> <vector>)

# eddy_precompile_headers(TARGET GROUP HEADERS...): TARGET gets the group's precompiled header,
# compiled from HEADERS by the first target of GROUP and reused by the later ones.
function(eddy_precompile_headers target group)
  get_property(donor GLOBAL PROPERTY eddy_pch_donor_${group})
  if(donor)
    target_precompile_headers(${target} REUSE_FROM ${donor})
  else()
    target_precompile_headers(${target} PRIVATE ${ARGN})
    set_property(GLOBAL PROPERTY eddy_pch_donor_${group} ${target})
  endif()
endfunction()
