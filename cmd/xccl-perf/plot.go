package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// point is one size of one run.
type point struct{ bytes, timeUs, busbw float64 }

// series is one run: a label and its points.
type series struct {
	label  string
	points []point
}

// plotMain draws bus bandwidth and latency against size, one line per run:
//
//	xccl-perf plot -o perf.png -title "2 ranks" xccl=run.json mpi=mpi.txt
//
// A run is a file, or several (comma separated: each size takes the median
// time). A file is xccl-perf's JSON (-json), or a text table: xccl-perf's or
// nccl-tests' rows (size count type redop root time algbw busbw …) or the
// peers' rows in ../shared/bench/peers (bytes count time_us algbw busbw wrong).
func plotMain(args []string) int {
	fs := flag.NewFlagSet("xccl-perf plot", flag.ContinueOnError)
	out := fs.String("o", "perf.png", "output image (.png)")
	title := fs.String("title", "xccl-perf", "title")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: xccl-perf plot [-o out.png] [-title T] label=file ...")
		return 2
	}
	var runs []series
	for _, a := range fs.Args() {
		label, path, ok := strings.Cut(a, "=")
		if !ok {
			label, path = a, a
		}
		m, err := medianRun(strings.Split(path, ","))
		if err != nil {
			fmt.Fprintf(os.Stderr, "xccl-perf plot: %v\n", err)
			return 1
		}
		var pts []point
		for _, p := range m {
			pts = append(pts, p)
		}
		sort.Slice(pts, func(i, j int) bool { return pts[i].bytes < pts[j].bytes })
		runs = append(runs, series{label, pts})
	}
	if err := drawRuns(*out, *title, runs); err != nil {
		fmt.Fprintln(os.Stderr, "xccl-perf plot:", err)
		return 1
	}
	return 0
}

func readRun(path string) ([]point, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep Report
	if json.Unmarshal(b, &rep) == nil && len(rep.Rows) > 0 {
		var pts []point
		for _, r := range rep.Rows {
			pts = append(pts, point{float64(r.Bytes), r.OutPlace.TimeUs, r.OutPlace.BusBW})
		}
		return pts, nil
	}
	return parseTable(string(b))
}

// parseTable reads the rows of a text table (comment lines start with #;
// xcclrun's "[r] " prefixes are dropped).
func parseTable(text string) ([]point, error) {
	var pts []point
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 && strings.HasPrefix(f[0], "[") {
			f = f[1:]
		}
		if len(f) < 5 || strings.HasPrefix(f[0], "#") {
			continue
		}
		bytes, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		ti, bi := 2, 4 // peers: bytes count time_us algbw busbw wrong
		if _, err := strconv.ParseFloat(f[2], 64); err != nil {
			ti, bi = 5, 7 // nccl-tests: size count type redop root time algbw busbw
		}
		if len(f) <= bi {
			continue
		}
		t, err1 := strconv.ParseFloat(f[ti], 64)
		bw, err2 := strconv.ParseFloat(f[bi], 64)
		if err1 != nil || err2 != nil {
			continue
		}
		pts = append(pts, point{bytes, t, bw})
	}
	if len(pts) == 0 {
		return nil, fmt.Errorf("no rows found")
	}
	return pts, nil
}

func drawRuns(out, title string, runs []series) error {
	bw, lat := plot.New(), plot.New()
	bw.Title.Text = title + ": bus bandwidth"
	bw.Y.Label.Text = "busbw (GB/s)"
	lat.Title.Text = title + ": time"
	lat.Y.Label.Text = "time (µs)"
	for _, p := range []*plot.Plot{bw, lat} {
		p.X.Label.Text = "size (bytes)"
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Add(plotter.NewGrid())
		p.Legend.Top = true
		p.Legend.Left = true
	}
	lat.Y.Scale = plot.LogScale{}
	lat.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	for i, r := range runs {
		var xyBW, xyT plotter.XYs
		for _, p := range r.points {
			if p.bytes <= 0 {
				continue
			}
			xyBW = append(xyBW, plotter.XY{X: p.bytes, Y: p.busbw})
			if p.timeUs > 0 {
				xyT = append(xyT, plotter.XY{X: p.bytes, Y: p.timeUs})
			}
		}
		for _, pl := range []struct {
			p  *plot.Plot
			xy plotter.XYs
		}{{bw, xyBW}, {lat, xyT}} {
			if len(pl.xy) == 0 {
				continue
			}
			l, pts, err := plotter.NewLinePoints(pl.xy)
			if err != nil {
				return err
			}
			c := plotutil.Color(i)
			l.Color, pts.Color = c, c
			l.Width = vg.Points(1.5)
			pts.Shape = plotutil.Shape(i)
			pl.p.Add(l, pts)
			pl.p.Legend.Add(r.label, l, pts)
		}
	}
	const w, h = 16 * vg.Centimeter, 11 * vg.Centimeter
	img := vgimg.New(2*w, h)
	dc := draw.New(img)
	dc.Canvas = img
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Centimeter / 2}
	canvases := plot.Align([][]*plot.Plot{{bw, lat}}, tiles, dc)
	bw.Draw(canvases[0][0])
	lat.Draw(canvases[0][1])
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	var werr error
	switch {
	case strings.HasSuffix(out, ".png"):
		_, werr = vgimg.PngCanvas{Canvas: img}.WriteTo(f)
	default:
		werr = fmt.Errorf("unsupported image type %q (use .png)", out)
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	return werr
}
