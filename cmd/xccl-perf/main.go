// Command xccl-perf times xccl's collectives like nccl-tests does: a sweep
// of sizes, out-of-place and in-place, with nccl-tests' columns and bus
// bandwidth factors, and (-c 1) every element checked against inputs whose
// results are exactly predictable. It runs on any device: ranks are the
// processes xcclrun starts, or (-t N) goroutines of this process.
//
//	xcclrun -n 4 xccl-perf -b 8 -e 32M -f 4 -o all_reduce -d float
//	xccl-perf -t 2 -b 1K -e 1M -o all_gather -c 1 -json out.json
//	xccl-perf plot -o perf.png xccl=out.json mpi=mpi.txt
//	xccl-perf compare xccl=run1.txt,run2.txt mpi=mpi1.txt,mpi2.txt
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	goruntime "runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"

	_ "github.com/xccl-project/xccl/devices/all"
	"github.com/xccl-project/xccl/internal/perf"
	"github.com/xccl-project/xccl/launch"
	rt "github.com/xccl-project/xccl/runtime"
	"github.com/xccl-project/xccl/xccl"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "plot":
			os.Exit(plotMain(os.Args[2:]))
		case "compare":
			os.Exit(compareMain(os.Args[2:], os.Stdout))
		}
	}
	os.Exit(run(os.Args[1:], os.Stdout))
}

func parseSize(s string) (int, error) {
	mult := 1
	switch strings.ToUpper(s[len(s)-1:]) {
	case "K":
		mult = 1 << 10
	case "M":
		mult = 1 << 20
	case "G":
		mult = 1 << 30
	}
	if mult > 1 {
		s = s[:len(s)-1]
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("bad size %q (want bytes, or a number with K, M or G)", s)
	}
	return v * mult, nil
}

type sizeFlag struct{ v *int }

func (f sizeFlag) String() string {
	if f.v == nil {
		return ""
	}
	return strconv.Itoa(*f.v)
}
func (f sizeFlag) Set(s string) (err error) {
	if s == "" {
		return fmt.Errorf("empty size")
	}
	*f.v, err = parseSize(s)
	return err
}

func run(args []string, stdout io.Writer) int {
	fs := flag.NewFlagSet("xccl-perf", flag.ContinueOnError)
	cfg := perf.Config{MinBytes: 8, MaxBytes: 32 << 20}
	fs.Var(sizeFlag{&cfg.MinBytes}, "b", "smallest size in bytes (K, M, G suffixes)")
	fs.Var(sizeFlag{&cfg.MaxBytes}, "e", "largest size in bytes")
	fs.IntVar(&cfg.Factor, "f", 2, "multiply the size by this each step (-i without -f: 1)")
	fs.Var(sizeFlag{&cfg.Step}, "i", "add this many bytes each step (when -f is 1)")
	fs.IntVar(&cfg.Iters, "n", 20, "timed iterations per size (0: as the peers in bench/: 2000 below 1 MiB, 100 below 16 MiB, 20 above)")
	fs.IntVar(&cfg.Warmup, "w", 5, "warm-up iterations per size")
	check := fs.Int("c", 1, "check every element of the first call (1) or not (0)")
	coll := fs.String("o", "all_reduce", "collective: "+perf.CollNames())
	dtype := fs.String("d", "float", "data type: float, half, bfloat16, double, int8, uint8, int32, int64, …, or all (nccl-tests' ten)")
	redop := fs.String("r", "sum", "reduce op: sum, prod, max, min, avg, or all")
	root := fs.String("root", "0", "root rank of broadcast and reduce (all: each rank in turn)")
	fs.IntVar(&cfg.Batch, "batch", 1, "all_reduce: buffers of the size per iteration (times are per iteration)")
	fs.BoolVar(&cfg.Fused, "fused", false, "with -batch: one AllReduceFused call per iteration instead of one call per buffer")
	fs.Var(sizeFlag{&cfg.Alloc}, "alloc", "allocate each buffer with at least this many bytes, as a caching allocator's large blocks (host device: shared memory from 2M)")
	fs.BoolVar(&cfg.CommMem, "memalloc", false, "allocate the buffers with XcclMemAlloc (xccl.MemAlloc; host device: shared memory at every size), not plain device memory")
	fs.IntVar(&cfg.Settle, "settle", 1000, "barriers before the first size (a rank's first calls after init run slow)")
	threads := fs.Int("t", 1, "ranks as goroutines of this process (when not started by xcclrun)")
	device := fs.String("device", "", "device (default: XCCL_DEVICE, else auto)")
	useStream := fs.Bool("stream", false, "run on a created stream instead of the NULL stream")
	jsonOut := fs.String("json", "", "also write the rows as JSON to this file (- for stdout)")
	stats := fs.Bool("stats", false, "print the communicator's statistics (rank 0) at the end, and each size's phases where the engine counts them")
	cpuprof := fs.String("cpuprofile", "", "write a Go CPU profile of this process to this file (.RANK appended)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["i"] && !set["f"] { // as nccl-tests, whose -f is 1 unless given
		cfg.Factor = 1
	}
	var err error
	if cfg.Coll, err = perf.LookupColl(*coll); err == nil && cfg.MaxBytes < cfg.MinBytes {
		err = fmt.Errorf("-e %d is below -b %d", cfg.MaxBytes, cfg.MinBytes)
	}
	var types []rt.DataType
	var ops []rt.ReduceOp
	if err == nil {
		types, err = lookupAll(*dtype, allTypes, perf.LookupType)
	}
	if err == nil {
		ops, err = lookupAll(*redop, allOps, perf.LookupOp)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "xccl-perf:", err)
		return 2
	}
	if !cfg.Coll.Reduces {
		ops = ops[:1]
	}
	cfg.Check = *check != 0
	cfg.Phases = *stats
	dev, err := rt.Open(*device)
	if err != nil {
		fmt.Fprintln(os.Stderr, "xccl-perf:", err)
		return 1
	}
	// The runs: every type x op (of a reducing collective) the device
	// reduces; with one of each named, a refusal is an error.
	var runs []perf.Config
	for _, dt := range types {
		for _, op := range ops {
			if cfg.Coll.Reduces {
				if err := dev.Supports(dt, op); err != nil {
					if len(types) == 1 && len(ops) == 1 {
						fmt.Fprintf(os.Stderr, "xccl-perf: %s %s on %s: %v\n", dt, op, dev.Name(), err)
						return 2
					}
					continue
				}
			}
			c := cfg
			c.Type, c.Red = dt, op
			runs = append(runs, c)
		}
	}
	if len(runs) == 0 {
		fmt.Fprintf(os.Stderr, "xccl-perf: %s reduces none of -d %s with -r %s\n", dev.Name(), *dtype, *redop)
		return 2
	}
	cfg = runs[0]
	typeLabel := perf.TypeName(cfg.Type)
	if len(types) > 1 {
		typeLabel = "types " + *dtype
	}

	// Ranks are the processes of the job this one was started in (xcclrun,
	// mpirun, srun, a PMI launcher, torchrun: as XcclCommInitFromEnv reads
	// them), else -t goroutines of this process.
	env, err := launch.Detect(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "xccl-perf:", err)
		return 1
	}
	launched := env.Launcher != "" && env.Size > 1
	rank, nranks, local := 0, max(*threads, 1), max(*threads, 1)
	var id []byte
	if launched {
		if *threads > 1 {
			fmt.Fprintf(os.Stderr, "xccl-perf: -t %d: this process is one rank of a launched job (%s)\n", *threads, env)
			return 2
		}
		rank, nranks, local = env.Rank, env.Size, 1
	} else if id, err = xccl.GetUniqueID(dev); err != nil {
		fmt.Fprintln(os.Stderr, "xccl-perf:", err)
		return 1
	}

	var roots []int
	if !cfg.Coll.Rooted {
		roots = []int{0}
	} else if *root == "all" {
		for r := range nranks {
			roots = append(roots, r)
		}
	} else if r, err := strconv.Atoi(*root); err == nil {
		roots = []int{r}
	} else {
		fmt.Fprintf(os.Stderr, "xccl-perf: -root %q: want a rank or all\n", *root)
		return 2
	}

	if *cpuprof != "" {
		f, err := os.Create(fmt.Sprintf("%s.%d", *cpuprof, rank))
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "xccl-perf:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	var (
		mu      sync.Mutex
		rows    []perf.Result
		failed  bool
		statsJS string
	)
	var wg sync.WaitGroup
	for k := 0; k < local; k++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			if dev.Name() != "host" {
				// A vendor's current device is per OS thread. (Host ranks
				// stay free goroutines: a locked thread turns every yield
				// of the in-process ranks into a thread switch.)
				goruntime.LockOSThread()
				defer goruntime.UnlockOSThread()
			}
			c, cfg, err := join(dev, id, nranks, r, cfg, *useStream, launched)
			if err == nil {
				if *stats {
					c.EnableStats(true)
				}
				lead := r == 0
				if lead {
					header(stdout, dev.Name(), nranks, typeLabel, &cfg)
				}
				for _, run := range runs {
					for _, root := range roots {
						run.Dev, run.Stream, run.Root = cfg.Dev, cfg.Stream, root
						if err = perf.Run(c, run, func(res perf.Result) {
							if lead {
								mu.Lock()
								rows = append(rows, res)
								mu.Unlock()
								row(stdout, &res)
							}
						}); err != nil {
							break
						}
					}
					if err != nil {
						break
					}
				}
				if lead && *stats && err == nil {
					statsJS = c.StatsJSON()
				}
				if cfg.Stream != 0 {
					_ = dev.DestroyStream(cfg.Stream)
				}
				if derr := c.Destroy(); err == nil {
					err = derr
				}
			}
			if err != nil {
				mu.Lock()
				failed = true
				mu.Unlock()
				fmt.Fprintf(os.Stderr, "xccl-perf: rank %d: %v\n", r, err)
			}
		}(rank + k)
	}
	wg.Wait()
	if rank != 0 || failed {
		if failed {
			return 1
		}
		return 0
	}
	wrong := footer(stdout, rows)
	if statsJS != "" {
		fmt.Fprintf(stdout, "# stats (rank 0): %s\n", statsJS)
	}
	if *jsonOut != "" {
		if err := writeJSON(*jsonOut, stdout, dev.Name(), nranks, &cfg, rows); err != nil {
			fmt.Fprintln(os.Stderr, "xccl-perf:", err)
			return 1
		}
	}
	if wrong > 0 {
		return 1
	}
	return 0
}

// join makes rank's communicator: from the launcher's environment
// (launched), else of id with nranks goroutine ranks, rank's on its device.
func join(dev rt.Device, id []byte, nranks, rank int, cfg perf.Config, stream, launched bool) (c *xccl.Comm, _ perf.Config, err error) {
	if launched {
		if c, _, err = xccl.CommInitFromEnv(dev); err != nil {
			return nil, cfg, err
		}
		if cfg.Dev, err = dev.GetDevice(); err != nil {
			_ = c.Destroy()
			return nil, cfg, err
		}
	} else {
		cfg.Dev = rank % max(dev.DeviceCount(), 1)
		if err := dev.SetDevice(cfg.Dev); err != nil {
			return nil, cfg, err
		}
		if c, err = xccl.CommInitRank(dev, nranks, id, rank); err != nil {
			return nil, cfg, err
		}
	}
	if stream {
		if cfg.Stream, err = dev.CreateStream(); err != nil {
			_ = c.Destroy()
			return nil, cfg, err
		}
	}
	return c, cfg, nil
}

// nccl-tests' "all" of -d and -r.
var (
	allTypes = []string{"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16"}
	allOps   = []string{"sum", "prod", "max", "min", "avg"}
)

// lookupAll reads one name, or "all" as every name of all.
func lookupAll[T any](s string, all []string, lookup func(string) (T, error)) ([]T, error) {
	names := []string{s}
	if strings.EqualFold(s, "all") {
		names = all
	}
	out := make([]T, 0, len(names))
	for _, n := range names {
		v, err := lookup(n)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func header(w io.Writer, dev string, n int, types string, cfg *perf.Config) {
	fmt.Fprintf(w, "# xccl-perf %s: %d ranks, device %s, %s, %d iterations (%d warm-up), check %v\n",
		cfg.Coll.Name, n, dev, types, cfg.Iters, cfg.Warmup, cfg.Check)
	if cfg.Batch > 1 && cfg.Coll.Name == "all_reduce" {
		how := "separate calls"
		if cfg.Fused {
			how = "one AllReduceFused call"
		}
		fmt.Fprintf(w, "# every iteration: %d buffers of the size, %s\n", cfg.Batch, how)
	}
	fmt.Fprintf(w, "#%66s %33s\n", "out-of-place", "in-place")
	fmt.Fprintf(w, "# %10s %12s %8s %6s %6s %10s %8s %8s %6s %10s %8s %8s %6s\n",
		"size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong")
	fmt.Fprintf(w, "# %10s %12s %8s %6s %6s %10s %8s %8s %6s %10s %8s %8s %6s\n",
		"(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "")
}

func wrongStr(v int64) string {
	if v < 0 {
		return "N/A"
	}
	return strconv.FormatInt(v, 10)
}

func row(w io.Writer, r *perf.Result) {
	t := r.OutPlace
	fmt.Fprintf(w, "  %10d %12d %8s %6s %6d %10.2f %8.3f %8.3f %6s", r.Bytes, r.Count, r.Type, r.Op, r.Root,
		t.TimeUs, t.AlgBW, t.BusBW, wrongStr(t.Wrong))
	if ip := r.InPlace; ip != nil {
		fmt.Fprintf(w, " %10.2f %8.3f %8.3f %6s\n", ip.TimeUs, ip.AlgBW, ip.BusBW, wrongStr(ip.Wrong))
	} else {
		fmt.Fprintf(w, " %10s %8s %8s %6s\n", "-", "-", "-", "-")
	}
	if p := r.OutPlace.PhasesUs; len(p) > 0 {
		keys := make([]string, 0, len(p))
		for k := range p {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintf(w, "#   phases of rank 0, out-of-place, us per call:")
		for _, k := range keys {
			fmt.Fprintf(w, " %s %.2f", k, p[k])
		}
		fmt.Fprintln(w)
	}
}

// footer prints nccl-tests' summary lines and returns the wrong elements.
func footer(w io.Writer, rows []perf.Result) int64 {
	var wrong int64
	var bw float64
	k := 0
	for _, r := range rows {
		for _, t := range []*perf.Timing{&r.OutPlace, r.InPlace} {
			if t == nil {
				continue
			}
			wrong += max(t.Wrong, 0)
			bw += t.BusBW
			k++
		}
	}
	verdict := "OK"
	if wrong > 0 {
		verdict = "FAILED"
	}
	fmt.Fprintf(w, "# Out of bounds values : %d %s\n", wrong, verdict)
	if k > 0 {
		fmt.Fprintf(w, "# Avg bus bandwidth    : %.4f\n", bw/float64(k))
	}
	return wrong
}

// Report is the JSON form of one run.
type Report struct {
	Collective string        `json:"collective"`
	Device     string        `json:"device"`
	Ranks      int           `json:"ranks"`
	Type       string        `json:"type"`
	Iters      int           `json:"iters"`
	Rows       []perf.Result `json:"rows"`
}

func writeJSON(path string, stdout io.Writer, dev string, n int, cfg *perf.Config, rows []perf.Result) error {
	b, err := json.MarshalIndent(Report{Collective: cfg.Coll.Name, Device: dev, Ranks: n,
		Type: perf.TypeName(cfg.Type), Iters: cfg.Iters, Rows: rows}, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = stdout.Write(b)
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
