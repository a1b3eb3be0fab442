// Public functions with const-qualified parameters, which a Go export
// cannot declare, or with opaque handles Go keeps as integers: these
// definitions match the header and forward to the Go exports of the same
// name in lower case.
#include "xccl.h"
#include "_cgo_export.h"

C_Status XcclAllToAll(const void** send_buf, const size_t* send_count, const C_DataType* send_dtype,
                      void** recv_buf, const size_t* recv_count, const C_DataType* recv_dtype, size_t rank,
                      size_t nranks, C_CCLComm comm, C_Stream stream) {
  return xcclAllToAll((void**)send_buf, (size_t*)send_count, (C_DataType*)send_dtype, recv_buf,
                      (size_t*)recv_count, (C_DataType*)recv_dtype, rank, nranks, comm, stream);
}

C_Status XcclGetCapabilities(const char* device, char* buf, size_t len) {
  return xcclGetCapabilities((char*)device, buf, len);
}

C_Status XcclGetAlgorithms(const char* device, char* buf, size_t len) {
  return xcclGetAlgorithms((char*)device, buf, len);
}

C_Status XcclCommInitRankConfig(size_t nranks, C_CCLRootId* id, size_t rank, const XcclConfig* config,
                                C_CCLComm* comm) {
  return xcclCommInitRankConfig(nranks, id, rank, (XcclConfig*)config, comm);
}

C_Status XcclCommSplit(C_CCLComm comm, int color, int key, C_CCLComm* newcomm, const XcclConfig* config) {
  return xcclCommSplit(comm, color, key, newcomm, (XcclConfig*)config);
}

C_Status XcclCommInitAll(C_CCLComm* comms, int ndev, const int* devlist) {
  return xcclCommInitAll(comms, ndev, (int*)devlist);
}

C_Status XcclCommRegister(C_CCLComm comm, void* buff, size_t size, void** handle) {
  uintptr_t h = 0;
  C_Status st = xcclCommRegister(comm, buff, size, handle != NULL ? &h : NULL);
  if (st == C_SUCCESS) *handle = (void*)h;
  return st;
}

C_Status XcclCommDeregister(C_CCLComm comm, void* handle) { return xcclCommDeregister(comm, (uintptr_t)handle); }
