package host

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"hash/fnv"
	"net"
	"net/netip"

	rt "github.com/xccl-project/xccl/runtime"
)

// UniqueIDSize is the size of a host-device unique id in bytes.
//
// Layout (version 1), all integers big-endian:
//
//	offset size field
//	     0    4 magic "XCID"
//	     4    1 version (1)
//	     5    1 device kind (1 = host)
//	     6    2 reserved, zero
//	     8   16 root IPv6 address (IPv4 as ::ffff:a.b.c.d)
//	    24    2 root TCP port
//	    26    6 reserved, zero
//	    32    8 job id: random, names this communicator (never zero)
//	    40   32 secret: random; proven by HMAC challenge–response, never sent
//	    72    8 root machine: a hash of the maker's host, boot and network
//	            namespace (0: unknown), so a rank elsewhere handed a loopback
//	            root fails at once
//	    80   48 reserved, zero
const UniqueIDSize = 128

const (
	idVersion = 1
	idKind    = 1
)

var idMagic = [4]byte{'X', 'C', 'I', 'D'}

// UniqueID is a parsed host-device unique id.
type UniqueID struct {
	Root    netip.AddrPort
	Job     uint64
	Secret  [32]byte
	Machine uint64 // hash of the maker's hostID(); 0 when unknown
}

// machineHash is this process's machine identity in ids.
func machineHash() uint64 {
	h := fnv.New64a()
	h.Write([]byte(hostID()))
	return h.Sum64() | 1
}

func newUniqueID(root netip.AddrPort) (UniqueID, error) {
	id := UniqueID{Root: root, Machine: machineHash()}
	var j [8]byte
	for id.Job == 0 {
		if _, err := rand.Read(j[:]); err != nil {
			return id, err
		}
		id.Job = binary.BigEndian.Uint64(j[:])
	}
	_, err := rand.Read(id.Secret[:])
	return id, err
}

// Bytes encodes the id in its fixed 128-byte layout.
func (u UniqueID) Bytes() []byte {
	b := make([]byte, UniqueIDSize)
	copy(b[0:4], idMagic[:])
	b[4] = idVersion
	b[5] = idKind
	a16 := u.Root.Addr().As16()
	copy(b[8:24], a16[:])
	binary.BigEndian.PutUint16(b[24:26], u.Root.Port())
	binary.BigEndian.PutUint64(b[32:40], u.Job)
	copy(b[40:72], u.Secret[:])
	binary.BigEndian.PutUint64(b[72:80], u.Machine)
	return b
}

// Hex is the id as the hex string xcclrun passes in XCCL_UNIQUE_ID.
func (u UniqueID) Hex() string { return hex.EncodeToString(u.Bytes()) }

// ParseUniqueID validates and decodes an id. Every malformed or foreign id
// is refused with a C_ERROR that says what is wrong.
func ParseUniqueID(b []byte) (UniqueID, error) {
	var u UniqueID
	if len(b) != UniqueIDSize {
		return u, rt.Errorf("unique id is %d bytes, want %d", len(b), UniqueIDSize)
	}
	if !bytes.Equal(b[0:4], idMagic[:]) {
		return u, rt.Errorf("unique id has a bad magic %q: not an xccl host-device id", b[0:4])
	}
	if b[4] != idVersion {
		return u, rt.Errorf("unique id version %d is not supported (want %d)", b[4], idVersion)
	}
	if b[5] != idKind {
		return u, rt.Errorf("unique id is for device kind %d, not the host device", b[5])
	}
	if !allZero(b[6:8]) || !allZero(b[26:32]) || !allZero(b[80:]) {
		return u, rt.Errorf("unique id has non-zero reserved bytes: corrupted")
	}
	var a16 [16]byte
	copy(a16[:], b[8:24])
	addr := netip.AddrFrom16(a16).Unmap()
	port := binary.BigEndian.Uint16(b[24:26])
	if port == 0 || !addr.IsValid() || addr.IsUnspecified() {
		return u, rt.Errorf("unique id carries no root address")
	}
	u.Root = netip.AddrPortFrom(addr, port)
	u.Job = binary.BigEndian.Uint64(b[32:40])
	if u.Job == 0 {
		return u, rt.Errorf("unique id has a zero job id: corrupted")
	}
	copy(u.Secret[:], b[40:72])
	u.Machine = binary.BigEndian.Uint64(b[72:80])
	return u, nil
}

// ParseUniqueIDHex decodes the hex form (XCCL_UNIQUE_ID).
func ParseUniqueIDHex(s string) (UniqueID, error) {
	b, err := hex.DecodeString(s)
	if err != nil {
		return UniqueID{}, rt.Errorf("unique id is not valid hex: %v", err)
	}
	return ParseUniqueID(b)
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// bindAddr is the address the host device listens on: the address of
// XCCL_SOCKET_IFNAME (an interface name or an IP), loopback by default, so
// nothing is exposed beyond this machine unless asked.
func bindAddr(ifname string) (netip.Addr, error) {
	if ifname == "" {
		return netip.MustParseAddr("127.0.0.1"), nil
	}
	if a, err := netip.ParseAddr(ifname); err == nil {
		return a, nil
	}
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return netip.Addr{}, rt.Errorf("XCCL_SOCKET_IFNAME=%q: %v", ifname, err)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return netip.Addr{}, rt.Errorf("XCCL_SOCKET_IFNAME=%q: %v", ifname, err)
	}
	var v6 netip.Addr
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			if p.Addr().Is4() {
				return p.Addr(), nil
			}
			if !v6.IsValid() && !p.Addr().IsLinkLocalUnicast() {
				v6 = p.Addr()
			}
		}
	}
	if v6.IsValid() {
		return v6, nil
	}
	return netip.Addr{}, rt.Errorf("XCCL_SOCKET_IFNAME=%q has no usable address", ifname)
}
