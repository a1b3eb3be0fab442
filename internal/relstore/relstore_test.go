package relstore

import (
	"sync/atomic"
	"testing"
)

// A reader that sees the flag sees the message written before it: the
// writer fills the message with i, publishes i, and waits for the reader's
// acknowledgement before the next round.
func TestStorePublishes(t *testing.T) {
	const rounds = 20000
	var msg [8]uint64
	var flag, ack uint64
	bad := make(chan uint64, 1)
	go func() {
		for i := uint64(1); i <= rounds; i++ {
			for atomic.LoadUint64(&flag) != i {
			}
			for k := range msg {
				if v := atomic.LoadUint64(&msg[k]); v != i {
					bad <- v
					return
				}
			}
			atomic.StoreUint64(&ack, i)
		}
		bad <- 0
	}()
	for i := uint64(1); i <= rounds; i++ {
		for k := range msg {
			atomic.StoreUint64(&msg[k], i)
		}
		Store(&flag, i)
		for atomic.LoadUint64(&ack) != i {
			select {
			case v := <-bad:
				t.Fatalf("round %d: the reader saw the flag before the message (%d)", i, v)
			default:
			}
		}
	}
	if v := <-bad; v != 0 {
		t.Fatalf("the reader saw %d", v)
	}
	var x uint64
	Store(&x, 42)
	if x != 42 {
		t.Fatalf("Store wrote %d", x)
	}
}

// Prefetches are hints: they change nothing, on any address of a buffer.
func TestPrefetchesChangeNothing(t *testing.T) {
	buf := make([]uint64, 64)
	for i := range buf {
		buf[i] = uint64(i) * 3
	}
	for i := range buf {
		Prefetch(&buf[i])
		PrefetchW(&buf[i])
	}
	for i, v := range buf {
		if v != uint64(i)*3 {
			t.Fatalf("element %d is %d after the prefetches, want %d", i, v, i*3)
		}
	}
}
