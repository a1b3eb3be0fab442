//go:build amd64 || arm64

package relstore

// Store stores v at p with release order: every earlier load and store of
// this thread happens before a load of p that sees v.
//
//go:noescape
func Store(p *uint64, v uint64)
