// Package mixed makes one communicator of ranks on different devices:
// different vendors' accelerators, and CPUs (the host device). Every
// communicator starts on xccl's own id, a bootstrap of the host engine:
// the ranks tell each other their device, cluster label and what their
// device can reduce. When they are all in one cluster the communicator is
// that device's own (pass-through: a vendor communicator made from a vendor
// id the first rank hands to the others, or the host engine's). Otherwise
// it is mixed: each cluster keeps a communicator on its own device and
// library, cluster leaders share one on the host engine, and every rank
// keeps the all-rank host communicator of the bootstrap; data crosses
// between clusters through host staging (device to host and back through
// each vendor's runtime).
//
// The package reaches devices only through the runtime contract.
package mixed

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"

	rt "github.com/xccl-project/xccl/runtime"
)

// What a rank tells the others at init, in a fixed record.
const (
	recSize  = 160
	nameLen  = 32 // device name
	labelLen = 64 // cluster label
	idRoom   = 8192
)

type member struct {
	device, cluster string
	host            uint64
	caps            [16]uint8 // per data type, a bit per reduce op the device reduces
	algo            string    // XCCL_MIXED_ALGO of the rank (rank 0's counts)
	chunk           uint32    // XCCL_MIXED_CHUNK_BYTES of the rank (rank 0's counts: every rank cuts the same pieces)
}

func (m member) encode() []byte {
	b := make([]byte, recSize)
	copy(b[0:nameLen], m.device)
	copy(b[nameLen:nameLen+labelLen], m.cluster)
	binary.BigEndian.PutUint64(b[96:104], m.host)
	copy(b[104:120], m.caps[:])
	copy(b[120:136], m.algo)
	binary.BigEndian.PutUint32(b[136:140], m.chunk)
	return b
}

func decode(b []byte) member {
	str := func(x []byte) string { return string(bytes.TrimRight(x, "\x00")) }
	m := member{device: str(b[0:nameLen]), cluster: str(b[nameLen : nameLen+labelLen]),
		host: binary.BigEndian.Uint64(b[96:104]), algo: str(b[120:136]), chunk: binary.BigEndian.Uint32(b[136:140])}
	copy(m.caps[:], b[104:120])
	return m
}

func capsOf(d rt.Device) (c [16]uint8) {
	for _, dt := range rt.AllDataTypes() {
		for _, op := range rt.AllReduceOps() {
			if d.Supports(dt, op) == nil {
				c[dt] |= 1 << uint(op)
			}
		}
	}
	return c
}

func hostHash() uint64 {
	h := fnv.New64a()
	name, _ := os.Hostname()
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	h.Write([]byte(name + "/" + strings.TrimSpace(string(boot))))
	return h.Sum64()
}

// cluster is the ranks of one label, in rank order.
type cluster struct {
	label, device string
	ranks         []int
	caps          [16]uint8
}

func (c *cluster) leader() int { return c.ranks[0] }

func (c *cluster) index(rank int) int {
	for i, r := range c.ranks {
		if r == rank {
			return i
		}
	}
	return -1
}

// clustersOf groups members by label, clusters in order of their first rank.
func clustersOf(ms []member) ([]*cluster, error) {
	var out []*cluster
	by := map[string]*cluster{}
	for r, m := range ms {
		c := by[m.cluster]
		if c == nil {
			c = &cluster{label: m.cluster, device: m.device, caps: m.caps}
			by[m.cluster] = c
			out = append(out, c)
		}
		if m.device != c.device {
			return nil, rt.Errorf("cluster %q holds ranks on device %s (rank %d) and %s (rank %d): a cluster is one device kind; "+
				"set XCCL_CLUSTER apart", m.cluster, c.device, c.leader(), m.device, r)
		}
		c.ranks = append(c.ranks, r)
	}
	return out, nil
}

// describe is the clusters for logs and errors: "nvidia[0 2] host[1 3]".
func describe(cs []*cluster) string {
	var parts []string
	for _, c := range cs {
		s := c.label
		if c.label != c.device {
			s += "(" + c.device + ")"
		}
		parts = append(parts, fmt.Sprintf("%s%v", s, c.ranks))
	}
	return strings.Join(parts, " ")
}

// Init joins rank of nranks, on dev and in cluster label (default: dev's
// name), to the communicator named by id, an xccl id (the host engine's),
// within timeout (0: XCCL_TIMEOUT) where the host engine waits.
func Init(dev rt.Device, nranks int, id []byte, rank int, label string, timeout time.Duration) (rt.Comm, error) {
	// The host engine: dev itself when it is the host device (with its
	// options), else the registered one.
	host := dev
	if dev.Name() != "host" {
		var err error
		if host, err = rt.Open("host"); err != nil {
			return nil, rt.Errorf("the host engine is not linked in (import devices/host): %v", err)
		}
	}
	if label == "" {
		label = dev.Name()
	}
	if len(label) > labelLen {
		return nil, rt.Errorf("cluster label %q is longer than %d bytes", label, labelLen)
	}
	var hc rt.Comm
	var err error
	if t, ok := host.(interface {
		CommInitRankTimeout(int, []byte, int, time.Duration) (rt.Comm, error)
	}); ok && timeout > 0 {
		hc, err = t.CommInitRankTimeout(nranks, id, rank, timeout)
	} else {
		hc, err = host.CommInitRank(nranks, id, rank)
	}
	if err != nil {
		return nil, err
	}
	keep := false
	defer func() {
		if !keep {
			_ = hc.Destroy()
		}
	}()
	cfg := rt.ReadConfig() // at each init, as NCCL reads its own
	me := member{device: dev.Name(), cluster: label, host: hostHash(), caps: capsOf(dev), algo: cfg.MixedAlgo,
		chunk: uint32(min(cfg.MixedChunk, 1<<30))}
	all := make([]byte, recSize*nranks)
	if err := runOn(hc, &rt.Op{Kind: rt.OpAllGather, Send: ptr(me.encode()), Recv: ptr(all), Count: recSize, Type: rt.Uint8}); err != nil {
		return nil, rt.WrapFailed(err, "rank %d: exchanging devices and clusters", rank)
	}
	ms := make([]member, nranks)
	for r := range ms {
		ms[r] = decode(all[r*recSize : (r+1)*recSize])
	}
	cs, err := clustersOf(ms)
	if err != nil {
		return nil, err
	}
	log := rt.Log().With(zap.Int("rank", rank), zap.Int("nranks", nranks))
	if len(cs) == 1 {
		if dev.Name() == host.Name() {
			keep = true
			log.Info("communicator: one cluster on the host engine", zap.String("clusters", describe(cs)))
			return hc, nil
		}
		vc, err := subComm(hc, dev, cs[0], cs, rank)
		if err != nil {
			return nil, err
		}
		log.Info("communicator: one cluster, the vendor's own communicator", zap.String("clusters", describe(cs)))
		return vc, nil // hc goes (deferred): pass-through costs nothing per call
	}
	c, err := newComm(dev, host, hc, ms, cs, rank)
	if err != nil {
		return nil, err
	}
	keep = true
	log.Info("mixed communicator", zap.String("clusters", describe(cs)), zap.String("plan", c.planText()))
	return c, nil
}

// subComm makes the communicator of cluster mine on dev: its leader makes
// dev's own id and every cluster's id travels over hc (one broadcast per
// cluster that needs one, every rank taking part, in cluster order); the
// ranks of mine then join it. Ranks of other clusters return nil.
func subComm(hc rt.Comm, dev rt.Device, mine *cluster, cs []*cluster, rank int) (rt.Comm, error) {
	var myID []byte
	for _, c := range cs {
		if len(c.ranks) == 1 && len(cs) > 1 {
			continue // a cluster of one needs no communicator of its own
		}
		buf := make([]byte, idRoom)
		if rank == c.leader() {
			fillID(buf, dev)
		}
		if err := runOn(hc, &rt.Op{Kind: rt.OpBroadcast, Send: ptr(buf), Recv: ptr(buf), Count: idRoom, Type: rt.Uint8, Root: c.leader()}); err != nil {
			return nil, rt.WrapFailed(err, "rank %d: handing out cluster %q's id", rank, c.label)
		}
		if c == mine {
			n := int(binary.BigEndian.Uint16(buf[1:3]))
			if buf[0] != 1 {
				return nil, rt.Failedf("rank %d: the leader of cluster %q (rank %d) could not make a %s id: %s",
					rank, c.label, c.leader(), c.device, buf[3:3+n])
			}
			myID = buf[3 : 3+n]
		}
	}
	if myID == nil {
		return nil, nil
	}
	return dev.CommInitRank(len(mine.ranks), myID, mine.index(rank))
}

// fillID writes dev's new id into buf as [ok, len(2), bytes], or [0, len,
// message] when it cannot be made (the others learn why).
func fillID(buf []byte, dev rt.Device) {
	id, err := dev.NewUniqueID()
	if err == nil && len(id) > idRoom-3 {
		err = rt.Errorf("a %d-byte %s id does not fit in %d bytes", len(id), dev.Name(), idRoom-3)
	}
	if err != nil {
		id = []byte(err.Error())
		if len(id) > idRoom-3 {
			id = id[:idRoom-3]
		}
	} else {
		buf[0] = 1
	}
	binary.BigEndian.PutUint16(buf[1:3], uint16(len(id)))
	copy(buf[3:], id)
}

// IDSize is the size of xccl's id, the same for every device.
func IDSize() int {
	host, err := rt.Open("host")
	if err != nil {
		return 0
	}
	return host.UniqueIDSize()
}

// NewID makes an id for a new communicator on any device: a bootstrap of
// the host engine, served from this process.
func NewID() ([]byte, error) {
	host, err := rt.Open("host")
	if err != nil {
		return nil, rt.Errorf("the host engine is not linked in (import devices/host): %v", err)
	}
	return host.NewUniqueID()
}
