package host

import (
	"bytes"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Two messages for one peer in one transfer list (a fingerprint and the
// data behind it) reach it whole and in order although the ring is far
// smaller than the first and the peer reads while this rank writes: the
// second starts only once the first is whole, even when the peer made
// room for it in the middle of a pass (found across machines: a full ring
// at the end of a reduce-scatter, then an all-reduce's fingerprint and
// data, and the peer read data where a fingerprint belongs).
func TestMessagesOnOneRingKeepTheirOrder(t *testing.T) {
	for _, dir := range []string{"send", "receive"} {
		t.Run(dir, func(t *testing.T) {
			var hw [2]atomic.Uint64
			r := newRing(&hw[0], &hw[1], make([]byte, 64), newPrivateBell(), newPrivateBell())
			c := &Comm{}
			if dir == "send" {
				c.out[chColl] = []*ring{nil, r}
			} else {
				c.in[chColl] = []*ring{nil, r}
			}
			const rounds = 3000
			first, second := make([]byte, 200), make([]byte, 24)
			for i := range first {
				first[i] = byte(i)
			}
			for i := range second {
				second[i] = byte(0xf0 + i)
			}
			// The peer: reads (or writes) both messages of every round, as
			// fast as it can, on another goroutine.
			deadline := time.Now().Add(10 * time.Second)
			errc := make(chan error, 1)
			go func() {
				for k := 0; k < rounds; k++ {
					for _, want := range [][]byte{first, second} {
						if dir == "send" {
							x := recvFrom(1, make([]byte, len(want)))
							for !x.finished() && time.Now().Before(deadline) {
								x.done += r.pull(&x)
							}
							if !bytes.Equal(x.buf, want) {
								errc <- fmt.Errorf("round %d: got % x, want % x", k, x.buf, want)
								return
							}
						} else {
							for done := 0; done < padded(len(want)) && time.Now().Before(deadline); {
								done += r.push(want, done)
							}
						}
					}
				}
				errc <- nil
			}()
			for k := 0; k < rounds; k++ {
				var xs []xfer
				if dir == "send" {
					xs = []xfer{sendTo(1, first), sendTo(1, second)}
				} else {
					xs = []xfer{recvFrom(1, make([]byte, len(first))), recvFrom(1, make([]byte, len(second)))}
				}
				for done := false; !done; {
					done, _ = c.pass(xs)
					if !done && time.Now().After(deadline) {
						select {
						case err := <-errc:
							require.NoError(t, err)
						default:
						}
						t.Fatalf("round %d: stuck, the stream lost its step", k)
					}
				}
				if dir == "receive" {
					require.Equal(t, first, xs[0].buf, "round %d", k)
					require.Equal(t, second, xs[1].buf, "round %d", k)
				}
			}
			require.NoError(t, <-errc)
		})
	}
}
