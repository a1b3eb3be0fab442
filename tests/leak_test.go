package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// LeakSanitizer over C programs that use libxccl: the collectives example
// (1 and 3 ranks, communicators made and destroyed, streams, fusion,
// stats), the bad-input program and the plugin-table program must leave
// no C allocation unfreed at exit. A program that does leak is reported,
// so the check is not blind. Skipped where the compiler has no
// -fsanitize=leak.
func TestNoLeaksUnderLeakSanitizer(t *testing.T) {
	dir := t.TempDir()
	cc := func(out string, args ...string) error {
		args = append([]string{"-O1", "-g", "-fsanitize=leak", "-std=c11", "-D_DEFAULT_SOURCE", "-I../include", "-o", filepath.Join(dir, out)}, args...)
		args = append(args, "-L"+build, "-lxccl", "-ldl", "-lpthread", "-Wl,-rpath,"+build)
		b, err := exec.Command("cc", args...).CombinedOutput()
		if err != nil {
			t.Logf("cc: %s", b)
		}
		return err
	}
	leaky := filepath.Join(dir, "leaky.c")
	require.NoError(t, os.WriteFile(leaky, []byte(`#include <stdlib.h>
#include "xccl.h"
int main(void) { int v; XcclGetVersion(&v); void* volatile p = malloc(77); p = 0; return v < 0; }
`), 0o644))
	if err := cc("leaky", leaky); err != nil {
		t.Skip("no -fsanitize=leak here")
	}
	env := []string{"LSAN_OPTIONS=exitcode=23"}
	out, err := run(t, time.Minute, env, filepath.Join(dir, "leaky"))
	require.Error(t, err, "the sanitizer must catch a plain leak: %s", out)
	require.Contains(t, out, "LeakSanitizer")

	require.NoError(t, cc("collectives", "../examples/c/collectives.c"))
	require.NoError(t, cc("abi_errors", "c/abi_errors.c"))
	require.NoError(t, cc("plugin_entries", "c/plugin_entries.c"))
	for _, c := range []struct {
		name string
		args []string
	}{
		{"collectives 1 rank", []string{filepath.Join(dir, "collectives"), "1001"}},
		{"collectives 3 ranks", []string{filepath.Join(build, "xcclrun"), "-n", "3", filepath.Join(dir, "collectives"), "1001"}},
		{"abi_errors", []string{filepath.Join(dir, "abi_errors")}},
		{"plugin_entries", []string{filepath.Join(dir, "plugin_entries")}},
	} {
		out, err := run(t, 2*time.Minute, append(env, "XCCL_TIMEOUT=20"), c.args[0], c.args[1:]...)
		require.NoError(t, err, "%s: %s", c.name, out)
		require.NotContains(t, out, "LeakSanitizer", c.name)
	}
}
