// Package relstore has a store-release for shared-memory flags: the
// writer of a message fills it, then publishes its sequence number with
// Store, and a reader that sees the number (atomic load) sees the message.
//
// atomic.Uint64.Store is sequentially consistent: on x86 an XCHG, which
// waits until this core owns the cache line. When a peer is polling that
// line (the point of a flag) the wait is a whole cross-core round trip, as
// long as the message's own flight. A release store needs no fence on x86
// (a plain MOV: stores stay in program order) and STLR on arm64, so the
// writer goes on at once.
//
// Prefetch and PrefetchW ask for a line (for reading, for writing) and go
// on at once: a writer that knows which line it writes next can have it
// owned before the store (PREFETCHW, PRFM PSTL1KEEP).
package relstore
