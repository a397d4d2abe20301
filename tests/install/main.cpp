// SPDX-License-Identifier: MIT
// Outside consumer of an installed ibverbs-cpp: compiles against the installed headers, links
// the installed library and prints its version.
#include <iostream>

#include <ibv/ibv.hpp>

int main() {
  const auto version = ibv::version();
  std::cout << "ibverbs-cpp " << version << '\n';
  return version.empty() ? 1 : 0;
}
