// The C fast path of the host device (fast.c, fastpath.go): a small
// all-reduce, all-gather or reduce-scatter called from C on the NULL stream
// of an idle host communicator runs here, without entering Go, through the
// same fast boxes and with the same messages as the Go quick path
// (quick.go), so ranks may take either for the same call.
//
// One xccl_fast per communicator, in C memory, shared by C and Go. Its lock
// word says who may touch the communicator's collective state: a C caller
// (XCCL_FAST_C) or a Go collective (XCCL_FAST_GO, taken after collMu). Only
// its holder changes it, so that letting go is a plain store-release (a
// locked instruction waits for the stores before it: the slots just
// written, lines the peers hold); off, set from any thread, lives apart.
// While neither holds it, this struct is the state's true copy (the
// sequence number, each peer's box counts); Go copies it in when it takes
// the lock and back when it lets go (fastLock, fastUnlock). The fingerprints
// sent (sent) live here only: Go reads them in place.
#ifndef XCCL_HOST_FAST_H
#define XCCL_HOST_FAST_H

#include <stddef.h>
#include <stdint.h>

#define XCCL_FAST_DEPTH 64 // fastDepth
#define XCCL_FAST_FP 32    // rt.FingerprintSize
#define XCCL_FUSED_ROOT 1  // fusedRoot: a fused all-reduce's fingerprint

enum {
  XCCL_FAST_C = 1,    // a C caller holds the lock
  XCCL_FAST_GO = 2,   // a Go collective holds it
  XCCL_FAST_LATE = 4, // free, but a late mismatch waits to be returned: Go's to report
};

// xccl_fast_run's answers.
enum {
  XCCL_FAST_DONE = 0,   // the call ran and succeeded
  XCCL_FAST_NOT = 1,    // not taken, nothing done: run the call in Go
  XCCL_FAST_RESUME = 2, // sent, a peer is not there yet: Go resumes it (xcclFastResume), the lock held
};

// One peer's side of the fast boxes (peerBox).
typedef struct {
  uint64_t got, seen, told; // peerBox's counts
  char* out;                // this rank's slot 0 in the peer's segment (slot k at out + k*slot)
  char* in;                 // the peer's slot 0 in this rank's segment
  uint64_t* done_out;       // the peer's count of this rank's collectives it is done with
  uint64_t* done_in;        // this rank's count of the peer's
  uint32_t* bell_seq;       // the peer's bell
  uint32_t* bell_waiters;
} xccl_fast_peer;

typedef struct {
  uint64_t word; // the lock, XCCL_FAST_*
  uint32_t off;  // nonzero: never again (destroyed, broken, streams or statistics used)
  int32_t rank, n;
  int32_t spin;    // polls of a peer's slot before Go takes over (collect's between yields)
  uint64_t seq;    // collSeq
  uint64_t slot;   // bytes per slot
  uint64_t cap;    // data bytes a slot carries (fastCap)
  uint64_t reduce_max; // an all-reduce's bytes stay below (sharedReduceMin)
  uint64_t others_max; // an all-gather's or reduce-scatter's, all blocks (sharedOthersMin)
  uint64_t fused_max;  // a fused batch from this many bytes may copy once (fusedMayShare: sharedReduceMin), else never
  uint64_t fused_probe[65]; // fusedMemo for such batches, by size class: 0 try (fusedShared, Go's), else from which collective
  uint64_t calls_ar, calls; // direct all-reduces and other direct collectives run here (statistics)
  uint64_t calls_fused, bufs_fused; // fused all-reduces run here, and their buffers
  uint32_t logged;          // Go logged the direct all-reduce's choice (the first one goes there)
  uint8_t size[32];         // bytes of an element by C_DataType; 0: not here
  uint8_t red[32];          // reduce ops (bit per C_CCLReduceOp) the C kernels do by C_DataType
  uint8_t sent[XCCL_FAST_DEPTH][XCCL_FAST_FP]; // this rank's fingerprints, collective k in k % depth
  uint64_t lone[XCCL_FAST_DEPTH];               // collectives this rank waited for nobody in (Comm.lone)
  char* scratch;            // cap bytes, line-aligned: a fused batch gathered, an in-place call's own data
  xccl_fast_peer* peer;     // n entries (this rank's unused)
  uint64_t owner;           // the token of the communicator using it (Comm.fxOwner; 0: none)
  void* next;               // the free list's (xccl_fast_get, xccl_fast_put)
} xccl_fast;

// A communicator's state is never freed, as a C caller may still read one
// it found before the communicator went: it goes back to a free list, and
// the next communicator reuses it with another owner token, which a stale
// caller's does not match.
xccl_fast* xccl_fast_get(void);
void xccl_fast_put(xccl_fast* f);

// xccl_fast_run runs collective kind (rt.OpKind: 0 all-reduce, 1
// broadcast, 2 reduce, 3 all-gather, 4 reduce-scatter) on f if it can; see
// the answers above. A broadcast's buffer is recv (send the same).
int xccl_fast_run(xccl_fast* f, uint64_t owner, int kind, const void* send, void* recv, size_t count, int dtype, int op,
                  int root);

// xccl_fast_fused runs a fused all-reduce of nbufs buffers (fusedDirect:
// each rank's send buffers one after another in its slots, one
// fingerprint) if it can, with xccl_fast_run's answers. It takes batches
// of two buffers or more, none empty, that fit a slot together; from
// fused_max bytes, only while fused_probe says not to try single copy.
int xccl_fast_fused(xccl_fast* f, uint64_t owner, size_t nbufs, const void* const* sends, void* const* recvs,
                    const size_t* counts, int dtype, int op);

// xccl_fast_body is the fingerprint body (rt.Fingerprint.Body) of such a
// call: for tests against Go's.
void xccl_fast_body(int kind, int dtype, int op, int root, uint64_t count, uint64_t* w0, uint64_t* w1);

#endif
