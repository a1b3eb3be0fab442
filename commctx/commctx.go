// Package commctx is the CommContextManager: communicator contexts keyed by
// ring id, each remembering the unique id it was made from, the rank, the
// rank count and the device id the rank runs on. Several ranks of one
// process may share a device (rank → device id is many-to-one), and ring ids
// are independent of device ids, as in Paddle's model.
package commctx

import (
	"bytes"
	"sync"

	rt "github.com/xccl-project/xccl/runtime"
	"github.com/xccl-project/xccl/xccl"
)

// Context is one communicator context.
type Context struct {
	RingID   int
	UniqueID []byte
	Rank     int
	NRanks   int
	DeviceID int
	Comm     *xccl.Comm
}

// Manager owns contexts; it is safe for concurrent use.
type Manager struct {
	mu      sync.Mutex
	ctxs    map[int]*entry
	Binder  func(deviceID int) error // binds the calling thread to a device before comm init (optional)
	Factory func(nranks int, id []byte, rank int) (*xccl.Comm, error)
}

// entry lets concurrent creators of one ring wait for the first.
type entry struct {
	ready chan struct{}
	ctx   *Context
	err   error
}

// New makes a manager that creates communicators on dev.
func New(dev rt.Device) *Manager {
	return &Manager{
		ctxs: map[int]*entry{},
		Factory: func(nranks int, id []byte, rank int) (*xccl.Comm, error) {
			return xccl.CommInitRank(dev, nranks, id, rank)
		},
	}
}

// Create makes the context of ringID, or returns the existing one when it
// was made from the same unique id, rank and nranks. The same ring id with
// a different id is an error. Concurrent creates of one ring make one
// communicator.
func (m *Manager) Create(ringID int, id []byte, rank, nranks, deviceID int) (*Context, error) {
	if deviceID < 0 {
		return nil, rt.Errorf("ring %d: device id %d is negative", ringID, deviceID)
	}
	m.mu.Lock()
	if e, ok := m.ctxs[ringID]; ok {
		m.mu.Unlock()
		<-e.ready
		if e.err != nil {
			return nil, e.err
		}
		c := e.ctx
		if !bytes.Equal(c.UniqueID, id) || c.Rank != rank || c.NRanks != nranks || c.DeviceID != deviceID {
			return nil, rt.Errorf("ring %d already holds a communicator made from another unique id, rank or device (rank %d of %d on device %d)",
				ringID, c.Rank, c.NRanks, c.DeviceID)
		}
		return c, nil
	}
	e := &entry{ready: make(chan struct{})}
	m.ctxs[ringID] = e
	m.mu.Unlock()

	e.ctx, e.err = m.create(ringID, id, rank, nranks, deviceID)
	if e.err != nil {
		m.mu.Lock()
		delete(m.ctxs, ringID)
		m.mu.Unlock()
	}
	close(e.ready)
	return e.ctx, e.err
}

func (m *Manager) create(ringID int, id []byte, rank, nranks, deviceID int) (*Context, error) {
	if m.Binder != nil {
		if err := m.Binder(deviceID); err != nil {
			return nil, rt.WrapFailed(err, "ring %d: bind device %d", ringID, deviceID)
		}
	}
	comm, err := m.Factory(nranks, id, rank)
	if err != nil {
		return nil, err
	}
	return &Context{RingID: ringID, UniqueID: append([]byte(nil), id...), Rank: rank, NRanks: nranks,
		DeviceID: deviceID, Comm: comm}, nil
}

// Get returns the context of ringID.
func (m *Manager) Get(ringID int) (*Context, error) {
	m.mu.Lock()
	e, ok := m.ctxs[ringID]
	m.mu.Unlock()
	if !ok {
		return nil, rt.Errorf("ring %d has no communicator context", ringID)
	}
	<-e.ready
	if e.err != nil {
		return nil, e.err
	}
	return e.ctx, nil
}

// Has reports whether ringID has a context.
func (m *Manager) Has(ringID int) bool {
	_, err := m.Get(ringID)
	return err == nil
}

// Destroy destroys the communicator of ringID and forgets the context.
func (m *Manager) Destroy(ringID int) error {
	m.mu.Lock()
	e, ok := m.ctxs[ringID]
	if ok {
		delete(m.ctxs, ringID)
	}
	m.mu.Unlock()
	if !ok {
		return rt.Errorf("ring %d has no communicator context", ringID)
	}
	<-e.ready
	if e.err != nil {
		return nil
	}
	return e.ctx.Comm.Destroy()
}

// DestroyAll destroys every context; it returns the first error.
func (m *Manager) DestroyAll() error {
	m.mu.Lock()
	rings := make([]int, 0, len(m.ctxs))
	for r := range m.ctxs {
		rings = append(rings, r)
	}
	m.mu.Unlock()
	var first error
	for _, r := range rings {
		if err := m.Destroy(r); err != nil && first == nil {
			first = err
		}
	}
	return first
}
