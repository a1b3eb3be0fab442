package runtime

import (
	"encoding/binary"
	"fmt"
)

// Fingerprint describes one collective call for the cross-rank checks: the
// host device exchanges it before every collective, vendor devices with
// XCCL_CHECK=1. Ranks that make the same call have equal fingerprints.
type Fingerprint struct {
	Seq   uint64 // the call's number on its communicator
	Kind  OpKind
	Type  DataType
	Red   ReduceOp
	Root  int32
	Count uint64 // elements (0 for all-to-all: its counts differ per peer by design)
}

// FingerprintSize is the size of an encoded Fingerprint.
const FingerprintSize = 32

const fingerprintMagic = 0x46505843 // "CXPF"

// FingerprintOf is what a rank says about op, the seq-th collective: only
// the fields that must agree across ranks for op's kind.
func FingerprintOf(op *Op, seq uint64) Fingerprint {
	var f Fingerprint
	f.Set(op, seq)
	return f
}

// Set makes f FingerprintOf(op, seq) in place, field by field: built where
// it is used rather than copied there (a copy reads fields just stored one
// by one back 16 bytes at a time, which the store buffer cannot forward).
func (f *Fingerprint) Set(op *Op, seq uint64) {
	f.Seq, f.Kind, f.Type, f.Red, f.Root, f.Count = seq, op.Kind, op.Type, op.Red, int32(op.Root), uint64(op.Count)
	if op.Red.IsPreMulSum() { // each rank numbers its own: any is a pre-multiplied sum
		f.Red = FirstPreMulSum
	}
	switch op.Kind {
	case OpAllGather, OpAllReduce, OpReduceScatter:
		f.Root = 0
	case OpBroadcast:
		f.Red = 0
	case OpAllToAll:
		f.Type, f.Red, f.Root, f.Count = 0, 0, 0, 0
	}
}

// Put encodes f into the first FingerprintSize bytes of b.
func (f Fingerprint) Put(b []byte) {
	clear(b[:FingerprintSize])
	binary.LittleEndian.PutUint32(b[0:], fingerprintMagic)
	binary.LittleEndian.PutUint64(b[4:], f.Seq)
	b[12], b[13], b[14] = byte(f.Kind), byte(f.Type), byte(f.Red)
	binary.LittleEndian.PutUint32(b[16:], uint32(f.Root))
	binary.LittleEndian.PutUint64(b[20:], f.Count)
}

// Body is bytes 12 to 27 of Put's message (kind, type, op, root, count:
// what tells two calls apart, besides the sequence number) as two
// little-endian words, computed from f rather than read back.
func (f Fingerprint) Body() (uint64, uint64) {
	return uint64(byte(f.Kind)) | uint64(byte(f.Type))<<8 | uint64(byte(f.Red))<<16 | uint64(uint32(f.Root))<<32, f.Count
}

// ParseFingerprint decodes what Put wrote; false if b holds none.
func ParseFingerprint(b []byte) (Fingerprint, bool) {
	if binary.LittleEndian.Uint32(b[0:]) != fingerprintMagic {
		return Fingerprint{}, false
	}
	return Fingerprint{Seq: binary.LittleEndian.Uint64(b[4:]), Kind: OpKind(b[12]), Type: DataType(b[13]),
		Red: ReduceOp(b[14]), Root: int32(binary.LittleEndian.Uint32(b[16:])), Count: binary.LittleEndian.Uint64(b[20:])}, true
}

// String names the call as error messages do: AllReduce(count=12, FLOAT32, SUM).
func (f Fingerprint) String() string {
	s := fmt.Sprintf("%v(count=%d, %v", f.Kind, f.Count, f.Type)
	switch f.Kind {
	case OpAllReduce, OpReduceScatter:
		s += ", " + f.Red.String()
	case OpReduce:
		s += fmt.Sprintf(", %v, root=%d", f.Red, f.Root)
	case OpBroadcast:
		s += fmt.Sprintf(", root=%d", f.Root)
	case OpAllToAll: // its counts are checked apart
		return f.Kind.String() + "()"
	}
	return s + ")"
}
