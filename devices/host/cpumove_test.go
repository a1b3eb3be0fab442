package host

import (
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestParseCPUList(t *testing.T) {
	set := func(cpus ...int) (s unix.CPUSet) {
		for _, c := range cpus {
			s.Set(c)
		}
		return s
	}
	for in, want := range map[string]unix.CPUSet{
		"0":           set(0),
		"0-3\n":       set(0, 1, 2, 3),
		"0-1,8,10-11": set(0, 1, 8, 10, 11),
		"5,3":         set(3, 5),
		"2-2":         set(2),
	} {
		got, ok := parseCPUList(in)
		require.True(t, ok, "%q", in)
		require.Equal(t, want, got, "%q", in)
	}
	for _, bad := range []string{"", "\n", "a", "3-1", "-1", "0-", "1,,2", "0-70000"} {
		_, ok := parseCPUList(bad)
		require.False(t, ok, "%q", bad)
	}
	online, ok := onlineCPUs()
	require.True(t, ok)
	require.Positive(t, online.Count())
}
