package host

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	rt "github.com/xccl-project/xccl/runtime"
)

// Rank processes whose buffers are device memory (shared allocations):
// the large collectives map each other's buffers and read and write them
// directly; the results match a reference computed here element by
// element, for every real type and reduction, in and out of place, odd
// counts, 2 and 3 ranks; and a rank that cannot map falls back to system
// calls with the same results.
func TestSharedDeviceMemoryAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	if !sharedMemory() {
		t.Skip("XCCL_SHARED_MEMORY=0")
	}
	for _, tc := range []struct {
		n      int
		broken string // ranks that cannot map their peers' memory
	}{{2, ""}, {3, ""}, {3, "1"}} {
		t.Run(fmt.Sprintf("n=%d/unmappable=%q", tc.n, tc.broken), func(t *testing.T) {
			r, err := StartRoot(60 * time.Second)
			require.NoError(t, err)
			defer r.Close()
			children := make([]*exec.Cmd, tc.n)
			outs := make([]strings.Builder, tc.n)
			for i := range children {
				c := exec.Command(os.Args[0], "-test.run=^$")
				c.Env = append(os.Environ(), "XCCL_TEST_CHILD=shared-memory", "XCCL_RANK="+strconv.Itoa(i),
					"XCCL_NRANKS="+strconv.Itoa(tc.n), "XCCL_UNIQUE_ID="+r.ID.Hex())
				if strings.Contains(tc.broken, strconv.Itoa(i)) {
					c.Env = append(c.Env, "XCCL_TEST_BREAK_MAPS=1")
				}
				c.Stdout, c.Stderr = &outs[i], &outs[i]
				require.NoError(t, c.Start())
				children[i] = c
			}
			for i, c := range children {
				err := c.Wait()
				require.NoError(t, err, "rank %d:\n%s", i, outs[i].String())
				require.Contains(t, outs[i].String(), "all correct", "rank %d", i)
			}
		})
	}
}

// childShared is one rank of TestSharedDeviceMemoryAcrossProcesses.
func childShared() int {
	id, err := ParseUniqueIDHex(os.Getenv("XCCL_UNIQUE_ID"))
	if err == nil && os.Getenv("XCCL_TEST_BREAK_MAPS") == "1" {
		testMapError = errors.New("mapping broken by the test")
	}
	rank, _ := strconv.Atoi(os.Getenv("XCCL_RANK"))
	n, _ := strconv.Atoi(os.Getenv("XCCL_NRANKS"))
	var c *Comm
	if err == nil {
		c, err = NewComm(id, n, rank, opts(60*time.Second))
	}
	if err == nil {
		err = sharedBattery(c, n, rank)
		if derr := c.Destroy(); err == nil {
			err = derr
		}
	}
	if err != nil {
		fmt.Println("rank", rank, err)
		return 1
	}
	fmt.Println("all correct")
	return 0
}

func sharedBattery(c *Comm, n, rank int) error {
	if !c.cma {
		fmt.Println("single copy not allowed here: the rings run")
	}
	const count = 262147 // odd, and 256 KiB or more in every type
	const size = 4 << 20
	sp, err := hostAlloc(size)
	if err != nil {
		return err
	}
	defer hostFree(sp, size)
	rp, err := hostAlloc(size)
	if err != nil {
		return err
	}
	defer hostFree(rp, size)
	send, recv := bytesAt(sp, size), bytesAt(rp, size)
	before := c.stats[statAllReduceCMA].Load()
	for _, dt := range []rt.DataType{rt.Float32, rt.Float64, rt.Int32, rt.Int64, rt.Int8, rt.Uint8} {
		for _, op := range []rt.ReduceOp{rt.Sum, rt.Product, rt.Max, rt.Min, rt.Avg} {
			for _, inPlace := range []bool{false, true} {
				for j := 0; j < count; j++ {
					putElem(dt, send, j, input(dt, rank, j))
					putElem(dt, recv, j, -1)
				}
				s := sp
				if inPlace {
					copy(recv, send[:count*dt.Size()])
					s = rp
				}
				if err := c.exec(&rt.Op{Kind: rt.OpAllReduce, Send: s, Recv: rp, Count: count, Type: dt, Red: op}); err != nil {
					return err
				}
				for j := 0; j < count; j++ {
					if got, want := getElem(dt, recv, j), reference(dt, op, n, j); !closeTo(dt, got, want) {
						return fmt.Errorf("all-reduce %v %v in place %v: element %d is %v, want %v", dt, op, inPlace, j, got, want)
					}
				}
			}
		}
	}
	if c.cma && c.stats[statAllReduceCMA].Load()-before != 60 {
		return fmt.Errorf("%d of 60 all-reduces went through the peers' memory", c.stats[statAllReduceCMA].Load()-before)
	}
	// The other collectives, float32: large, and mid-sized (24 KiB, where
	// they would otherwise carry their data in the fast boxes:
	// trySharedOthers), both through the peers' memory (mid-sized: 2 ranks).
	f := unsafe.Slice((*float32)(sp), size/4)
	g := unsafe.Slice((*float32)(rp), size/4)
	fill := func() {
		for j := range f {
			f[j], g[j] = float32(input(rt.Float32, rank, j)), -1
		}
	}
	for _, count := range []int{count, 6007} {
		per := count / n
		before := c.stats[statSingleCopy].Load()
		fill()
		if err := c.exec(&rt.Op{Kind: rt.OpAllGather, Send: sp, Recv: rp, Count: per, Type: rt.Float32}); err != nil {
			return err
		}
		for j := 0; j < per*n; j++ {
			if want := float32(input(rt.Float32, j/per, j%per)); g[j] != want {
				return fmt.Errorf("count %d: all-gather: element %d is %v, want %v", count, j, g[j], want)
			}
		}
		fill()
		if err := c.exec(&rt.Op{Kind: rt.OpReduceScatter, Send: sp, Recv: rp, Count: per, Type: rt.Float32, Red: rt.Sum}); err != nil {
			return err
		}
		for j := 0; j < per; j++ {
			if want := float32(reference(rt.Float32, rt.Sum, n, rank*per+j)); g[j] != want {
				return fmt.Errorf("count %d: reduce-scatter: element %d is %v, want %v", count, j, g[j], want)
			}
		}
		root := n - 1
		fill()
		if err := c.exec(&rt.Op{Kind: rt.OpBroadcast, Send: sp, Recv: sp, Count: count, Type: rt.Float32, Root: root}); err != nil {
			return err
		}
		for j := 0; j < count; j++ {
			if want := float32(input(rt.Float32, root, j)); f[j] != want {
				return fmt.Errorf("count %d: broadcast: element %d is %v, want %v", count, j, f[j], want)
			}
		}
		fill()
		if err := c.exec(&rt.Op{Kind: rt.OpReduce, Send: sp, Recv: rp, Count: count, Type: rt.Float32, Red: rt.Max, Root: root}); err != nil {
			return err
		}
		for j := 0; rank == root && j < count; j++ {
			if want := float32(reference(rt.Float32, rt.Max, n, j)); g[j] != want {
				return fmt.Errorf("count %d: reduce: element %d is %v, want %v", count, j, g[j], want)
			}
		}
		want := uint64(4)
		if count*4 < cmaMinBytes && n != 2 {
			want = 0 // mid-sized: only 2 ranks copy once (trySharedOthers)
		}
		if c.cma && c.stats[statSingleCopy].Load()-before != want {
			return fmt.Errorf("count %d: %d of %d collectives copied once", count, c.stats[statSingleCopy].Load()-before, want)
		}
	}
	// Buffers allocated, used and freed over and over (the address comes
	// back): peers drop the mappings of what was freed, and no stale one
	// is used.
	for i := 0; i < 3*peerMapsKept; i++ {
		p, err := hostAlloc(size)
		if err != nil {
			return err
		}
		b := unsafe.Slice((*float32)(p), count)
		for j := range b {
			b[j] = float32(rank + i)
		}
		err = c.exec(&rt.Op{Kind: rt.OpAllReduce, Send: p, Recv: p, Count: count, Type: rt.Float32, Red: rt.Sum})
		want := float32(n*(n-1)/2 + n*i)
		if err == nil && (b[0] != want || b[count-1] != want) {
			err = fmt.Errorf("all-reduce %d of a new buffer: %v, %v, want %v", i, b[0], b[count-1], want)
		}
		hostFree(p, size)
		if err != nil {
			return err
		}
	}
	for p, maps := range c.pmem.maps {
		if len(maps) > 3 { // send and receive buffers above, and the last loop's
			return fmt.Errorf("%d mappings of rank %d's memory kept, freed ones among them", len(maps), p)
		}
	}
	return nil
}

// input is rank's element j: small values whose sums and products are
// exact in every type tested.
func input(dt rt.DataType, rank, j int) float64 {
	h := rank*7 + j*13 + 3
	if dt == rt.Uint8 {
		return float64(h%5 + 1)
	}
	v := float64(h%7 - 3)
	if v == 0 {
		v = 2
	}
	if dt == rt.Float32 || dt == rt.Float64 {
		v /= 2
	}
	return v
}

// reference reduces the inputs of element j in float64 (integers: then
// wrapped to the type, and an average of integers truncated).
func reference(dt rt.DataType, op rt.ReduceOp, n, j int) float64 {
	acc := input(dt, 0, j)
	for r := 1; r < n; r++ {
		v := input(dt, r, j)
		switch op {
		case rt.Sum, rt.Avg:
			acc += v
		case rt.Product:
			acc *= v
		case rt.Max:
			acc = math.Max(acc, v)
		case rt.Min:
			acc = math.Min(acc, v)
		}
	}
	isInt := dt != rt.Float32 && dt != rt.Float64
	if isInt {
		acc = wrap(dt, acc)
	}
	if op == rt.Avg {
		acc /= float64(n)
		if isInt {
			acc = math.Trunc(acc)
		}
	}
	return acc
}

func wrap(dt rt.DataType, v float64) float64 {
	switch dt {
	case rt.Int8:
		return float64(int8(int64(v)))
	case rt.Uint8:
		return float64(uint8(int64(v)))
	case rt.Int32:
		return float64(int32(int64(v)))
	}
	return v
}

func closeTo(dt rt.DataType, got, want float64) bool {
	if dt == rt.Float32 {
		return math.Abs(got-want) <= 1e-6*math.Abs(want)
	}
	if dt == rt.Float64 {
		return math.Abs(got-want) <= 1e-12*math.Abs(want)
	}
	return got == want
}

func putElem(dt rt.DataType, b []byte, j int, v float64) {
	p := unsafe.Pointer(&b[j*dt.Size()])
	switch dt {
	case rt.Float32:
		*(*float32)(p) = float32(v)
	case rt.Float64:
		*(*float64)(p) = v
	case rt.Int32:
		*(*int32)(p) = int32(v)
	case rt.Int64:
		*(*int64)(p) = int64(v)
	case rt.Int8:
		*(*int8)(p) = int8(v)
	case rt.Uint8:
		*(*uint8)(p) = uint8(int64(v))
	}
}

func getElem(dt rt.DataType, b []byte, j int) float64 {
	p := unsafe.Pointer(&b[j*dt.Size()])
	switch dt {
	case rt.Float32:
		return float64(*(*float32)(p))
	case rt.Float64:
		return *(*float64)(p)
	case rt.Int32:
		return float64(*(*int32)(p))
	case rt.Int64:
		return float64(*(*int64)(p))
	case rt.Int8:
		return float64(*(*int8)(p))
	case rt.Uint8:
		return float64(*(*uint8)(p))
	}
	return math.NaN()
}
