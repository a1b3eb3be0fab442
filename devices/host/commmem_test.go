package host

import (
	"math/rand"
	"slices"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// CommMemAlloc's pieces: shared at every size, aligned, never overlapping,
// each byte its own through random allocations and frees; an arena left
// empty goes back unless it is the last; large ones get a memfd of their
// own; freeing a piece at the start of an arena frees the piece, not the
// arena.
func TestCommMemAllocArenas(t *testing.T) {
	if !sharedMemory() {
		t.Skip("XCCL_SHARED_MEMORY=0")
	}
	d := New()
	_, err := d.CommMemAlloc(0, -1)
	require.Error(t, err)
	_, err = d.CommMemAlloc(d.DeviceCount(), 8)
	require.Error(t, err)

	type live struct {
		p    unsafe.Pointer
		size int
		tag  byte
	}
	rng := rand.New(rand.NewSource(1))
	var all []live
	SettleFrees() // other tests' frees that waited for their streams
	blocksBefore, allocatedBefore := sharedBlocks.Load(), Allocated()
	commMem.mu.Lock()
	kept := blocksBefore + 1 // the last arena stays
	if len(commMem.list) > 0 {
		kept = blocksBefore // an arena an earlier run left (-count=2) is that last one
	}
	commMem.mu.Unlock()
	check := func() {
		for _, l := range all {
			b := bytesAt(l.p, l.size)
			for i, v := range b {
				if v != l.tag {
					t.Fatalf("piece %p of %d bytes: byte %d is %d, want %d (overlap)", l.p, l.size, i, v, l.tag)
				}
			}
		}
	}
	for round := range 3000 {
		if len(all) > 0 && rng.Intn(5) < 2 {
			i := rng.Intn(len(all))
			require.NoError(t, d.MemFree(0, all[i].p, all[i].size))
			all = append(all[:i], all[i+1:]...)
			continue
		}
		size := 1 + rng.Intn(64<<10)
		if rng.Intn(8) == 0 {
			size = 1 + rng.Intn(arenaMax)
		}
		p, err := d.CommMemAlloc(0, size)
		require.NoError(t, err)
		require.Zero(t, uintptr(p)%minChunk, "alignment")
		ref := refOf(bytesAt(p, size))
		require.True(t, ref.shared(), "a %d-byte piece lies in shared memory", size)
		require.True(t, ref.holds(uintptr(p), size))
		tag := byte(round%250 + 1)
		b := bytesAt(p, size)
		for i := range b {
			b[i] = tag
		}
		all = append(all, live{p, size, tag})
		if round%200 == 0 {
			check()
		}
	}
	check()
	require.Greater(t, sharedBlocks.Load(), kept, "more than one arena was needed")
	for _, l := range all {
		require.NoError(t, d.MemFree(0, l.p, l.size))
	}
	require.Equal(t, kept, sharedBlocks.Load(), "empty arenas go back, but the last")
	require.Equal(t, allocatedBefore, Allocated())

	// One arena is left, whole again: its first piece starts it.
	commMem.mu.Lock()
	list := slices.Clone(commMem.list)
	var free []span
	if len(list) == 1 {
		free = slices.Clone(list[0].free)
	}
	commMem.mu.Unlock()
	require.Len(t, list, 1)
	a := list[0]
	require.Equal(t, []span{{0, arenaSize}}, free)
	p, err := d.CommMemAlloc(0, 100)
	require.NoError(t, err)
	require.Equal(t, a.base, p)
	require.NoError(t, d.MemFree(0, p, 100))
	require.Equal(t, kept, sharedBlocks.Load(), "freeing a piece at an arena's start kept the arena")
	q, err := d.CommMemAlloc(0, 100)
	require.NoError(t, err)
	require.Equal(t, a.base, q)
	r, err := d.CommMemAlloc(0, 100)
	require.NoError(t, err)
	*(*byte)(q), *(*byte)(r) = 7, 8 // still mapped
	// Freed twice, the arena's first piece is no live allocation: the
	// second free is ignored (logged), never the arena's unmapping.
	require.NoError(t, d.MemFree(0, q, 100))
	allocatedAfter := Allocated()
	require.NoError(t, d.MemFree(0, q, 100))
	require.Equal(t, allocatedAfter, Allocated())
	require.Equal(t, kept, sharedBlocks.Load())
	*(*byte)(r) = 9
	require.NoError(t, d.MemFree(0, r, 100))

	// From arenaMax on: an allocation of its own, freed with it.
	big, err := d.CommMemAlloc(0, arenaMax)
	require.NoError(t, err)
	ref := refOf(bytesAt(big, arenaMax))
	require.True(t, ref.shared())
	require.Equal(t, uintptr(big), ref.base)
	require.Equal(t, kept+1, sharedBlocks.Load())
	require.NoError(t, d.MemFree(0, big, arenaMax))
	require.Equal(t, kept, sharedBlocks.Load())
}

// With XCCL_SHARED_MEMORY=0 it is private memory.
func TestCommMemAllocPrivate(t *testing.T) {
	t.Setenv("XCCL_SHARED_MEMORY", "0")
	d := New()
	p, err := d.CommMemAlloc(0, 4096)
	require.NoError(t, err)
	require.False(t, refOf(bytesAt(p, 4096)).shared())
	require.NoError(t, d.MemFree(0, p, 4096))
}

// A free of a pointer the device never handed out (garbage, inside an
// allocation, Go's memory) or of one freed already is logged and ignored,
// private or shared: it reached free(3) and crashed the process (SIGSEGV,
// "free(): invalid pointer", "double free").
func TestFreeOfAPointerNeverHandedOutIsIgnored(t *testing.T) {
	for _, shared := range []string{"0", "1"} {
		t.Run("shared="+shared, func(t *testing.T) {
			t.Setenv("XCCL_SHARED_MEMORY", shared)
			d := New()
			SettleFrees() // other tests' frees that waited for their streams
			before := Allocated()
			small, err := d.MemAlloc(0, 1000)
			require.NoError(t, err)
			big, err := d.MemAlloc(0, 3<<20)
			require.NoError(t, err)
			host, err := d.HostAlloc(512)
			require.NoError(t, err)
			var goMem [64]byte
			addr := uintptr(0x7777000)
			garbage := *(*unsafe.Pointer)(unsafe.Pointer(&addr)) // an address nothing allocated
			for _, p := range []unsafe.Pointer{garbage, unsafe.Add(small, 256), unsafe.Add(big, 4096), unsafe.Pointer(&goMem[0])} {
				require.NoError(t, d.MemFree(0, p, 1000))
				require.NoError(t, d.HostFree(p, 1000))
			}
			require.NoError(t, d.SynchronizeDevice(0))
			*(*byte)(small), *(*byte)(big), *(*byte)(host) = 1, 2, 3 // still theirs
			require.NoError(t, d.MemFree(0, small, 1000))
			require.NoError(t, d.MemFree(0, big, 3<<20))
			require.NoError(t, d.HostFree(host, 512))
			require.NoError(t, d.SynchronizeDevice(0))
			require.Equal(t, before, Allocated())
			require.NoError(t, d.MemFree(0, small, 1000)) // twice
			require.NoError(t, d.HostFree(host, 512))
			require.NoError(t, d.SynchronizeDevice(0))
			require.Equal(t, before, Allocated())
		})
	}
}
