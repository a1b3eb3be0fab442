package tests

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xccl-project/xccl/internal/fakevendor"
)

// readmeCommands returns the command lines of the README's sh blocks, with
// comments and blank lines dropped.
func readmeCommands(t *testing.T) []string {
	b, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	var cmds []string
	in := false
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```sh"):
			in = true
		case strings.HasPrefix(line, "```"):
			in = false
		case in:
			if i := strings.Index(line, " #"); i >= 0 {
				line = line[:i]
			}
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				cmds = append(cmds, line)
			}
		}
	}
	require.NotEmpty(t, cmds)
	return cmds
}

// Every command of the README's sh blocks is run here (or, where it cannot
// run on a test machine, the test says which test runs its equivalent):
// make targets as dry runs (make run for real, with 2 ranks), xcclrun and
// xccl-perf lines with the build directory and fake vendor libraries put in.
func TestReadmeCommands(t *testing.T) {
	dir := t.TempDir()
	libs, err := fakevendor.Build(dir)
	require.NoError(t, err)
	fill := strings.NewReplacer(
		"XCCL_HCCL_LIBRARY=…", "XCCL_HCCL_LIBRARY="+libs["fakehccl"],
		"XCCL_ACL_LIBRARY=…", "XCCL_ACL_LIBRARY="+libs["fakeascendcl"],
		"build/", build+"/",
		"./allreduce", filepath.Join(build, "allreduce"),
		"PYTHONPATH=python", "PYTHONPATH=../python",
		"examples/python/", "../examples/python/",
		" python3 ", " "+python3()+" ",
	)
	ran := 0
	for _, line := range readmeCommands(t) {
		t.Run(line, func(t *testing.T) {
			switch {
			case strings.Contains(line, "--nnodes"):
				t.Skip("runs on two machines: TestMultiNodeOverNetworkNamespaces runs this command line in two network namespaces")
			case strings.HasPrefix(line, "srun "):
				t.Skip("needs Slurm: TestExamplesWithSlurmVariables runs the examples with srun's variables")
			case strings.HasPrefix(line, "torchrun ") && !torchrunWorks():
				t.Skip("no working torchrun here (Debian's torch 1.13 torchrun fails on Python 3.11 before starting " +
					"workers): TestExamplesWithTorchrunVariables runs the examples with its variables")
			case strings.HasPrefix(line, "mpirun "):
				mpirun := needMpirun(t)
				args := strings.Fields(fill.Replace(line))[1:]
				args = append([]string{"--allow-run-as-root", "--oversubscribe", "--bind-to", "none"}, args...)
				out, err := run(t, 3*time.Minute, nil, mpirun, args...)
				require.NoError(t, err, out)
				require.Contains(t, out, "all results correct")
				require.NotContains(t, out, "WRONG")
			case strings.HasPrefix(line, "bench/gpu/"):
				t.Skip("needs an NVIDIA GPU, NCCL and the CUDA runtime: run by hand there (docs/perf/gpu-h100.txt)")
			case strings.Contains(line, "import paddle"):
				t.Skip("needs PaddlePaddle: TestPaddleLoaderEveryLayout loads the plugin the way Paddle does")
			case strings.HasPrefix(line, "mkdir -p plugins"):
				out, err := run(t, time.Minute, nil, "sh", "-c", "cd "+dir+" && "+fill.Replace(line))
				require.NoError(t, err, out)
				_, err = os.Stat(filepath.Join(dir, "plugins", "libxccl.so"))
				require.NoError(t, err)
			case strings.HasPrefix(line, "make "):
				targets := strings.Fields(line)[1:]
				out, err := run(t, time.Minute, nil, "make", append([]string{"-n", "-C", "..", "BUILD=" + build}, targets...)...)
				require.NoError(t, err, "a README make target must exist: %s", out)
				if len(targets) == 1 && targets[0] == "run" {
					out, err := run(t, 3*time.Minute, nil, "make", "-C", "..", "run", "NP=2", "BUILD="+build)
					require.NoError(t, err, out)
					require.Contains(t, out, "all results correct")
				}
			default:
				args := strings.Fields(fill.Replace(line))
				var env []string
				for len(args) > 0 && regexp.MustCompile(`^[A-Z_]+=`).MatchString(args[0]) {
					env, args = append(env, args[0]), args[1:]
				}
				require.NotEmpty(t, args, line)
				if strings.HasSuffix(args[0], "xcclrun") && !strings.Contains(args[0], "/") {
					args[0] = filepath.Join(build, "xcclrun")
				}
				out, err := run(t, 3*time.Minute, env, args[0], args[1:]...)
				require.NoError(t, err, out)
				require.NotContains(t, out, "WRONG")
			}
			ran++
		})
	}
	require.Positive(t, ran)
}

// torchrunWorks: torchrun is installed and starts a worker.
func torchrunWorks() bool {
	if _, err := exec.LookPath("torchrun"); err != nil {
		return false
	}
	cmd := exec.Command("torchrun", "--nproc_per_node", "1", "--no_python", "true")
	done := make(chan error, 1)
	if cmd.Start() != nil {
		return false
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err == nil
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		return false
	}
}

// python3 is Debian's interpreter (the one with python3-torch) where there
// is one, as the Makefile's PYTHON.
func python3() string {
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	return "python3"
}
