package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Two in-process ranks, every collective checked: nccl-tests' columns,
// "0 OK", and JSON rows that a plot turns into a PNG.
func TestPerfRunsChecksAndPlots(t *testing.T) {
	t.Setenv("XCCL_UNIQUE_ID", "")
	dir := t.TempDir()
	var runs []string
	for _, coll := range []string{"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall", "sendrecv"} {
		js := filepath.Join(dir, coll+".json")
		var out bytes.Buffer
		code := run([]string{"-t", "2", "-device", "host", "-b", "8", "-e", "64K", "-f", "16", "-n", "3", "-w", "1",
			"-o", coll, "-d", "bfloat16", "-r", "max", "-stats", "-json", js}, &out)
		require.Equal(t, 0, code, out.String())
		text := out.String()
		require.Contains(t, text, "# Out of bounds values : 0 OK", text)
		require.Contains(t, text, "time    algbw    busbw #wrong")
		require.Contains(t, text, "# stats (rank 0): {")
		var rep Report
		b, err := os.ReadFile(js)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &rep))
		require.Equal(t, coll, rep.Collective)
		require.Equal(t, 2, rep.Ranks)
		require.NotEmpty(t, rep.Rows)
		for _, r := range rep.Rows {
			require.Zero(t, r.OutPlace.Wrong)
		}
		runs = append(runs, coll+"="+js)
	}
	// A peers-style text table plots too.
	peer := filepath.Join(dir, "mpi.txt")
	require.NoError(t, os.WriteFile(peer, []byte("# peer=openmpi\n#  bytes count time_us algbw busbw wrong\n  8 2 0.40 0.02 0.02 0\n  1024 256 1.5 0.6 0.6 0\n"), 0o644))
	png := filepath.Join(dir, "perf.png")
	require.Equal(t, 0, plotMain(append([]string{"-o", png, "-title", "test"}, append(runs, "mpi="+peer)...)))
	b, err := os.ReadFile(png)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(b, []byte("\x89PNG")), "a PNG")
}

// A fused batch in pieces of one large allocation (-alloc: shared memory
// on the host device) is checked like every run, and copies once.
func TestPerfFusedBatchInOneAllocation(t *testing.T) {
	t.Setenv("XCCL_UNIQUE_ID", "")
	var out bytes.Buffer
	code := run([]string{"-t", "2", "-device", "host", "-b", "2K", "-e", "2K", "-n", "3", "-w", "1",
		"-batch", "10", "-fused", "-alloc", "4M", "-stats"}, &out)
	require.Equal(t, 0, code, out.String())
	require.Contains(t, out.String(), "# Out of bounds values : 0 OK", out.String())
	require.Contains(t, out.String(), `"allreduce.single_copy":10,"fusion.batches":10,"fusion.buffers":100`, out.String())
}

// -memalloc: buffers of their own (20 KiB) from XcclMemAlloc's memory,
// shared at every size, so the fused batches copy once as in -alloc 4M.
func TestPerfFusedBatchInCommMemory(t *testing.T) {
	t.Setenv("XCCL_UNIQUE_ID", "")
	for _, memalloc := range []bool{false, true} {
		var out bytes.Buffer
		args := []string{"-t", "2", "-device", "host", "-b", "2K", "-e", "2K", "-n", "3", "-w", "1", "-batch", "10", "-fused", "-stats"}
		if memalloc {
			args = append(args, "-memalloc")
		}
		code := run(args, &out)
		require.Equal(t, 0, code, out.String())
		require.Contains(t, out.String(), "# Out of bounds values : 0 OK", out.String())
		if memalloc {
			require.Contains(t, out.String(), `"allreduce.single_copy":10,`, out.String())
		} else {
			require.NotContains(t, out.String(), `"allreduce.single_copy"`, out.String())
		}
	}
}

// nccl-tests' sweeps: -d all, -r all and -root all run every type, op
// and root (a type x op the device does not reduce is left out); -i alone
// steps by adding, as nccl-tests' -f is 1 unless given.
func TestPerfSweepsAsNcclTests(t *testing.T) {
	t.Setenv("XCCL_UNIQUE_ID", "")
	var out bytes.Buffer
	code := run([]string{"-t", "2", "-device", "host", "-o", "reduce", "-d", "all", "-r", "all", "-root", "all",
		"-b", "8", "-e", "8", "-n", "2", "-w", "1", "-settle", "10"}, &out)
	require.Equal(t, 0, code, out.String())
	text := out.String()
	require.Contains(t, text, "# Out of bounds values : 0 OK", text)
	rows := 0
	seen := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		if f := strings.Fields(line); len(f) > 5 && !strings.HasPrefix(line, "#") {
			rows++
			seen[f[2]+" "+f[3]+" "+f[4]] = true
		}
	}
	require.Equal(t, 10*5*2, rows, text)
	require.True(t, seen["bfloat16 avg 1"] && seen["int8 product 0"] && seen["uint64 max 1"], text)

	out.Reset()
	code = run([]string{"-t", "2", "-device", "host", "-b", "8", "-e", "40", "-i", "8", "-n", "2", "-w", "1", "-settle", "10"}, &out)
	require.Equal(t, 0, code, out.String())
	var sizes []string
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); len(f) > 5 && !strings.HasPrefix(line, "#") {
			sizes = append(sizes, f[0])
		}
	}
	require.Equal(t, []string{"8", "16", "24", "32", "40"}, sizes, out.String())
}

func TestPerfRefusesBadArguments(t *testing.T) {
	t.Setenv("XCCL_UNIQUE_ID", "")
	for _, args := range [][]string{
		{"-o", "gather"}, {"-d", "float8"}, {"-r", "xor"}, {"-b", "1M", "-e", "1K"}, {"-b", "12Q"},
		{"-device", "host", "-d", "complex64", "-r", "max"}, {"-t", "2", "-o", "broadcast", "-root", "first"},
	} {
		var out bytes.Buffer
		require.Equal(t, 2, run(args, &out), strings.Join(args, " "))
	}
	require.Equal(t, 2, plotMain(nil))
	require.Equal(t, 1, plotMain([]string{"-o", filepath.Join(t.TempDir(), "x.png"), "missing=/nonexistent"}))
}
