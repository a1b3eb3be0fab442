package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"
)

// Multi-node jobs: xcclrun runs once per node with the same -n, --nnodes
// and --master; node 0 makes the unique id and hands it to the other
// nodes' xcclrun over one TCP connection each (line protocol below), like
// torchrun's rendezvous. The master port must be on a network the job
// trusts: whoever reaches it in time gets the id, and the id is the key of
// the job's bootstrap.
//
//	client: "xcclrun1 nnodes=<N> node=<R> nprocs=<n>\n"
//	server: "ok <device> <hex id>\n" or "error <why>\n"

const rendezvousHello = "xcclrun1"

// localIPFor is the address this machine uses to reach master: the one the
// ranks should listen on (XCCL_SOCKET_IFNAME) in a multi-node job.
func localIPFor(master string, deadline time.Time) (string, error) {
	var lastErr error
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", master, time.Until(deadline))
		if err == nil {
			ip := c.LocalAddr().(*net.TCPAddr).IP.String()
			_ = c.Close()
			return ip, nil
		}
		lastErr = err
		time.Sleep(200 * time.Millisecond)
	}
	return "", fmt.Errorf("cannot reach the master %s: %v", master, lastErr)
}

// serveID listens on master and gives the id to nodes 1..nnodes-1, each
// once, until all have it or the deadline passes; done reports the end.
func serveID(master string, nnodes, nprocs int, device, idHex string, deadline time.Time) (done <-chan error, err error) {
	ln, err := net.Listen("tcp", master)
	if err != nil {
		return nil, fmt.Errorf("listen on the master address %s: %v", master, err)
	}
	out := make(chan error, 1)
	go func() {
		defer ln.Close()
		_ = ln.(*net.TCPListener).SetDeadline(deadline)
		served := map[int]bool{}
		for len(served) < nnodes-1 {
			c, err := ln.Accept()
			if err != nil {
				missing := []string{}
				for r := 1; r < nnodes; r++ {
					if !served[r] {
						missing = append(missing, fmt.Sprint(r))
					}
				}
				out <- fmt.Errorf("nodes %s never came for the unique id: %v", strings.Join(missing, ", "), err)
				return
			}
			node, err := answer(c, nnodes, nprocs, device+" "+idHex, served)
			if errors.Is(err, errNoHello) {
				continue // a node's xcclrun learning its address (localIPFor)
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "xcclrun: refused a node at %s: %v\n", c.RemoteAddr(), err)
				continue
			}
			served[node] = true
		}
		out <- nil
	}()
	return out, nil
}

// errNoHello: the connection closed before it said anything.
var errNoHello = errors.New("closed without a hello")

func answer(c net.Conn, nnodes, nprocs int, reply string, served map[int]bool) (int, error) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err == io.EOF && line == "" {
		return 0, errNoHello
	}
	if err != nil {
		return 0, err
	}
	var nn, node, np int
	if _, err := fmt.Sscanf(line, rendezvousHello+" nnodes=%d node=%d nprocs=%d\n", &nn, &node, &np); err != nil {
		return 0, fmt.Errorf("not an xcclrun hello: %q", strings.TrimSpace(line))
	}
	var why string
	switch {
	case nn != nnodes:
		why = fmt.Sprintf("it runs --nnodes %d, the master %d", nn, nnodes)
	case np != nprocs:
		why = fmt.Sprintf("it runs -n %d, the master %d", np, nprocs)
	case node < 1 || node >= nnodes:
		why = fmt.Sprintf("node rank %d is out of range [1, %d)", node, nnodes)
	case served[node]:
		why = fmt.Sprintf("node rank %d already came", node)
	}
	if why != "" {
		fmt.Fprintf(c, "error %s\n", why)
		return 0, errors.New(why)
	}
	_, err = fmt.Fprintf(c, "ok %s\n", reply)
	return node, err
}

// fetchID asks the master for the device and id, retrying until the
// deadline (node 0 may start later).
func fetchID(master string, nnodes, node, nprocs int, deadline time.Time) (device, idHex string, err error) {
	var lastErr error
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", master, time.Until(deadline))
		if err != nil {
			lastErr = err
			time.Sleep(200 * time.Millisecond)
			continue
		}
		_ = c.SetDeadline(deadline)
		fmt.Fprintf(c, "%s nnodes=%d node=%d nprocs=%d\n", rendezvousHello, nnodes, node, nprocs)
		line, err := bufio.NewReader(c).ReadString('\n')
		_ = c.Close()
		if err != nil {
			lastErr = err
			continue
		}
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, "ok "); ok {
			if device, idHex, ok = strings.Cut(rest, " "); ok {
				return device, idHex, nil
			}
		}
		return "", "", fmt.Errorf("the master refused node %d: %s", node, strings.TrimPrefix(line, "error "))
	}
	return "", "", fmt.Errorf("no unique id from the master %s: %v", master, lastErr)
}
