package host

import (
	"bytes"
	"net"
	"testing"
	"time"

	rt "github.com/xccl-project/xccl/runtime"
)

// FuzzParseUniqueID: any bytes either parse into an id that encodes back
// to the same bytes, or are refused with C_ERROR; nothing panics.
func FuzzParseUniqueID(f *testing.F) {
	r, err := StartRoot(time.Second)
	if err != nil {
		f.Fatal(err)
	}
	r.Close()
	good := r.ID.Bytes()
	f.Add(good)
	f.Add(good[:64])
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{0xff}, UniqueIDSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := ParseUniqueID(b)
		if err != nil {
			if rt.StatusOf(err) != rt.StatusError {
				t.Fatalf("refusal is not C_ERROR: %v", err)
			}
			return
		}
		if !bytes.Equal(u.Bytes(), b) {
			t.Fatalf("parsed id does not round-trip")
		}
	})
}

// FuzzRootHandshake: whatever a client sends, the root refuses it without
// crashing, and a real rank can still join afterwards.
func FuzzRootHandshake(f *testing.F) {
	f.Add([]byte("GET / HTTP/1.0\r\n\r\n"))
	f.Add([]byte{0, 0, 0, 2, '{', '}'})
	f.Add([]byte{0, 0, 0, 60, '{', '"', 'j', 'o', 'b', '"', ':', '1', ',', '"', 'r', 'a', 'n', 'k', '"', ':', '0', '}'})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, hello []byte) {
		r, err := StartRoot(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c, err := net.Dial("tcp", r.ID.Root.String())
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := readMsg(c); err != nil { // the challenge
			t.Fatal(err)
		}
		_, _ = c.Write(hello)
		c.Close()
		comms, errs := join(r.ID, 1, []int{0}, opts(5*time.Second))
		if errs[0] != nil {
			t.Fatalf("a real rank could not join after %q: %v", hello, errs[0])
		}
		destroyAll(comms)
	})
}
