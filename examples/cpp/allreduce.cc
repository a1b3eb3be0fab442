// allreduce.cc: xccl from C++, built against an installed copy:
//
//   make install PREFIX=$HOME/.local
//   c++ -std=c++11 allreduce.cc $(pkg-config --cflags --libs xccl) -o allreduce_cpp
//   xcclrun -n 2 ./allreduce_cpp
#include <xccl.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

void check(C_Status st, const char* what) {
  if (st != C_SUCCESS) throw std::runtime_error(std::string(what) + ": " + XcclGetLastError());
}

int env(const char* name, int def) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : def;
}

// The rank's communicator, from xcclrun's environment (or alone as rank 0 of 1).
C_CCLComm join(int rank, int nranks) {
  size_t size = 0;
  check(XcclGetUniqueIdSize(&size), "XcclGetUniqueIdSize");
  std::vector<unsigned char> bytes(size);
  C_CCLRootId id;
  id.sz = size;
  id.data = bytes.data();
  const char* hex = std::getenv("XCCL_UNIQUE_ID");
  if (hex) {
    std::string h(hex);
    if (h.size() != 2 * size) throw std::runtime_error("XCCL_UNIQUE_ID has the wrong length");
    for (size_t i = 0; i < size; i++) bytes[i] = static_cast<unsigned char>(std::stoi(h.substr(2 * i, 2), nullptr, 16));
  } else {
    check(XcclGetUniqueId(&id), "XcclGetUniqueId");
  }
  C_CCLComm comm = nullptr;
  check(XcclCommInitRank(static_cast<size_t>(nranks), &id, static_cast<size_t>(rank), &comm), "XcclCommInitRank");
  return comm;
}

}  // namespace

int main() {
  try {
    int rank = env("XCCL_RANK", 0), nranks = env("XCCL_NRANKS", 1);
    C_CCLComm comm = join(rank, nranks);
    std::vector<double> v(1001, rank + 1.0);
    check(XcclAllReduce(v.data(), v.data(), v.size(), FLOAT64, SUM, comm, nullptr), "XcclAllReduce");
    double want = nranks * (nranks + 1) / 2.0;
    for (double x : v)
      if (x != want) throw std::runtime_error("wrong result");
    check(XcclDestroyComm(comm), "XcclDestroyComm");
    std::printf("rank %d of %d: C++ all-reduce correct\n", rank, nranks);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
