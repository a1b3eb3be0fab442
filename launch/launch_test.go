package launch

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func env(kv map[string]string) Getenv { return func(k string) string { return kv[k] } }

func TestEachLauncher(t *testing.T) {
	cases := []struct {
		name                    string
		vars                    map[string]string
		launcher                string
		rank, size, local       int
		rootHost, rootFrom, key string
	}{
		{"alone", map[string]string{}, "", 0, 1, 0, "", "", ""},
		{"xcclrun", map[string]string{"XCCL_RANK": "2", "XCCL_NRANKS": "4", "XCCL_LOCAL_RANK": "2", "XCCL_UNIQUE_ID": "ab"},
			"xcclrun", 2, 4, 2, "", "", ""},
		{"torchrun", map[string]string{"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
			"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "r1"},
			"torchrun", 3, 4, 1, "127.0.0.1", "MASTER_ADDR, MASTER_PORT+1", "the job id and user (loopback)"},
		{"openmpi one machine", map[string]string{"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2",
			"OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "PMIX_NAMESPACE": "42"},
			"openmpi", 1, 2, 1, "127.0.0.1", "loopback: every rank is on this machine, port from the job id", "the job id and user (loopback)"},
		{"openmpi two machines, root given", map[string]string{"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4",
			"OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "XCCL_ROOT_ADDR": "10.0.0.1:4000", "XCCL_JOB_KEY": "k"},
			"openmpi", 3, 4, 1, "10.0.0.1", "XCCL_ROOT_ADDR", "XCCL_JOB_KEY"},
		{"slurm one node", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_LOCALID": "0",
			"SLURM_STEP_ID": "0", "SLURM_JOB_ID": "77", "SLURM_STEP_NUM_NODES": "1"},
			"slurm", 0, 2, 0, "127.0.0.1", "loopback: every rank is on this machine, port from the job id", "the job id and user (loopback)"},
		{"slurm two nodes", map[string]string{"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1",
			"SLURM_STEP_ID": "0", "SLURM_JOB_ID": "77", "SLURM_STEP_NUM_NODES": "2", "SLURM_STEP_NODELIST": "gpu[07-08]",
			"XCCL_JOB_KEY": "k"},
			"slurm", 5, 8, 1, "gpu07", "the first node of SLURM_STEP_NODELIST, port from the job id", "XCCL_JOB_KEY"},
		{"pmi", map[string]string{"PMI_RANK": "1", "PMI_SIZE": "3", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "3"},
			"pmi", 1, 3, 1, "127.0.0.1", "loopback: every rank is on this machine, port from the job id", "the job id and user (loopback)"},
		// torchrun inside a Slurm allocation: the batch script's SLURM_* are inherited.
		{"torchrun under slurm", map[string]string{"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1",
			"MASTER_ADDR": "localhost", "MASTER_PORT": "29500", "SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_STEP_ID": "batch"},
			"torchrun", 1, 2, 1, "localhost", "MASTER_ADDR, MASTER_PORT+1", "the job id and user (loopback)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, err := Detect(env(c.vars))
			require.NoError(t, err)
			require.Equal(t, c.launcher, e.Launcher)
			require.Equal(t, []int{c.rank, c.size, c.local}, []int{e.Rank, e.Size, e.LocalRank})
			require.Equal(t, c.rootHost, e.RootHost)
			require.Equal(t, c.rootFrom, e.RootFrom)
			require.Equal(t, c.key, e.KeyFrom)
			if c.rootHost != "" {
				require.NotZero(t, e.RootPort)
			}
		})
	}
}

func TestRootPorts(t *testing.T) {
	e, err := Detect(env(map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}))
	require.NoError(t, err)
	require.Equal(t, 29501, e.RootPort, "MASTER_PORT is torch's store: the root takes the next")
	e, err = Detect(env(map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "XCCL_ROOT_PORT": "31000"}))
	require.NoError(t, err)
	require.Equal(t, 31000, e.RootPort)
	ompi := func(job string) *Env {
		e, err := Detect(env(map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2",
			"OMPI_COMM_WORLD_LOCAL_SIZE": "2", "PMIX_NAMESPACE": job}))
		require.NoError(t, err)
		return e
	}
	a, b := ompi("1001"), ompi("1002")
	require.Equal(t, a.RootPort, ompi("1001").RootPort, "every rank derives the same port")
	require.NotEqual(t, a.RootPort, b.RootPort, "two jobs on one machine get different ports")
	for job := range 2000 { // never among Linux's ephemeral ports (32768 up), which outgoing connections hold
		p := ompi(fmt.Sprint(job)).RootPort
		require.True(t, p >= 20000 && p < 32768, "job %d: port %d", job, p)
	}
	require.NotEqual(t, a.Secret(0), b.Secret(0))
	require.NotEqual(t, a.Secret(0), a.Secret(1))
	require.NotEqual(t, a.JobID(0), a.JobID(1))
	require.NotZero(t, a.JobID(0))
}

func TestKeyDecidesTheSecret(t *testing.T) {
	base := map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "10.1.2.3", "MASTER_PORT": "29500"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	_, err := Detect(env(base))
	require.ErrorContains(t, err, "XCCL_JOB_KEY", "a root other machines reach needs a key")
	require.ErrorContains(t, err, "10.1.2.3:29501")
	a, err := Detect(env(with("XCCL_JOB_KEY", "one")))
	require.NoError(t, err)
	b, err := Detect(env(with("XCCL_JOB_KEY", "two")))
	require.NoError(t, err)
	require.NotEqual(t, a.Secret(0), b.Secret(0))
	f := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(f, []byte("one"), 0o600))
	c, err := Detect(env(with("XCCL_JOB_KEY_FILE", f)))
	require.NoError(t, err)
	require.Equal(t, a.Secret(0), c.Secret(0), "the same key from a file")
	require.Equal(t, "XCCL_JOB_KEY_FILE", c.KeyFrom)
	_, err = Detect(env(with("XCCL_JOB_KEY_FILE", filepath.Join(t.TempDir(), "missing"))))
	require.ErrorContains(t, err, "XCCL_JOB_KEY_FILE")
}

func TestErrorsNameTheVariable(t *testing.T) {
	for _, c := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"RANK": "4", "WORLD_SIZE": "4", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}, "rank 4 out of range for 4"},
		{map[string]string{"RANK": "x", "WORLD_SIZE": "4"}, `RANK="x"`},
		{map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "1"}, "MASTER_ADDR is not set"},
		{map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1"}, "MASTER_PORT is not set"},
		{map[string]string{"OMPI_COMM_WORLD_RANK": "0"}, "OMPI_COMM_WORLD_SIZE is not set"},
		{map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}, "XCCL_ROOT_ADDR"},
		{map[string]string{"PMI_RANK": "0", "PMI_SIZE": "4"}, "XCCL_ROOT_ADDR"},
		{map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_NODES": "2", "SLURM_STEP_NODELIST": "a[", "XCCL_JOB_KEY": "k"}, "SLURM_STEP_NODELIST"},
		{map[string]string{"XCCL_RANK": "1", "XCCL_NRANKS": "2"}, "XCCL_UNIQUE_ID is not set"},
		{map[string]string{"XCCL_LAUNCHER": "lsf"}, "XCCL_LAUNCHER"},
		{map[string]string{"XCCL_LAUNCHER": "slurm"}, "SLURM_PROCID is not set"},
		{map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1", "XCCL_ROOT_ADDR": "h:0"}, "XCCL_ROOT_ADDR"},
		{map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "2", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}, "local rank 2 of 2"},
	} {
		_, err := Detect(env(c.vars))
		require.ErrorContains(t, err, c.want, "%v", c.vars)
	}
}

func TestFirstHost(t *testing.T) {
	for in, want := range map[string]string{
		"node01":               "node01",
		"n[01-04,07],m3":       "n01",
		"a1,b2":                "a1",
		"rack[3-4]-gpu[10-12]": "rack3-gpu10",
		"gpu[7,9]":             "gpu7",
	} {
		got, err := FirstHost(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "x[", "x[]"} {
		_, err := FirstHost(bad)
		require.Error(t, err, bad)
	}
}
