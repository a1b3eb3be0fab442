// Package tests drives the real libxccl.so from C: the public header, the
// exported symbol list, the C examples under xcclrun, and bad input.
package tests

import (
	"debug/elf"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xccl-project/xccl/internal/fakevendor"
)

var build string // directory holding libxccl.so, xcclrun and the programs

func TestMain(m *testing.M) {
	os.Exit(func() int {
		build = os.Getenv("XCCL_BUILD_DIR")
		if build == "" {
			dir, err := os.MkdirTemp("", "xccl-build-")
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			defer os.RemoveAll(dir)
			build = dir
			cmd := exec.Command("make", "-C", "..", "build", "BUILD="+dir)
			if out, err := cmd.CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "make build: %v\n%s", err, out)
				return 1
			}
		}
		for _, prog := range []string{"abi_errors", "plugin_entries", "paddle_replay", "fast_path", "split", "groups"} {
			out, err := exec.Command("cc", "-O2", "-Wall", "-Wextra", "-Werror", "-std=c11", "-D_DEFAULT_SOURCE",
				"-I../include", "c/"+prog+".c", "-o", filepath.Join(build, prog),
				"-L"+build, "-lxccl", "-ldl", "-lpthread", "-Wl,-rpath,"+build).CombinedOutput()
			if err != nil {
				fmt.Fprintf(os.Stderr, "cc %s: %v\n%s", prog, err, out)
				return 1
			}
		}
		return m.Run()
	}())
}

// run runs a program with a deadline and returns its combined output.
func run(t *testing.T, timeout time.Duration, env []string, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	done := make(chan struct{})
	timer := time.AfterFunc(timeout, func() {
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
		}
		close(done)
	})
	out, err := cmd.CombinedOutput()
	if !timer.Stop() {
		<-done
		return string(out), fmt.Errorf("%s did not finish within %v (killed)", name, timeout)
	}
	return string(out), err
}

func TestHeaderCompilesAsC99AndCxx11(t *testing.T) {
	dir := t.TempDir()
	// Paddle's layouts and enum values, checked at compile time.
	src := `#include <stddef.h>
#include "xccl_paddle.h"
typedef char layout_904[sizeof(xccl_paddle_interface_904) == 904 ? 1 : -1];
typedef char layout_912[sizeof(xccl_paddle_interface_912) == 912 ? 1 : -1];
typedef char layout_1032[sizeof(xccl_paddle_interface_1032) == 1032 ? 1 : -1];
typedef char params_96[sizeof(CustomRuntimeParams) == 96 ? 1 : -1];
typedef char a2a_after_recv[offsetof(xccl_paddle_interface_912, xccl_all_to_all) == offsetof(xccl_paddle_interface_912, xccl_recv) + sizeof(void*) ? 1 : -1];
typedef char sz_first[offsetof(C_CCLRootId, sz) == 0 ? 1 : -1];
typedef char data_second[offsetof(C_CCLRootId, data) == sizeof(size_t) ? 1 : -1];
typedef char enums[(BOOL == 1 && BFLOAT16 == 13 && COMPLEX128 == 15 && PRODUCT == 4 && C_INTERNAL_ERROR == 4) ? 1 : -1];
int main(void) { C_CCLRootId id = {0, 0}; (void)id; return 0; }
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "h.c"), []byte(src), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "h.cc"), []byte(strings.Replace(src, "(void)", "()", 1)), 0o644))
	out, err := exec.Command("cc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I../include",
		"-c", filepath.Join(dir, "h.c"), "-o", filepath.Join(dir, "h.o")).CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command("c++", "-std=c++11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I../include",
		"-c", filepath.Join(dir, "h.cc"), "-o", filepath.Join(dir, "h2.o")).CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// The library exports exactly the functions its public headers declare, and
// has a soname.
func TestExportsExactlyTheHeader(t *testing.T) {
	var declared []string
	for _, h := range []string{"../include/xccl.h", "../include/xccl_paddle.h"} {
		hdr, err := os.ReadFile(h)
		require.NoError(t, err)
		for _, m := range regexp.MustCompile(`(?m)^(?:C_Status|void|const char\*) (\w+)\(`).FindAllStringSubmatch(string(hdr), -1) {
			declared = append(declared, m[1])
		}
	}
	sort.Strings(declared)
	require.NotEmpty(t, declared)

	f, err := elf.Open(filepath.Join(build, "libxccl.so"))
	require.NoError(t, err)
	defer f.Close()
	syms, err := f.DynamicSymbols()
	require.NoError(t, err)
	var exported []string
	for _, s := range syms {
		if s.Section != elf.SHN_UNDEF && elf.ST_TYPE(s.Info) == elf.STT_FUNC {
			exported = append(exported, s.Name)
		}
	}
	sort.Strings(exported)
	require.Equal(t, declared, exported, "exported functions must be exactly those declared in xccl.h and xccl_paddle.h")

	sonames, err := f.DynString(elf.DT_SONAME)
	require.NoError(t, err)
	require.Equal(t, []string{"libxccl.so.1"}, sonames)
}

func TestAllReduceExampleUnderXcclrun(t *testing.T) {
	out, err := run(t, 2*time.Minute, []string{"XCCL_TIMEOUT=60"}, filepath.Join(build, "xcclrun"), "-n", "4",
		filepath.Join(build, "allreduce"), "4194304")
	require.NoError(t, err, "%s", out)
	require.Equal(t, 4, strings.Count(out, "all results correct"), "%s", out)
	require.Contains(t, out, "busbw")
}

func TestCollectivesExampleUnderXcclrun(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 7} {
		out, err := run(t, 2*time.Minute, []string{"XCCL_TIMEOUT=60"}, filepath.Join(build, "xcclrun"), "-n", fmt.Sprint(n),
			filepath.Join(build, "collectives"), "10007")
		require.NoError(t, err, "n=%d\n%s", n, out)
		require.Equal(t, n, strings.Count(out, "collectives all correct"), "n=%d\n%s", n, out)
	}
}

func TestBadInputThroughTheCABI(t *testing.T) {
	out, err := run(t, time.Minute, []string{"XCCL_TIMEOUT=20"}, filepath.Join(build, "abi_errors"))
	require.NoError(t, err, "%s", out)
	require.NotContains(t, out, "FAIL")
	require.Contains(t, out, "bootstrap root refused a connection", "the stranger must be logged")
	logged := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "0x5cc1dead") && strings.Contains(line, "WARN") {
			logged++
		}
	}
	require.Equal(t, 1, logged, "the same failure three times in a row is logged once:\n%s", out)
}

// The host device's C fast path through the C entries (tests/c/fast_path.c):
// every collective checked, mismatches, groups, streams, destroyed handles.
func TestFastPathThroughTheCEntries(t *testing.T) {
	for _, n := range []int{2, 3} {
		out, err := run(t, 2*time.Minute, []string{"XCCL_TIMEOUT=60", "XCCL_DEVICE=host"}, filepath.Join(build, "xcclrun"), "-n", fmt.Sprint(n),
			filepath.Join(build, "fast_path"))
		require.NoError(t, err, "%d ranks:\n%s", n, out)
		require.NotContains(t, out, "FAIL")
		require.Equal(t, 5*n, strings.Count(out, "ok   rank"), "%d ranks:\n%s", n, out)
	}
}

// XcclCommSplit (tests/c/split.c) with 1 to 4 ranks: the new
// communicators' ranks and sums, a split of a split, the errors, a split in
// a group; then XcclCommInitAll of one rank in each process, and of three
// that one thread splits in a group.
func TestCommSplitThroughTheCEntries(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		out, err := run(t, 2*time.Minute, []string{"XCCL_TIMEOUT=60", "XCCL_DEVICE=host"}, filepath.Join(build, "xcclrun"), "-n", fmt.Sprint(n),
			filepath.Join(build, "split"))
		require.NoError(t, err, "%d ranks:\n%s", n, out)
		require.NotContains(t, out, "FAIL")
		require.Equal(t, 5*n, strings.Count(out, "ok   rank"), "%d ranks:\n%s", n, out)
	}
}

// Group semantics as NCCL's (tests/c/groups.c): grouping is each rank's
// own (fusion is off by default), a group runs its calls in order, a
// NULL-stream call of a group is synchronous, XcclAllReduceFused is one
// call in a group or not, groups of sends and receives (recorded in C)
// with other calls inside, refused calls, more than C records; a split
// takes the parent's timeout. With
// XCCL_FUSION_BYTES set, dependent calls are still not fused.
func TestGroupsThroughTheCEntries(t *testing.T) {
	for _, tc := range []struct {
		n    int
		env  []string
		args []string
		oks  int
	}{
		{2, nil, nil, 7}, {3, nil, nil, 7}, {3, []string{"XCCL_FUSION_BYTES=65536"}, []string{"fused"}, 6},
	} {
		env := append([]string{"XCCL_TIMEOUT=60", "XCCL_DEVICE=host"}, tc.env...)
		out, err := run(t, 2*time.Minute, env, filepath.Join(build, "xcclrun"), append([]string{"-n", fmt.Sprint(tc.n),
			filepath.Join(build, "groups")}, tc.args...)...)
		require.NoError(t, err, "%d ranks %v:\n%s", tc.n, tc.env, out)
		require.NotContains(t, out, "FAIL")
		require.Equal(t, tc.oks*tc.n, strings.Count(out, "ok   rank"), "%d ranks %v:\n%s", tc.n, tc.env, out)
	}
}

// xcclrun exits with the failing rank's status and kills the others.
func TestXcclrunFailsWhenARankFails(t *testing.T) {
	start := time.Now()
	out, err := run(t, time.Minute, nil, filepath.Join(build, "xcclrun"), "-n", "3", "-grace", "1s",
		"sh", "-c", `if [ "$XCCL_RANK" = 1 ]; then echo boom; exit 3; fi; sleep 30`)
	require.Error(t, err, "%s", out)
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 3, ee.ExitCode(), "%s", out)
	require.Contains(t, out, "[1] boom")
	require.Less(t, time.Since(start), 20*time.Second, "the other ranks must be killed")
}

// A stop (Ctrl-C, a scheduler's SIGTERM) ends the job even when its ranks
// do not end on the signal (a Python rank blocked in a call only raises
// KeyboardInterrupt when the call returns): SIGKILL after -grace, or at
// once on a second signal. The job's status is an error.
func TestXcclrunStopsRanksThatIgnoreTheSignal(t *testing.T) {
	for _, second := range []bool{false, true} {
		grace := "1s"
		if second {
			grace = "60s"
		}
		dir := t.TempDir()
		cmd := exec.Command(filepath.Join(build, "xcclrun"), "-n", "2", "-grace", grace, "sh", "-c",
			`trap "" INT TERM HUP; touch "$0/up.$XCCL_RANK"; sleep 60`, dir)
		require.NoError(t, cmd.Start())
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if up, _ := filepath.Glob(filepath.Join(dir, "up.*")); len(up) == 2 {
				break
			}
		}
		start := time.Now()
		require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
		if second {
			time.Sleep(200 * time.Millisecond)
			require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
		}
		err := cmd.Wait()
		require.Error(t, err, "a stopped job is no success")
		require.Less(t, time.Since(start), 15*time.Second, "second signal %v: the ranks must be killed", second)
	}
}

// Node 0 of a multi-node job whose other nodes never come ends its own
// ranks when the rendezvous times out (they would wait for the missing
// ranks until XCCL_TIMEOUT).
func TestXcclrunEndsItsRanksWhenNodesNeverCome(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0") // a free port
	require.NoError(t, err)
	master := l.Addr().String()
	require.NoError(t, l.Close())
	start := time.Now()
	out, err := run(t, time.Minute, nil, filepath.Join(build, "xcclrun"), "--nnodes", "2", "--node-rank", "0",
		"--master", master, "--rdzv-timeout", "2s", "-grace", "1s", "-n", "1", "sh", "-c", "sleep 60")
	require.Error(t, err, "%s", out)
	require.Contains(t, out, "nodes 1 never came")
	require.Less(t, time.Since(start), 20*time.Second, "%s", out)
}

// Ranks killed while they wait in setup (the job stopped with SIGTERM, as
// Ctrl-C or a scheduler stops it) leave their shared-memory segments, and
// no rank is left to remove them: xcclrun removes them once its ranks are
// gone. Every segment there was while they waited is gone, or still locked
// by a live owner (another test's).
func TestXcclrunLeavesNoSegmentsWhenStopped(t *testing.T) {
	pattern := fmt.Sprintf("/dev/shm/xccl-%d-*", os.Getuid())
	before, _ := filepath.Glob(pattern) // other tests' segments
	cmd := exec.Command(filepath.Join(build, "xcclrun"), "-n", "3", "-q", "sh", "-c",
		`if [ "$XCCL_RANK" = 2 ]; then sleep 30; fi; exec "$0" 1`, filepath.Join(build, "allreduce"))
	require.NoError(t, cmd.Start())
	var waiting []string
	for deadline := time.Now().Add(20 * time.Second); len(waiting) < 2 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		all, _ := filepath.Glob(pattern)
		waiting = slices.DeleteFunc(all, func(s string) bool { return slices.Contains(before, s) }) // ranks 0 and 1's
	}
	require.GreaterOrEqual(t, len(waiting), 2, "the waiting ranks' segments")
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	_ = cmd.Wait()
	for _, path := range waiting {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // removed
		}
		locked := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil
		_ = unix.Close(fd)
		require.True(t, locked, "%s is left, its owner gone", path)
	}
}

// The plugin loads as Paddle loads it, for every layout it serves, and runs
// Paddle's collective path with 1, 2 and 4 ranks.
func TestPaddleLoaderEveryLayout(t *testing.T) {
	lib := filepath.Join(build, "libxccl.so")
	for _, layout := range []string{"904", "912", "1032"} {
		for _, n := range []int{1, 2, 4} {
			out, err := run(t, 2*time.Minute, []string{"XCCL_TIMEOUT=60"}, filepath.Join(build, "xcclrun"), "-n", fmt.Sprint(n),
				filepath.Join(build, "paddle_loader"), lib, layout, t.TempDir())
			require.NoError(t, err, "layout %s n=%d\n%s", layout, n, out)
			require.Equal(t, n, strings.Count(out, "paddle loader OK (layout "+layout+")"), "layout %s n=%d\n%s", layout, n, out)
		}
	}
}

// paddleSkips runs paddle_loader with layout and env and returns its
// output, asserting that Paddle would skip the library: device_type left
// NULL (exit 3, Paddle's warning), nothing written into the table
// (paddle_loader fails otherwise).
func paddleSkips(t *testing.T, env []string, layout string) string {
	t.Helper()
	out, err := run(t, time.Minute, env, filepath.Join(build, "paddle_loader"), filepath.Join(build, "libxccl.so"), layout, t.TempDir())
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "%s", out)
	require.Equal(t, 3, ee.ExitCode(), "%s", out)
	require.Contains(t, out, "InitPlugin failed, please check the version compatibility")
	return out
}

// An unknown C_DeviceInterface size is refused the way Paddle expects:
// device_type stays NULL, a warning says why, the library is skipped.
func TestPaddleLoaderRefusesUnknownLayout(t *testing.T) {
	for _, layout := range []string{"1000", "896", "1040"} {
		require.Contains(t, paddleSkips(t, nil, layout), "C_DeviceInterface is "+layout+" bytes")
	}
}

// A device that cannot be opened (XCCL_DEVICE names a vendor whose
// library is not there) is refused as an unknown layout is, writing
// nothing into Paddle's table (it filled the table first).
func TestPaddleLoaderUnavailableDeviceWritesNothing(t *testing.T) {
	env := []string{"XCCL_DEVICE=nvidia", "XCCL_NCCL_LIBRARY=" + filepath.Join(t.TempDir(), "libnccl.so.2")}
	for _, layout := range []string{"904", "912", "1032"} {
		paddleSkips(t, env, layout)
	}
}

// Go's c-shared library is marked for static TLS: its TLS segment comes
// from glibc's small surplus when Paddle or Python dlopens it late, so it
// holds Go's own word and nothing of xccl's (the last error was a 1 KiB
// __thread array there).
func TestLibraryKeepsItsStaticTLSSmall(t *testing.T) {
	f, err := elf.Open(filepath.Join(build, "libxccl.so"))
	require.NoError(t, err)
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_TLS {
			require.LessOrEqual(t, p.Memsz, uint64(64), "the TLS segment is %d bytes", p.Memsz)
		}
	}
}

func TestPluginTableEntries(t *testing.T) {
	out, err := run(t, time.Minute, nil, filepath.Join(build, "plugin_entries"), filepath.Join(build, "libxccl.so"))
	require.NoError(t, err, "%s", out)
	require.Contains(t, out, " passed, 0 failed")
}

// The C examples through vendor devices, loading fake vendor libraries by
// their override variables: 4 processes, the real dlopen path.
func TestCExamplesThroughFakeVendors(t *testing.T) {
	libs, err := fakevendor.Build(t.TempDir())
	require.NoError(t, err)
	for _, v := range []struct {
		device string
		env    []string
	}{
		{"nvidia", []string{"XCCL_NCCL_LIBRARY=" + libs["fakenccl"], "XCCL_CUDART_LIBRARY=" + libs["fakecudart"]}},
		{"ascend", []string{"XCCL_HCCL_LIBRARY=" + libs["fakehccl"], "XCCL_ACL_LIBRARY=" + libs["fakeascendcl"]}},
		{"mlu", []string{"XCCL_CNCL_LIBRARY=" + libs["fakecncl"], "XCCL_CNRT_LIBRARY=" + libs["fakecnrt"]}},
		{"kunlun", []string{"XCCL_BKCL_LIBRARY=" + libs["fakebkcl"], "XCCL_XPURT_LIBRARY=" + libs["fakexpurt"]}},
		{"intelxpu", []string{"XCCL_SYNAPSE_LIBRARY=" + libs["fakesynapse"]}},
		{"metax", []string{"XCCL_METAX_MCCL_LIBRARY=" + libs["fakemccl"], "XCCL_MACA_LIBRARY=" + libs["fakemcruntime"]}},
		{"musa", []string{"XCCL_MUSA_MCCL_LIBRARY=" + libs["fakemccl"], "XCCL_MUSART_LIBRARY=" + libs["fakemusart"]}},
		{"iluvatar", []string{"XCCL_COREX_NCCL_LIBRARY=" + libs["fakenccl"], "XCCL_COREX_CUDART_LIBRARY=" + libs["fakecudart"]}},
		{"ppu", []string{"XCCL_PPU_NCCL_LIBRARY=" + libs["fakenccl"], "XCCL_PPU_CUDART_LIBRARY=" + libs["fakecudart"]}},
		{"gcu", []string{"XCCL_ECCL_LIBRARY=" + libs["fakeeccl"], "XCCL_TOPSRT_LIBRARY=" + libs["faketopsrt"]}},
	} {
		env := append([]string{"XCCL_DEVICE=" + v.device, "XCCL_TIMEOUT=60"}, v.env...)
		out, err := run(t, 2*time.Minute, env, filepath.Join(build, "xcclrun"), "-n", "4", filepath.Join(build, "allreduce"), "1048576")
		require.NoError(t, err, "%s\n%s", v.device, out)
		require.Equal(t, 4, strings.Count(out, "all results correct"), "%s\n%s", v.device, out)
		out, err = run(t, 2*time.Minute, env, filepath.Join(build, "xcclrun"), "-n", "4", filepath.Join(build, "collectives"), "1001")
		require.NoError(t, err, "%s\n%s", v.device, out)
		require.Equal(t, 4, strings.Count(out, "collectives all correct"), "%s\n%s", v.device, out)
		out, err = run(t, time.Minute, env, filepath.Join(build, "xcclrun"), "--probe")
		require.NoError(t, err, "%s", out)
		require.Contains(t, out, "capabilities of "+v.device)
	}
}

// make install lays out the library, headers, xcclrun and xccl.pc; a C++
// program builds against the installed copy with pkg-config and runs.
func TestInstallAndPkgConfigCxx(t *testing.T) {
	if _, err := exec.LookPath("pkg-config"); err != nil {
		t.Fatalf("pkg-config is needed (the CI script installs it): %v", err)
	}
	prefix := t.TempDir()
	out, err := exec.Command("make", "-C", "..", "install", "BUILD="+build, "PREFIX="+prefix).CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, f := range []string{"lib/libxccl.so.1", "lib/libxccl.so", "include/xccl.h", "include/xccl_paddle.h", "bin/xcclrun", "lib/pkgconfig/xccl.pc"} {
		_, err := os.Stat(filepath.Join(prefix, f))
		require.NoError(t, err, f)
	}
	pc := exec.Command("pkg-config", "--cflags", "--libs", "xccl")
	pc.Env = append(os.Environ(), "PKG_CONFIG_PATH="+filepath.Join(prefix, "lib/pkgconfig"))
	flags, err := pc.Output()
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "allreduce_cpp")
	args := append([]string{"-std=c++11", "-Wall", "-Wextra", "-Werror", "../examples/cpp/allreduce.cc", "-o", bin}, strings.Fields(string(flags))...)
	out, err = exec.Command("c++", args...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	res, err := run(t, time.Minute, nil, filepath.Join(prefix, "bin/xcclrun"), "-n", "3", bin)
	require.NoError(t, err, "%s", res)
	require.Equal(t, 3, strings.Count(res, "C++ all-reduce correct"), "%s", res)
}
