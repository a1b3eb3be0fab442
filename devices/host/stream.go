package host

import (
	"math"
	"sync"
	"time"

	rt "github.com/xccl-project/xccl/runtime"
)

// stream is an ordered queue of work. Positions count enqueued items;
// events remember a position and are done once the stream has passed it.
//
// A thread that waits for the stream (synchronize, an event's wait) runs
// the items it waits for itself, in order, where no one runs them yet;
// items nobody waits for are run by a worker goroutine, started workerDelay
// after the first of them was enqueued on an idle stream, and gone when the
// queue is empty. The worker and the waiters take items one at a time
// (busy). Measured from C (an 8-byte all-reduce enqueued, alternating runs
// against a worker started at once that ran every item; there the waiting
// thread, locked to its OS thread by cgo, parks and hands its P to another
// thread to run the worker, which wakes it again):
//   - the stream synchronized after each call: 2 ranks 23-36 -> 1.4-2.4 us,
//     4 ranks (2 cores) 119-125 -> 12-15 us;
//   - 10 000 calls, then one synchronize: 2 ranks 1.3-2.6 -> 1.5-1.7 us,
//     4 ranks 54-111 -> 9-10 us.
type stream struct {
	mu       sync.Mutex
	cond     *sync.Cond
	q        []func() error
	enqueued uint64
	finished uint64
	running  bool        // the worker runs
	kick     *time.Timer // starts the worker (its goroutine is the timer's)
	kicking  bool        // kick is armed
	busy     bool        // an item is running (on the worker or on a waiting thread)
	helpers  int         // waiting threads in drain
	err      error       // first error since the last synchronize
	errAt    uint64      // the position of the item that raised it
}

// workerDelay is how long an item may wait for a thread that waits for it
// to run it, before the stream's worker starts.
const workerDelay = 50 * time.Microsecond

func newStream() *stream {
	s := &stream{}
	s.cond = sync.NewCond(&s.mu)
	s.kick = time.AfterFunc(time.Hour, s.work)
	s.kick.Stop()
	return s
}

func (s *stream) enqueue(f func() error) {
	s.mu.Lock()
	s.q = append(s.q, f)
	s.enqueued++
	if !s.running && !s.kicking {
		s.kicking = true
		s.kick.Reset(workerDelay)
	}
	s.mu.Unlock()
}

// work is the worker: it runs what is queued, then goes.
func (s *stream) work() {
	s.mu.Lock()
	s.kicking = false
	if !s.running {
		s.running = true
		s.drain(math.MaxUint64, true)
		s.running = false
	}
	s.mu.Unlock()
}

// drain runs the queued items in order on the calling goroutine until the
// stream has finished pos items or its queue is empty, waiting while
// another goroutine runs one (s.mu held). The worker leaves to a waiting
// thread (it would otherwise hand every other item to it and back); a
// waiting thread that leaves items behind has the worker started for them.
func (s *stream) drain(pos uint64, worker bool) {
	if !worker {
		s.helpers++
		defer func() { s.helpers-- }()
	}
	for s.finished < pos && !(worker && s.helpers > 0) {
		if s.busy {
			s.cond.Wait()
			continue
		}
		if len(s.q) == 0 {
			break
		}
		f := s.q[0]
		s.q[0] = nil
		s.q = s.q[1:]
		s.busy = true
		s.mu.Unlock()
		err := f()
		s.mu.Lock()
		s.busy = false
		if err != nil && s.err == nil {
			s.err, s.errAt = err, s.finished+1
		}
		s.finished++
		s.cond.Broadcast()
	}
	if !worker && s.helpers == 1 && len(s.q) > 0 && !s.running && !s.kicking {
		s.kicking = true
		s.kick.Reset(workerDelay)
	}
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

// waitFor returns once the stream has finished pos items, running them
// where no one does.
func (s *stream) waitFor(pos uint64) {
	s.mu.Lock()
	s.drain(pos, false)
	s.mu.Unlock()
}

// synchronize waits for all enqueued work (running it where no one does)
// and returns (and clears) the first error it raised.
func (s *stream) synchronize() error {
	s.mu.Lock()
	for s.finished < s.enqueued {
		s.drain(s.enqueued, false)
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

// wait waits for the event's work, and returns the stream's failure
// (C_FAILED: a broken communicator, which fails what follows too) not yet
// reported by a synchronize when an item up to the event raised it. A
// refused call (C_ERROR, a mismatch) is the synchronize's to report: the
// communicator goes on, and so do the events after it.
func (e *event) wait() error {
	s, pos := e.target()
	if s == nil {
		return nil
	}
	s.waitFor(pos)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil && s.errAt <= pos && rt.StatusOf(s.err) == rt.StatusFailed {
		return s.err
	}
	return nil
}
