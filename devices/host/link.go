package host

import "net"

// link is one channel to one peer through a transport that is not shared
// memory: it fills an inbound ring and drains an outbound ring, so the
// collectives see the same rings whatever carries the bytes (shm rings
// are the peers' segments themselves and need no link). tcp.go and ucx.go
// implement it.
type link interface {
	rings() (in, out *ring)
	error() error  // why the link failed (nil: fine)
	drained() bool // everything written has left (or the link failed)
	abort()        // break it now: the peer sees the connection go
	close()        // release it; the rank no longer touches its rings
	transport() string
}

func (l *tcpLink) rings() (in, out *ring) { return l.in, l.out }
func (l *tcpLink) transport() string      { return "tcp" }

// abort resets the connection (SO_LINGER 0: RST, not FIN), so the peer
// reads ECONNRESET and says this rank aborted or failed (peerError),
// where a FIN (EOF) is an orderly close: Destroy, or the process exiting.
func (l *tcpLink) abort() {
	l.closed.Store(true)
	if tc, ok := l.conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = l.conn.Close()
}

// linkKind is how ranks a and b are linked, computed alike on both sides
// (and on the root) from the peer table: a forced mode on either side
// wins (ucx before tcp), shared memory within a machine, and across
// machines "ucx?": UCX when both ranks load it, else TCP.
func linkKind(a, b peerInfo) string {
	mode := func(m string) string {
		if m == "" {
			return "auto"
		}
		return m
	}
	am, bm := mode(a.Mode), mode(b.Mode)
	switch {
	case am == "ucx" || bm == "ucx":
		return "ucx"
	case am == "tcp" || bm == "tcp":
		return "tcp"
	case a.Host == b.Host && a.Seg != "" && b.Seg != "":
		return "shm"
	case a.Host == b.Host || am == "shm" || bm == "shm":
		return "tcp" // connect refuses forced shm across machines
	}
	return "ucx?"
}

// ucxRound says whether any pair of the table may use UCX: then the ranks
// trade UCP worker addresses in one more bootstrap round.
func ucxRound(table []peerInfo) bool {
	for i := range table {
		for j := i + 1; j < len(table); j++ {
			if k := linkKind(table[i], table[j]); k == "ucx" || k == "ucx?" {
				return true
			}
		}
	}
	return false
}
