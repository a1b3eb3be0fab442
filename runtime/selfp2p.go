package runtime

// SelfMode says who matches a rank's sends to itself with its receives
// from itself (NCCL allows both, in a group or not).
type SelfMode int

const (
	// SelfCopy: package xccl matches them and copies device to device on
	// the receive's stream through the device runtime (the default for a
	// device that says nothing).
	SelfCopy SelfMode = iota
	// SelfInGroup: the vendor library matches them inside its group calls;
	// outside a group package xccl copies, as for SelfCopy (an ungrouped
	// vendor send to self would wait on its stream for a receive that is
	// queued behind it).
	SelfInGroup
	// SelfNative: the device matches them itself, in and out of groups.
	SelfNative
)

func (m SelfMode) String() string {
	switch m {
	case SelfNative:
		return "self send/recv: matched by the device, in a group or not"
	case SelfInGroup:
		return "self send/recv: in a group by the vendor library; ungrouped as a device-to-device copy on the receive's stream"
	default:
		return "self send/recv: a device-to-device copy on the receive's stream (the library is not trusted with it)"
	}
}

// SelfP2Per is a Device that says how it handles send/recv to self.
type SelfP2Per interface {
	SelfP2P() SelfMode
}

// SelfP2PMode is d's mode: SelfCopy when d does not say.
func SelfP2PMode(d Device) SelfMode {
	if s, ok := d.(SelfP2Per); ok {
		return s.SelfP2P()
	}
	return SelfCopy
}

// ZeroP2Per is a Device (or a Comm, which then decides) that matches
// sends and receives of zero bytes between ranks as NCCL does: a receive
// of count 0 takes its peer's send of count 0, waiting for it, so the pair
// orders the two ranks, and a count-0 receive opposite a send of data is
// a size mismatch. Elsewhere package xccl makes them no-ops: vendor
// libraries differ on them (RCCL hung on them for a while). Sends to self
// of count 0 are no-ops everywhere.
type ZeroP2Per interface {
	MatchesZeroP2P() bool
}

// MatchesZeroP2P says whether d (or c, when it says) matches count-0 sends
// and receives between ranks.
func MatchesZeroP2P(d Device, c Comm) bool {
	if z, ok := c.(ZeroP2Per); ok {
		return z.MatchesZeroP2P()
	}
	if z, ok := d.(ZeroP2Per); ok {
		return z.MatchesZeroP2P()
	}
	return false
}
