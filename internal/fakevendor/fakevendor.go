// Package fakevendor builds the fake vendor libraries the tests load
// through the real dlopen path: C files compiled with the system compiler
// into a directory (one Go runtime per process, so fakes are never Go).
package fakevendor

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Libs maps a library name (fakenccl, fakecudart, fakehip, fakehccl,
// fakeascendcl, fakecncl, fakecnrt, fakebkcl, fakexccl (mangled names),
// fakexpurt, fakesynapse, fakeoneccl, fakeze, fakemccl (MetaX and Moore
// Threads), fakemcruntime, fakemusart, fakeeccl, faketopsrt) to its path.
// Iluvatar CoreX and T-Head PPU use fakenccl and fakecudart: their
// libraries carry NCCL's and CUDA's names.
type Libs map[string]string

func srcDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "csrc")
}

// Build compiles every fake into dir.
func Build(dir string) (Libs, error) {
	src := srcDir()
	libs := Libs{}
	for _, b := range []struct{ name, file, def string }{
		{"fakenccl", "fake_nccl.c", "-DMEMALLOC"},
		{"fakecudart", "fake_rt.c", "-DRT=cuda"},
		{"fakehip", "fake_rt.c", "-DRT=hip"},
		{"fakehccl", "fake_hccl.c", ""},
		{"fakehcclsplit", "fake_hccl.c", "-DNO_COMM"},
		{"fakehcomm", "fake_hccl.c", "-DHCOMM"},
		{"fakeascendcl", "fake_acl.c", ""},
		{"fakecncl", "fake_cncl.c", ""},
		{"fakecnrt", "fake_cnrt.c", ""},
		{"fakebkcl", "fake_bkcl.c", ""},
		{"fakexccl", "fake_bkcl.c", "-DMANGLED"},
		{"fakexpurt", "fake_xpurt.c", ""},
		{"fakesynapse", "fake_synapse.c", ""},
		{"fakeoneccl", "fake_nccl.c", "-DPREFIX=oneccl -DIDSIZE=4096 -DSIZET_RANKS -DFINREG_NOT_IMPLEMENTED -DMEMALLOC"},
		{"fakeze", "fake_ze.c", ""},
		{"fakemccl", "fake_nccl.c", "-DPREFIX=mccl"},
		{"fakemcruntime", "fake_rt.c", "-DRT=mc -DMALLOCHOST_FLAGS"},
		{"fakemusart", "fake_rt.c", "-DRT=musa"},
		{"fakeeccl", "fake_nccl.c", "-DPREFIX=eccl -DNO_REDUCE64"},
		{"faketopsrt", "fake_rt.c", "-DRT=tops -DHOSTMALLOC"},
	} {
		out := filepath.Join(dir, "lib"+b.name+".so")
		args := []string{"-O2", "-shared", "-fPIC", "-pthread", "-Wall", "-Werror", "-Wno-unused-function", "-o", out, filepath.Join(src, b.file)}
		args = append(append(args, strings.Fields(b.def)...), "-ldl") // dlsym (the wait hook) before glibc 2.34
		if msg, err := exec.Command("cc", args...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("cc %s: %v\n%s", b.file, err, msg)
		}
		libs[b.name] = out
	}
	return libs, nil
}
