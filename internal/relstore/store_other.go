//go:build !amd64 && !arm64

package relstore

import "sync/atomic"

// Store stores v at p with release order (sequentially consistent here,
// which is stronger).
func Store(p *uint64, v uint64) { atomic.StoreUint64(p, v) }

// PrefetchW is a hint; here it does nothing.
func PrefetchW(p *uint64) {}

// Prefetch is a hint; here it does nothing.
func Prefetch(p *uint64) {}
