package host

import (
	"sync"
	"time"

	rt "github.com/xccl-project/xccl/runtime"
)

// selfPipe carries a rank's sends to itself to its receives from itself:
// one byte stream, in order, as a ring between two ranks would. A send
// copies its bytes in and never waits; a receive waits (within the
// timeout) until enough bytes were sent, so a send on one stream or
// thread matches a receive posted on another.
type selfPipe struct {
	mu    sync.Mutex
	data  []byte
	off   int           // bytes of data already received
	ready chan struct{} // closed and replaced when bytes arrive
}

func (p *selfPipe) send(b []byte) {
	p.mu.Lock()
	if p.off > 0 && p.off >= len(p.data)/2 { // keep the buffer no larger than what waits
		p.data, p.off = p.data[:copy(p.data, p.data[p.off:])], 0
	}
	if len(p.data) == 0 && cap(p.data) > 1<<20 {
		p.data = nil // a large message went through: give its memory back
	}
	p.data = append(p.data, b...)
	if p.ready != nil {
		close(p.ready)
		p.ready = nil
	}
	p.mu.Unlock()
}

// take copies len(dst) bytes out, or returns a channel that is closed when
// more bytes arrive.
func (p *selfPipe) take(dst []byte) (bool, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.data)-p.off >= len(dst) {
		p.off += copy(dst, p.data[p.off:])
		return true, nil
	}
	if p.ready == nil {
		p.ready = make(chan struct{})
	}
	return false, p.ready
}

func (p *selfPipe) buffered() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.data) - p.off
}

func (c *Comm) selfSend(data []byte) error {
	if err := c.usable(); err != nil {
		return err
	}
	c.self.send(data)
	return nil
}

func (c *Comm) selfRecv(data []byte) error {
	deadline := time.Now().Add(c.timeout())
	for {
		ok, more := c.self.take(data)
		if ok {
			return nil
		}
		if err := c.usable(); err != nil {
			return err
		}
		if c.seg.state().Load() == stateAborted {
			return rt.Failedf("rank %d: communicator aborted", c.rank)
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			return rt.Failedf("rank %d: Recv from self (%d bytes) timed out after %v: %d bytes were sent to self",
				c.rank, len(data), c.timeout(), c.self.buffered())
		}
		select {
		case <-more:
		case <-time.After(min(wait, 20*time.Millisecond)):
		}
	}
}
