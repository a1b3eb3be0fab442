/* Communicator handles: the integers C holds (glue.go's commTable), the
 * first XCCL_COMM_SLOTS of them found in arrays, by glue.go and by the C
 * entries (fast.c). */
#ifndef XCCL_ABI_HANDLES_H
#define XCCL_ABI_HANDLES_H
enum { XCCL_COMM_BASE = 0x5cc10000, XCCL_COMM_SLOTS = 4096 };
#endif
