package xccl

import (
	"encoding/hex"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/xccl-project/xccl/launch"
	rt "github.com/xccl-project/xccl/runtime"
)

// launchSeq numbers the communicators this process makes from the
// environment: every rank makes them in the same order, so the n-th one's
// root port and secret agree.
var launchSeq atomic.Int64

// envIDsUsed holds the XCCL_UNIQUE_IDs this process joined (CommInitFromEnv).
var envIDsUsed sync.Map

// CommInitFromEnv joins the communicator of the job this process was
// started in — by xcclrun, mpirun, srun, a PMI launcher or torchrun (see
// package launch) — on dev, without an id handed around by the caller.
// Where the device has several devices, the rank's device is set to its
// local rank (modulo the count) first. Run alone, it is rank 0 of 1.
func CommInitFromEnv(dev rt.Device) (*Comm, *launch.Env, error) {
	if dev == nil {
		return nil, nil, rt.Errorf("CommInitFromEnv: no device")
	}
	e, err := launch.Detect(nil)
	if err != nil {
		return nil, nil, rt.Errorf("CommInitFromEnv: %v", err)
	}
	var id []byte
	switch {
	case e.UniqueIDHex != "":
		if id, err = hex.DecodeString(e.UniqueIDHex); err != nil {
			return nil, e, rt.Errorf("CommInitFromEnv: XCCL_UNIQUE_ID is not hex: %v", err)
		}
		// The launcher's id serves one communicator: a second join would
		// wait the whole timeout for a bootstrap that is gone.
		if _, used := envIDsUsed.LoadOrStore(e.UniqueIDHex, true); used {
			return nil, e, rt.Errorf("CommInitFromEnv: this process joined (or tried to join) the communicator of XCCL_UNIQUE_ID (the launcher's id) already, " +
				"and it serves one: make more with XcclCommSplit, or with XcclGetUniqueId and XcclCommInitRank")
		}
	case e.Size == 1:
		if id, err = GetUniqueID(dev); err != nil {
			return nil, e, err
		}
	default:
		h, err := rt.Open("host")
		if err != nil {
			return nil, e, rt.Errorf("CommInitFromEnv: the host engine is not linked in: %v", err)
		}
		lr, ok := h.(rt.LaunchRooter)
		if !ok {
			return nil, e, rt.Errorf("CommInitFromEnv: the host engine cannot serve a launched job's root")
		}
		seq := int(launchSeq.Add(1) - 1)
		e.RootPort += seq
		if e.RootPort > 65535 {
			return nil, e, rt.Errorf("CommInitFromEnv: communicator %d of this process would use root port %d", seq+1, e.RootPort)
		}
		if id, err = lr.LaunchID(e.Root(), e.JobID(seq), e.Secret(seq), e.Rank == 0); err != nil {
			return nil, e, rt.WrapFailed(err, "CommInitFromEnv (%s)", e)
		}
	}
	if n := dev.DeviceCount(); n > 1 {
		if err := dev.SetDevice(e.LocalRank % n); err != nil {
			return nil, e, err
		}
	}
	rt.Log().Info("joining from the launcher's environment", zap.String("launch", e.String()))
	c, err := CommInitRank(dev, e.Size, id, e.Rank)
	if err != nil {
		return nil, e, rt.WrapFailed(err, "CommInitFromEnv (%s)", e)
	}
	return c, e, nil
}
