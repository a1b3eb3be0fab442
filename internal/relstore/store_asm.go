//go:build amd64 || arm64

package relstore

// Store stores v at p with release order: every earlier load and store of
// this thread happens before a load of p that sees v.
//
//go:noescape
func Store(p *uint64, v uint64)

// PrefetchW asks for p's cache line for writing and goes on at once: a store
// to it later finds the line owned instead of waiting for its reader.
//
//go:noescape
func PrefetchW(p *uint64)

// Prefetch asks for p's cache line for reading and goes on at once.
//
//go:noescape
func Prefetch(p *uint64)
