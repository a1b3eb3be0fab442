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
	// For events, since the last synchronize: the first failure (C_FAILED:
	// a broken communicator fails what follows it too) and where, and the
	// refused calls (C_ERROR) and where, at most maxRefused of them.
	fail    error
	failAt  uint64
	refused []posErr
	marked  uint64 // the position the last event recorded here marked
}

// posErr is the error of the item at position at.
type posErr struct {
	at  uint64
	err error
}

// maxRefused bounds the refused calls a stream keeps for its events.
const maxRefused = 64

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

func (s *stream) enqueue(f func() error) { s.enqueueAt(f) }

// enqueueAt enqueues f and returns its position.
func (s *stream) enqueueAt(f func() error) uint64 {
	s.mu.Lock()
	s.q = append(s.q, f)
	s.enqueued++
	pos := s.enqueued
	if !s.running && !s.kicking {
		s.kicking = true
		s.kick.Reset(workerDelay)
	}
	s.mu.Unlock()
	return pos
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
		if err != nil {
			s.noteErr(err, s.finished+1)
		}
		s.finished++
		s.cond.Broadcast()
	}
	if !worker && s.helpers == 1 && len(s.q) > 0 && !s.running && !s.kicking {
		s.kicking = true
		s.kick.Reset(workerDelay)
	}
}

// runIfIdle runs f now, holding the stream, where it has no work queued or
// running, and says whether it did.
func (s *stream) runIfIdle(f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy || s.finished < s.enqueued {
		return false
	}
	f()
	return true
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
	s.err, s.fail, s.refused = nil, nil, nil
	s.mu.Unlock()
	return err
}

// settle waits for the work enqueued so far (running it where no one does)
// and returns (and clears) the first error it raised, as synchronize, but
// leaves the failure and refused calls that events report: a device's
// synchronize (settle) may be another thread's, and the events are those of
// the stream's own thread.
func (s *stream) settle() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drain(s.enqueued, false)
	err := s.err
	s.err = nil
	return err
}

// noteErr records the error of the item at position at (s.mu held).
func (s *stream) noteErr(err error, at uint64) {
	if s.err == nil {
		s.err = err
	}
	switch {
	case rt.StatusOf(err) == rt.StatusFailed:
		if s.fail == nil {
			s.fail, s.failAt = err, at
		}
	case len(s.refused) < maxRefused:
		s.refused = append(s.refused, posErr{at, err})
	}
}

// failedBy is the stream's failure (C_FAILED) at or before pos, if it has
// not been reported by a synchronize yet.
func (s *stream) failedBy(pos uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil && s.failAt <= pos {
		return s.fail
	}
	return nil
}

// mark is an event's record: the stream's end, and the end the last
// record marked.
func (s *stream) mark() (from, pos uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	from, s.marked = s.marked, s.enqueued
	return from, s.enqueued
}

func (s *stream) query() error {
	if !s.reached(s.position()) {
		return rt.ErrNotReady
	}
	return nil
}

// event marks a position in a stream. Never recorded: done.
type event struct {
	mu        sync.Mutex
	s         *stream
	from, pos uint64 // the work it covers alone: (from, pos]
}

// record marks s's current end; nil (the NULL stream, synchronous) marks
// work already done.
func (e *event) record(s *stream) {
	var from, pos uint64
	if s != nil {
		from, pos = s.mark()
	}
	e.mu.Lock()
	e.s, e.from, e.pos = s, from, pos
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

// wait waits for the event's work. Until a synchronize reports them, it
// returns the stream's first failure (C_FAILED: a broken communicator,
// which fails what follows too) at or before the event, else the first
// refused call (C_ERROR) among the work the event covers alone: since the
// record before it on that stream (Python's Work records one per call).
func (e *event) wait() error {
	e.mu.Lock()
	s, from, pos := e.s, e.from, e.pos
	e.mu.Unlock()
	if s == nil {
		return nil
	}
	s.waitFor(pos)
	if err := s.failedBy(pos); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.refused {
		if from < r.at && r.at <= pos {
			return r.err
		}
	}
	return nil
}
