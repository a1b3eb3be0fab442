package host

import (
	"sync"

	rt "github.com/xccl-project/xccl/runtime"
)

// stream is an ordered queue of work with one worker goroutine, started on
// demand and gone when the queue is empty. Positions count enqueued items;
// events remember a position and are done once the stream has passed it.
type stream struct {
	mu       sync.Mutex
	cond     *sync.Cond
	q        []func() error
	enqueued uint64
	finished uint64
	running  bool
	err      error // first error since the last synchronize
}

func newStream() *stream {
	s := &stream{}
	s.cond = sync.NewCond(&s.mu)
	return s
}

func (s *stream) enqueue(f func() error) {
	s.mu.Lock()
	s.q = append(s.q, f)
	s.enqueued++
	if !s.running {
		s.running = true
		go s.work()
	}
	s.mu.Unlock()
}

func (s *stream) work() {
	s.mu.Lock()
	for len(s.q) > 0 {
		f := s.q[0]
		s.q[0] = nil
		s.q = s.q[1:]
		s.mu.Unlock()
		err := f()
		s.mu.Lock()
		if err != nil && s.err == nil {
			s.err = err
		}
		s.finished++
		s.cond.Broadcast()
	}
	s.running = false
	s.mu.Unlock()
}

// position is the count of work enqueued so far.
func (s *stream) position() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.enqueued
}

func (s *stream) reached(pos uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.finished >= pos
}

func (s *stream) waitFor(pos uint64) {
	s.mu.Lock()
	for s.finished < pos {
		s.cond.Wait()
	}
	s.mu.Unlock()
}

// synchronize waits for all enqueued work and returns (and clears) the first
// error it raised.
func (s *stream) synchronize() error {
	s.mu.Lock()
	for s.finished < s.enqueued {
		s.cond.Wait()
	}
	err := s.err
	s.err = nil
	s.mu.Unlock()
	return err
}

func (s *stream) query() error {
	if !s.reached(s.position()) {
		return rt.ErrNotReady
	}
	return nil
}

// event marks a position in a stream. Never recorded: done.
type event struct {
	mu  sync.Mutex
	s   *stream
	pos uint64
}

// record marks s's current end; nil (the NULL stream, synchronous) marks
// work already done.
func (e *event) record(s *stream) {
	var pos uint64
	if s != nil {
		pos = s.position()
	}
	e.mu.Lock()
	e.s, e.pos = s, pos
	e.mu.Unlock()
}

func (e *event) target() (*stream, uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.s, e.pos
}

func (e *event) done() bool {
	s, pos := e.target()
	return s == nil || s.reached(pos)
}

func (e *event) wait() {
	if s, pos := e.target(); s != nil {
		s.waitFor(pos)
	}
}
