package host

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	rt "github.com/xccl-project/xccl/runtime"
)

// The bootstrap: the process that makes a unique id runs a root that every
// rank dials. The root sends a random challenge; the rank answers with an
// HMAC-SHA256 of it under the id's secret (the secret never crosses the
// wire) and its own challenge, which the root answers in turn. The root then
// checks job id, nranks and rank uniqueness, hands out the peer table, waits
// until every rank has set up its links, and releases them together.

// peerInfo is what each rank tells the root and the root hands to all.
type peerInfo struct {
	Rank   int    `json:"rank"`
	Addr   string `json:"addr"`   // TCP data listener
	Host   string `json:"host"`   // hostname + boot id: same value = same machine
	Pid    int    `json:"pid"`    // for liveness checks on the same machine
	Seg    string `json:"seg"`    // shared-memory segment path ("" = none)
	Mode   string `json:"mode"`   // transport mode the rank asks for
	Handle uint64 `json:"handle"` // random per-rank instance id
	// A token peers on this machine read with process_vm_readv to find
	// out whether single-copy transfers work (see cma.go).
	Token     uint64 `json:"token,omitempty"`
	TokenAddr uint64 `json:"token_addr,omitempty"`
	// The CPUs this process may run on (runtime.NumCPU): with every
	// rank's, all ranks decide alike whether each has one (roomy).
	CPUs int `json:"cpus,omitempty"`
}

type bootMsg struct {
	Nonce  []byte     `json:"nonce,omitempty"`
	Job    uint64     `json:"job,omitempty"`
	Rank   int        `json:"rank"`
	NRanks int        `json:"nranks,omitempty"`
	MAC    []byte     `json:"mac,omitempty"`
	Info   *peerInfo  `json:"info,omitempty"`
	Table  []peerInfo `json:"table,omitempty"`
	Ready  bool       `json:"ready,omitempty"`
	Go     bool       `json:"go,omitempty"`
	Err    string     `json:"err,omitempty"`
	Ch     int        `json:"ch,omitempty"`
	// A joining rank's time left until its own deadline (its timeout:
	// XCCL_TIMEOUT or its communicator's config), which the root's follows.
	Timeout time.Duration `json:"timeout_ns,omitempty"`
	// The UCX round (after the table, when some pair may use UCX): each
	// rank's UCP worker address, or why it has none; the root hands out all.
	UCX      [][]byte   `json:"ucx,omitempty"`
	UCXErr   string     `json:"ucx_err,omitempty"`
	UCXAddrs [][][]byte `json:"ucx_addrs,omitempty"`
	UCXErrs  []string   `json:"ucx_errs,omitempty"`
}

const maxFrame = 1 << 20

func writeMsg(c net.Conn, m *bootMsg) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	buf := make([]byte, 4+len(b))
	binary.BigEndian.PutUint32(buf, uint32(len(b)))
	copy(buf[4:], b)
	_, err = c.Write(buf)
	return err
}

func readMsg(c net.Conn) (*bootMsg, error) {
	var h [4]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(h[:])
	if n == 0 || n > maxFrame {
		return nil, fmt.Errorf("bad frame length %d", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		return nil, err
	}
	m := new(bootMsg)
	if err := json.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("bad frame: %v", err)
	}
	return m, nil
}

func mac(secret []byte, parts ...any) []byte {
	h := hmac.New(sha256.New, secret)
	for _, p := range parts {
		switch v := p.(type) {
		case []byte:
			var l [4]byte
			binary.BigEndian.PutUint32(l[:], uint32(len(v)))
			h.Write(l[:])
			h.Write(v)
		case string:
			h.Write([]byte(v))
			h.Write([]byte{0})
		case uint64:
			h.Write(binary.BigEndian.AppendUint64(nil, v))
		case int:
			h.Write(binary.BigEndian.AppendUint64(nil, uint64(v)))
		}
	}
	return h.Sum(nil)
}

func nonce() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return b
}

// Root is a running bootstrap root for one communicator.
type Root struct {
	ID   UniqueID
	ln   net.Listener
	done chan struct{}
	err  error
}

// Done is closed when the root has finished (success or failure).
func (r *Root) Done() <-chan struct{} { return r.done }

// Err is the root's outcome once Done is closed.
func (r *Root) Err() error { <-r.done; return r.err }

// Close stops a root early.
func (r *Root) Close() { _ = r.ln.Close() }

// StartRoot makes a unique id and serves its rendezvous until every rank has
// joined and set up, or timeout passes. Addresses come from XCCL_SOCKET_IFNAME.
func StartRoot(timeout time.Duration) (*Root, error) {
	a, err := bindAddr(rt.Load().SocketIf)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", netip.AddrPortFrom(a, 0).String())
	if err != nil {
		return nil, rt.WrapFailed(err, "bootstrap root: listen on %s", a)
	}
	ap, _ := netip.ParseAddrPort(ln.Addr().String())
	id, err := newUniqueID(netip.AddrPortFrom(a, ap.Port()))
	if err != nil {
		ln.Close()
		return nil, rt.WrapFailed(err, "bootstrap root: random")
	}
	return serveRoot(id, ln, timeout), nil
}

// StartRootAt serves the bootstrap of id, an id every rank of a launched
// job derives alike (LaunchID), listening on listen (host:port; ":port"
// for every address of this machine).
func StartRootAt(id UniqueID, listen string, timeout time.Duration) (*Root, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, rt.WrapFailed(err, "bootstrap root: listen on %s (another job on the port? set XCCL_ROOT_PORT)", listen)
	}
	return serveRoot(id, ln, timeout), nil
}

// servedJobs holds the jobs whose root in this process has finished, with
// its error (nil: it made its communicator): an id is good for one
// communicator, and a rank here that joins one again is refused at once
// (elsewhere it finds no root and waits out its timeout). It keeps the
// last servedKeep jobs: a process that makes communicators without end
// (splits make an id each) holds a bounded record, and a reuse of an id
// older than that waits out its timeout as elsewhere.
var servedJobs = &jobRecord{m: map[uint64]error{}}

const servedKeep = 1 << 14

type jobRecord struct {
	mu    sync.Mutex
	m     map[uint64]error
	order []uint64 // oldest first
}

// Store records job's end.
func (r *jobRecord) Store(job uint64, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.m[job]; !ok {
		r.order = append(r.order, job)
	}
	r.m[job] = err
	if len(r.order) > servedKeep {
		old := r.order[0]
		r.order = r.order[1:]
		delete(r.m, old)
	}
}

// Ended says whether job ended here (on record), and its error.
func (r *jobRecord) Ended(job uint64) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	err, ok := r.m[job]
	return ok, err
}

// Len is how many jobs are on record (tests).
func (r *jobRecord) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}

func serveRoot(id UniqueID, ln net.Listener, timeout time.Duration) *Root {
	r := &Root{ID: id, ln: ln, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = r.serve(timeout)
		servedJobs.Store(id.Job, r.err)
		if r.err != nil {
			rt.Log().Warn("bootstrap root failed", zap.Uint64("job", id.Job), zap.Error(r.err))
		}
	}()
	return r
}

type joined struct {
	conn     net.Conn
	info     peerInfo
	deadline time.Time // the rank's own (zero: it did not say)
}

// The root waits for the ranks until its timeout, or, once ranks have
// joined, until the earliest of their own deadlines (they give up at
// theirs, and with one gone the communicator cannot form: a
// communicator's config may set another timeout than the root's
// XCCL_TIMEOUT), and then tells those that came which never did.
func (r *Root) serve(timeout time.Duration) error {
	defer r.ln.Close()
	start := time.Now()
	deadline := start.Add(timeout)
	log := rt.Log().With(zap.Uint64("job", r.ID.Job))
	var (
		mu      sync.Mutex
		ranks   = map[int]*joined{}
		nranks  = -1
		full    = make(chan struct{})
		moved   = make(chan struct{}, 1) // the deadline moved
		broken  = make(chan string, 1)   // ranks disagree on nranks: the communicator can never form
		refused []string                 // why joins were refused, for the timeout's message
		over    string                   // why it ended early: later handshakes are refused
	)
	now := func() time.Time { // the deadline, now
		mu.Lock()
		defer mu.Unlock()
		return deadline
	}
	fail := func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		for _, j := range ranks {
			_ = writeMsg(j.conn, &bootMsg{Err: msg})
			j.conn.Close()
		}
	}
	// Accept until the table is complete (stopped: the listener closed).
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			c, err := r.ln.Accept()
			if err != nil {
				return
			}
			go func() {
				j, n, err := r.handshake(c, now())
				if err == nil {
					mu.Lock()
					switch {
					case over != "":
						err = fmt.Errorf("the bootstrap ended before rank %d joined: %s", j.info.Rank, over)
					case len(ranks) == nranks:
						err = fmt.Errorf("communicator is already complete")
					case nranks != -1 && n != nranks:
						// Every rank's call names the same nranks, or none can
						// complete: all of them fail now, not at the timeout.
						err = fmt.Errorf("rank %d says nranks=%d, but earlier ranks said %d", j.info.Rank, n, nranks)
						over = "mismatched nranks: " + err.Error()
						broken <- over
					case ranks[j.info.Rank] != nil:
						err = fmt.Errorf("rank %d has already joined (from %s); a second rank %d is refused", j.info.Rank, ranks[j.info.Rank].conn.RemoteAddr(), j.info.Rank)
					}
					if err == nil {
						nranks = n
						ranks[j.info.Rank] = j
						if len(ranks) == nranks {
							close(full)
						}
						if !j.deadline.IsZero() && (len(ranks) == 1 || j.deadline.Before(deadline)) {
							deadline = j.deadline
							select {
							case moved <- struct{}{}:
							default:
							}
						}
					}
					mu.Unlock()
				}
				if err != nil {
					mu.Lock()
					if len(refused) < 4 {
						refused = append(refused, err.Error())
					}
					mu.Unlock()
					log.Warn("bootstrap root refused a connection", zap.String("from", c.RemoteAddr().String()), zap.Error(err))
					_ = writeMsg(c, &bootMsg{Err: "xccl bootstrap root refused: " + err.Error()})
					c.Close()
				}
			}()
		}
	}()
	timedOut := false
	for waiting := true; waiting; {
		t := time.NewTimer(time.Until(now()))
		select {
		case <-full:
			waiting = false
		case <-moved:
		case why := <-broken:
			t.Stop()
			msg := "bootstrap: " + why
			fail(msg)
			// Ranks still on their way (from other processes, which cannot
			// see this root's verdict) are refused with the reason until
			// the deadline, instead of finding nobody listening.
			wait := time.NewTimer(time.Until(now()))
			select {
			case <-wait.C:
			case <-stopped: // Close
			}
			wait.Stop()
			return rt.Failedf("%s", msg)
		case <-t.C:
			select {
			case <-full: // complete at the same moment
				waiting = false
			default:
				timedOut = !time.Now().Before(now())
				waiting = !timedOut
			}
		}
		t.Stop()
	}
	r.ln.Close()
	final := now()
	if timedOut {
		mu.Lock()
		over = "it timed out"
		var missing []int
		for i := 0; i < max(nranks, 0); i++ {
			if ranks[i] == nil {
				missing = append(missing, i)
			}
		}
		why := strings.Join(refused, "; ")
		mu.Unlock()
		msg := fmt.Sprintf("bootstrap timed out after %v: ranks %v of %d never joined", time.Since(start).Round(time.Millisecond), missing, nranks)
		if why != "" {
			// A rank that came with another nranks (or twice) is the likely cause.
			msg += " (refused meanwhile: " + why + ")"
		}
		fail(msg)
		return rt.Failedf("%s", msg)
	}
	// Complete: hand out the table, then wait for every rank to be ready.
	table := make([]peerInfo, nranks)
	for i := range table {
		table[i] = ranks[i].info
	}
	for i := 0; i < nranks; i++ {
		if err := writeMsg(ranks[i].conn, &bootMsg{Table: table}); err != nil {
			msg := fmt.Sprintf("bootstrap: lost rank %d while sending the peer table: %v", i, err)
			fail(msg)
			return rt.Failedf("%s", msg)
		}
	}
	if ucxRound(table) {
		addrs, whys := make([][][]byte, nranks), make([]string, nranks)
		for i := 0; i < nranks; i++ {
			c := ranks[i].conn
			_ = c.SetReadDeadline(final)
			m, err := readMsg(c)
			msg := ""
			switch {
			case err != nil:
				msg = fmt.Sprintf("bootstrap: lost rank %d during setup: %v", i, err)
			case m.Err != "":
				msg = fmt.Sprintf("bootstrap: rank %d failed setup: %s", i, m.Err)
			}
			if msg != "" {
				fail(msg)
				return rt.Failedf("%s", msg)
			}
			addrs[i], whys[i] = m.UCX, m.UCXErr
		}
		for i := 0; i < nranks; i++ {
			_ = writeMsg(ranks[i].conn, &bootMsg{UCXAddrs: addrs, UCXErrs: whys})
		}
	}
	type res struct {
		rank int
		err  string
	}
	results := make(chan res, nranks)
	for i := 0; i < nranks; i++ {
		go func(i int) {
			c := ranks[i].conn
			_ = c.SetReadDeadline(final)
			m, err := readMsg(c)
			switch {
			case err != nil:
				results <- res{i, fmt.Sprintf("lost rank %d during setup: %v", i, err)}
			case m.Err != "":
				results <- res{i, fmt.Sprintf("rank %d failed setup: %s", i, m.Err)}
			default:
				results <- res{i, ""}
			}
		}(i)
	}
	// The first rank lost or failing during setup ends it for everyone at
	// once: the others are told (and stop waiting for its links).
	for i := 0; i < nranks; i++ {
		if x := <-results; x.err != "" {
			msg := "bootstrap: " + x.err
			fail(msg)
			return rt.Failedf("%s", msg)
		}
	}
	for i := 0; i < nranks; i++ {
		_ = writeMsg(ranks[i].conn, &bootMsg{Go: true})
		ranks[i].conn.Close()
	}
	log.Info("bootstrap complete", zap.Int("nranks", nranks))
	return nil
}

// handshake authenticates one dialer and reads its join request.
func (r *Root) handshake(c net.Conn, deadline time.Time) (*joined, int, error) {
	hd := time.Now().Add(10 * time.Second)
	if hd.After(deadline) {
		hd = deadline
	}
	_ = c.SetDeadline(hd)
	challenge := nonce()
	if err := writeMsg(c, &bootMsg{Nonce: challenge}); err != nil {
		return nil, 0, err
	}
	m, err := readMsg(c)
	if err != nil {
		return nil, 0, fmt.Errorf("bad hello: %v", err)
	}
	if m.Job != r.ID.Job {
		return nil, 0, fmt.Errorf("foreign unique id (job %x, this root serves job %x)", m.Job, r.ID.Job)
	}
	want := mac(r.ID.Secret[:], "xccl-join", m.Job, m.Rank, m.NRanks, challenge, m.Nonce)
	if !hmac.Equal(want, m.MAC) {
		return nil, 0, fmt.Errorf("wrong secret: challenge response does not verify")
	}
	if m.NRanks < 1 || m.Rank < 0 || m.Rank >= m.NRanks || m.Info == nil || len(m.Nonce) != 32 {
		return nil, 0, fmt.Errorf("bad join request: rank %d of %d", m.Rank, m.NRanks)
	}
	m.Info.Rank = m.Rank
	proof := mac(r.ID.Secret[:], "xccl-root", m.Job, m.Rank, m.Nonce, challenge)
	if err := writeMsg(c, &bootMsg{MAC: proof}); err != nil {
		return nil, 0, err
	}
	_ = c.SetDeadline(time.Time{})
	j := &joined{conn: c, info: *m.Info}
	if m.Timeout > 0 {
		j.deadline = time.Now().Add(m.Timeout)
	}
	return j, m.NRanks, nil
}

// rootGaveUp is the error for rank when id's root in this process has
// failed (servedJobs), else nil.
func rootGaveUp(id UniqueID, rank int) error {
	if _, err := servedJobs.Ended(id.Job); err != nil {
		return rt.Failedf("rank %d: the bootstrap root of this unique id (job %x) gave up: %v", rank, id.Job, err)
	}
	return nil
}

// joinRoot dials the root, proves the secret, checks the root's proof, and
// returns the peer table and the open control connection.
func joinRoot(id UniqueID, nranks, rank int, info peerInfo, deadline time.Time) ([]peerInfo, net.Conn, error) {
	if err := rootGaveUp(id, rank); err != nil {
		return nil, nil, err
	}
	if done, _ := servedJobs.Ended(id.Job); done {
		return nil, nil, rt.Errorf("rank %d: this unique id (job %x) was used already, by a communicator made in this process: "+
			"an id makes one communicator (get a new one from XcclGetUniqueId)", rank, id.Job)
	}
	if id.Root.Addr().IsLoopback() && id.Machine != 0 && id.Machine != machineHash() {
		return nil, nil, rt.Errorf("rank %d: the unique id names a bootstrap on loopback (%s) of another machine (or network namespace), "+
			"which this rank cannot reach: set XCCL_SOCKET_IFNAME (an interface or address the ranks reach each other on) "+
			"where the id is made, and on every rank", rank, id.Root)
	}
	var c net.Conn
	var err error
	for {
		d := net.Dialer{Deadline: deadline}
		c, err = d.Dial("tcp", id.Root.String())
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, nil, rt.Failedf("rank %d: cannot reach the bootstrap root %s: %v", rank, id.Root, err)
		}
		if err := rootGaveUp(id, rank); err != nil { // while this rank dialed
			return nil, nil, err
		}
		time.Sleep(50 * time.Millisecond) // the root may not be listening yet
	}
	fail := func(format string, a ...any) ([]peerInfo, net.Conn, error) {
		c.Close()
		return nil, nil, rt.Failedf("rank %d: bootstrap with root %s: %s", rank, id.Root, fmt.Sprintf(format, a...))
	}
	_ = c.SetDeadline(deadline)
	m, err := readMsg(c)
	if err != nil {
		return fail("no challenge: %v", err)
	}
	if len(m.Nonce) != 32 {
		return fail("bad challenge")
	}
	mine := nonce()
	err = writeMsg(c, &bootMsg{Job: id.Job, Rank: rank, NRanks: nranks, Nonce: mine, Info: &info, Timeout: time.Until(deadline),
		MAC: mac(id.Secret[:], "xccl-join", id.Job, rank, nranks, m.Nonce, mine)})
	if err != nil {
		return fail("send: %v", err)
	}
	r, err := readMsg(c)
	if err != nil {
		return fail("no answer: %v", err)
	}
	if r.Err != "" {
		return fail("%s", r.Err)
	}
	if !hmac.Equal(r.MAC, mac(id.Secret[:], "xccl-root", id.Job, rank, mine, m.Nonce)) {
		return fail("the root could not prove it holds the secret")
	}
	// Wait a little past our own deadline: a root that gives up at the
	// same moment sends the reason (which ranks never came) first.
	_ = c.SetDeadline(deadline.Add(2 * time.Second))
	t, err := readMsg(c)
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return fail("timed out waiting for the other %d ranks to join", nranks-1)
		}
		return fail("waiting for the other ranks: %v", err)
	}
	_ = c.SetDeadline(deadline)
	if t.Err != "" {
		return fail("%s", t.Err)
	}
	if len(t.Table) != nranks {
		return fail("peer table has %d entries, want %d", len(t.Table), nranks)
	}
	for i, p := range t.Table {
		if p.Rank != i {
			return fail("peer table entry %d names rank %d", i, p.Rank)
		}
	}
	return t.Table, c, nil
}

// tradeUCX sends this rank's UCP worker address (or why it has none, or
// a setup error that ends the communicator for every rank) and returns
// every rank's.
func tradeUCX(c net.Conn, rank, nranks int, addr [][]byte, why string, setupErr error, deadline time.Time) ([][][]byte, []string, error) {
	_ = c.SetDeadline(deadline)
	m := &bootMsg{UCX: addr, UCXErr: why}
	if setupErr != nil {
		m = &bootMsg{Err: setupErr.Error()}
	}
	if err := writeMsg(c, m); err != nil {
		return nil, nil, rt.Failedf("rank %d: bootstrap root lost: %v", rank, err)
	}
	if setupErr != nil {
		return nil, nil, setupErr
	}
	r, err := readMsg(c)
	switch {
	case err != nil:
		return nil, nil, rt.Failedf("rank %d: bootstrap root lost while trading UCX addresses: %v", rank, err)
	case r.Err != "":
		return nil, nil, rt.Failedf("rank %d: %s", rank, r.Err)
	case len(r.UCXAddrs) != nranks || len(r.UCXErrs) != nranks:
		return nil, nil, rt.Failedf("rank %d: bootstrap root sent %d UCX addresses, want %d", rank, len(r.UCXAddrs), nranks)
	}
	return r.UCXAddrs, r.UCXErrs, nil
}

// rootVerdict reads the root's last word on the control connection while
// this rank sets up its links: the go, or an error (another rank was lost
// during setup). An error closes ln, so a rank waiting for links from the
// lost rank stops at once instead of at its deadline.
type rootVerdict struct {
	msg *bootMsg
	err error
}

func watchRoot(c net.Conn, ln net.Listener, deadline time.Time) <-chan rootVerdict {
	out := make(chan rootVerdict, 1)
	go func() {
		_ = c.SetReadDeadline(deadline)
		m, err := readMsg(c)
		if err != nil || m.Err != "" {
			_ = ln.Close()
		}
		out <- rootVerdict{m, err}
	}()
	return out
}

// verdictWait is how long a rank whose setup failed waits for the root's
// account of the failure.
const verdictWait = 2 * time.Second

// finishJoin reports this rank's setup result and waits for the root's go
// (or its error, which names the rank that was lost).
func finishJoin(c net.Conn, rank int, setupErr error, verdict <-chan rootVerdict, deadline time.Time) error {
	defer c.Close()
	m := &bootMsg{Ready: true}
	if setupErr != nil {
		m = &bootMsg{Err: setupErr.Error()}
	}
	_ = c.SetWriteDeadline(deadline)
	werr := writeMsg(c, m)
	if setupErr != nil {
		// The root's account says more: this rank's failure may follow
		// another's (a peer that died, or failed first and removed its
		// segment before this rank mapped it). The root answers at once,
		// with the first failure it heard of; wait a moment for it.
		t := time.NewTimer(min(time.Until(deadline), verdictWait))
		defer t.Stop()
		select {
		case v := <-verdict:
			if v.err == nil && v.msg.Err != "" {
				return rt.Failedf("rank %d: %s", rank, v.msg.Err)
			}
		case <-t.C:
		}
		return setupErr
	}
	if werr != nil {
		return rt.Failedf("rank %d: bootstrap root lost: %v", rank, werr)
	}
	v := <-verdict
	if v.err != nil {
		return rt.Failedf("rank %d: bootstrap root lost while waiting for the other ranks: %v", rank, v.err)
	}
	if v.msg.Err != "" {
		return rt.Failedf("rank %d: %s", rank, v.msg.Err)
	}
	return nil
}
