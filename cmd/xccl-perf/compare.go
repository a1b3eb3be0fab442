package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// compareMain prints one table of times per size: the first run is the
// subject, every other a peer, with the ratio peer time / subject time
// (above 1: the subject is faster). A run may list several files (comma
// separated, e.g. repetitions): each size then takes the median time.
//
//	xccl-perf compare xccl=a.txt,b.txt mpi=m1.txt,m2.txt gloo=g.txt
func compareMain(args []string, w io.Writer) int {
	fs := flag.NewFlagSet("xccl-perf compare", flag.ContinueOnError)
	title := fs.String("title", "", "a title line")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() < 2 {
		fmt.Fprintln(os.Stderr, "usage: xccl-perf compare [-title T] subject=file[,file…] peer=file[,file…] …")
		return 2
	}
	var labels []string
	var runs []map[int]point
	for _, a := range fs.Args() {
		label, files, ok := strings.Cut(a, "=")
		if !ok {
			fmt.Fprintf(os.Stderr, "xccl-perf compare: %q is not label=file[,file…]\n", a)
			return 2
		}
		m, err := medianRun(strings.Split(files, ","))
		if err != nil {
			fmt.Fprintf(os.Stderr, "xccl-perf compare: %s: %v\n", label, err)
			return 1
		}
		labels, runs = append(labels, label), append(runs, m)
	}
	var sizes []int
	for b := range runs[0] {
		sizes = append(sizes, b)
	}
	sort.Ints(sizes)
	if *title != "" {
		fmt.Fprintf(w, "# %s\n", *title)
	}
	fmt.Fprintf(w, "# %10s %12s %9s", "bytes", labels[0]+" µs", "busbw")
	for _, l := range labels[1:] {
		fmt.Fprintf(w, " %12s %9s", l+" µs", l+"/"+labels[0])
	}
	fmt.Fprintln(w)
	for _, b := range sizes {
		s := runs[0][b]
		fmt.Fprintf(w, "  %10d %12.2f %9.3f", b, s.timeUs, s.busbw)
		for _, r := range runs[1:] {
			if p, ok := r[b]; ok && s.timeUs > 0 {
				fmt.Fprintf(w, " %12.2f %9.2f", p.timeUs, p.timeUs/s.timeUs)
			} else {
				fmt.Fprintf(w, " %12s %9s", "-", "-")
			}
		}
		fmt.Fprintln(w)
	}
	return 0
}

// medianRun reads every file of a run and keeps, per size, the median
// time (and the bus bandwidth that goes with it).
func medianRun(files []string) (map[int]point, error) {
	all := map[int][]point{}
	for _, f := range files {
		pts, err := readRun(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", f, err)
		}
		for _, p := range pts {
			all[int(p.bytes)] = append(all[int(p.bytes)], p)
		}
	}
	out := map[int]point{}
	for b, ps := range all {
		sort.Slice(ps, func(i, j int) bool { return ps[i].timeUs < ps[j].timeUs })
		out[b] = ps[len(ps)/2]
	}
	return out, nil
}
