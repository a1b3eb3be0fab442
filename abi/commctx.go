package main

/*
#include "xccl.h"
*/
import "C"

import (
	"sync"
	"unsafe"

	"github.com/xccl-project/xccl/commctx"
	rt "github.com/xccl-project/xccl/runtime"
)

// One CommContextManager per process, on the configured device. Its
// communicators also get C handles, so every Xccl* call accepts them.
var (
	ctxOnce    sync.Once
	ctxMgr     *commctx.Manager
	ctxErr     error
	ctxMu      sync.Mutex
	ctxHandles = map[*commctx.Context]C.C_CCLComm{}
)

func manager() (*commctx.Manager, error) {
	ctxOnce.Do(func() {
		dev, err := device()
		if err != nil {
			ctxErr = err
			return
		}
		ctxMgr = commctx.New(dev)
		ctxMgr.Binder = dev.SetDevice // runs on the creating (calling) thread
	})
	return ctxMgr, ctxErr
}

func ctxHandle(c *commctx.Context) C.C_CCLComm {
	ctxMu.Lock()
	defer ctxMu.Unlock()
	h, ok := ctxHandles[c]
	if !ok {
		h = newCommHandle(c.Comm)
		ctxHandles[c] = h
	}
	return h
}

//export XcclCommContextCreate
func XcclCommContextCreate(ring C.int64_t, id *C.C_CCLRootId, rank, nranks C.size_t, deviceID C.int, comm *C.C_CCLComm) C.C_Status {
	return call("XcclCommContextCreate", func() error {
		if err := checkInit(nranks, id, rank, comm); err != nil {
			return err
		}
		if err := rt.CheckDeviceChoice(); err != nil { // as initDevice: one device per process
			return err
		}
		m, err := manager()
		if err != nil {
			return err
		}
		c, err := m.Create(int(ring), C.GoBytes(unsafe.Pointer(id.data), C.int(id.sz)), int(rank), int(nranks), int(deviceID))
		if err != nil {
			return err
		}
		*comm = ctxHandle(c)
		return nil
	})
}

func getCtx(ring C.int64_t) (*commctx.Context, error) {
	m, err := manager()
	if err != nil {
		return nil, err
	}
	return m.Get(int(ring))
}

//export XcclCommContextGet
func XcclCommContextGet(ring C.int64_t, comm *C.C_CCLComm) C.C_Status {
	return call("XcclCommContextGet", func() error {
		if comm == nil {
			return rt.Errorf("comm is NULL")
		}
		c, err := getCtx(ring)
		if err != nil {
			return err
		}
		*comm = ctxHandle(c)
		return nil
	})
}

//export XcclCommContextHas
func XcclCommContextHas(ring C.int64_t, has *C.int) C.C_Status {
	return call("XcclCommContextHas", func() error {
		if has == nil {
			return rt.Errorf("has is NULL")
		}
		m, err := manager()
		if err != nil {
			return err
		}
		*has = 0
		if m.Has(int(ring)) {
			*has = 1
		}
		return nil
	})
}

//export XcclCommContextInfo
func XcclCommContextInfo(ring C.int64_t, rank, nranks, deviceID *C.int) C.C_Status {
	return call("XcclCommContextInfo", func() error {
		c, err := getCtx(ring)
		if err != nil {
			return err
		}
		if rank != nil {
			*rank = C.int(c.Rank)
		}
		if nranks != nil {
			*nranks = C.int(c.NRanks)
		}
		if deviceID != nil {
			*deviceID = C.int(c.DeviceID)
		}
		return nil
	})
}

func forget(c *commctx.Context) {
	ctxMu.Lock()
	h, ok := ctxHandles[c]
	delete(ctxHandles, c)
	ctxMu.Unlock()
	if ok {
		_, _ = dropComm(h)
	}
}

//export XcclCommContextDestroy
func XcclCommContextDestroy(ring C.int64_t) C.C_Status {
	return call("XcclCommContextDestroy", func() error {
		c, err := getCtx(ring)
		if err != nil {
			return err
		}
		forget(c)
		return ctxMgr.Destroy(int(ring))
	})
}

//export XcclCommContextDestroyAll
func XcclCommContextDestroyAll() C.C_Status {
	return call("XcclCommContextDestroyAll", func() error {
		m, err := manager()
		if err != nil {
			return err
		}
		ctxMu.Lock()
		all := make([]*commctx.Context, 0, len(ctxHandles))
		for c := range ctxHandles {
			all = append(all, c)
		}
		ctxMu.Unlock()
		for _, c := range all {
			forget(c)
		}
		return m.DestroyAll()
	})
}
