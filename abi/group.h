/* A group of sends and receives recorded in C (fast.c): what XcclSend and
 * XcclRecv were called with, run by Go at the group's end (exports.go's
 * xcclGroupRecorded) or handed to Go's group for the thread when another
 * call comes into the group (glue.go's adopt). */
#ifndef XCCL_ABI_GROUP_H
#define XCCL_ABI_GROUP_H
#include <stddef.h>
#include "xccl.h"

typedef struct {
  void* buf;
  size_t count;
  size_t peer;
  C_CCLComm comm;
  C_DataType dt;
  int recv; /* 0: XcclSend, 1: XcclRecv */
} xccl_rec;

enum { XCCL_REC_MAX = 16 };

/* xccl_abi_take_recorded hands the calling thread's recorded group to Go:
 * its depth (0: none) and calls, which stay valid until the thread records
 * again; the thread's group is Go's from then on. */
xccl_rec* xccl_abi_take_recorded(int* depth, int* n);
/* xccl_abi_go_group tells C whether the calling thread has a group in Go. */
void xccl_abi_go_group(int open);
#endif
