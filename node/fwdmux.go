package node

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Forwarded writes multiplexed on one connection (protocol byte 'M'): a
// follower keeps one connection to the leader, and every write of its
// clients goes over it at once, each answered as it commits, in any
// order. The messages are forward.go's, with an ID the answer repeats.
//
// With 'F' (one write at a time per connection) each forwarded write
// costs a read and a write on each side and a wake-up of a goroutine
// parked on its own socket; here the leader reads a burst of writes with
// one read and answers those that commit together with one write, and so
// does the follower. The leader answers 'M' with one byte, 'M', before
// anything else; an older leader closes the connection instead, and the
// follower then forwards to that address with 'F' for fwdMuxRetry.
//
// The retry rules are forward.go's: a write that could not be sent, or
// whose connection was down before it was, is errUnsent; one whose answer
// did not come (the connection failed, or fwdAnswerTimeout passed) is
// errAmbiguous, and the connection is closed, failing every write in
// flight on it the same way, so that a silent leader costs one timeout,
// not one per write. Commands of fwdMuxMax bytes or more (a batch of tool
// metadata) keep 'F' and a connection of their own: a large message would
// hold up the writes behind it.

const (
	protoForwardMux byte = 'M'
	// fwdMuxMax: commands from this size on are forwarded with 'F'.
	fwdMuxMax = 1 << 20
	// fwdMuxInflight bounds the writes the leader applies at once for one
	// connection; the next waits, and its sender's TCP with it.
	fwdMuxInflight = 1024
	// fwdMuxRetry is how long a follower forwards with 'F' to a leader
	// that refused 'M' before it tries 'M' again (the leader may have been
	// upgraded).
	fwdMuxRetry = time.Minute
)

// fwdMuxes holds a follower's multiplexed connections, one per leader
// address, and the addresses that refused 'M'.
type fwdMuxes struct {
	mu      sync.Mutex
	conns   map[string]*muxClient
	dialing map[string]*muxDial
	legacy  map[string]time.Time // refused 'M' at
}

// muxClient is one multiplexed connection to a leader.
type muxClient struct {
	c    net.Conn
	wmu  sync.Mutex // one message written at a time
	mu   sync.Mutex
	next uint64
	// calls are the writes waiting for their answers, by ID.
	calls map[uint64]chan fwdResponse
	done  chan struct{} // closed when the connection failed
	err   error         // why
}

// fwdMuxConn returns the connection to addr, dialling it when there is
// none; writes that find a dial under way wait for it and share its
// outcome, so a leader that does not answer costs one dial timeout, not
// one per write. It returns (nil, nil) when addr refused 'M' within
// fwdMuxRetry.
func (n *Node) fwdMuxConn(addr string, timeout time.Duration) (*muxClient, error) {
	m := &n.fwdMux
	m.mu.Lock()
	if mc := m.currentLocked(addr); mc != nil {
		m.mu.Unlock()
		return mc, nil
	}
	if at, refused := m.legacy[addr]; refused && time.Since(at) < fwdMuxRetry {
		m.mu.Unlock()
		return nil, nil
	}
	if d := m.dialing[addr]; d != nil {
		m.mu.Unlock()
		<-d.done
		return d.mc, d.err
	}
	d := &muxDial{done: make(chan struct{})}
	if m.dialing == nil {
		m.dialing = map[string]*muxDial{}
	}
	m.dialing[addr] = d
	m.mu.Unlock()

	d.mc, d.err = n.dialMux(addr, timeout)
	m.mu.Lock()
	delete(m.dialing, addr)
	switch {
	case d.mc != nil:
		if m.conns == nil {
			m.conns = map[string]*muxClient{}
		}
		m.conns[addr] = d.mc
		delete(m.legacy, addr)
	case d.err == nil: // refused
		if m.legacy == nil {
			m.legacy = map[string]time.Time{}
		}
		m.legacy[addr] = time.Now()
	}
	m.mu.Unlock()
	close(d.done)
	if d.mc != nil {
		go d.mc.readLoop(n, addr)
	}
	return d.mc, d.err
}

// muxDial is a dial under way and, once done is closed, its outcome.
type muxDial struct {
	done chan struct{}
	mc   *muxClient
	err  error
}

// dialMux dials addr with 'M' and waits for the leader's 'M'. It returns
// (nil, nil) when the leader closed the connection instead: it does not
// speak 'M'.
func (n *Node) dialMux(addr string, timeout time.Duration) (*muxClient, error) {
	d := min(timeout, fwdDialTimeout)
	c, err := n.dialCluster(addr, protoForwardMux, d)
	if err != nil {
		return nil, err
	}
	c.SetReadDeadline(time.Now().Add(d))
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil || b[0] != protoForwardMux {
		c.Close()
		if err != nil && timeoutErr(err) {
			return nil, fmt.Errorf("dial %s: no answer to the protocol byte: %w", addr, err)
		}
		n.logger.Printf("forwarding: the leader at %s does not multiplex forwarded writes; one connection per write for %v", addr, fwdMuxRetry)
		return nil, nil
	}
	c.SetReadDeadline(time.Time{})
	return &muxClient{c: c, calls: map[uint64]chan fwdResponse{}, done: make(chan struct{})}, nil
}

// currentLocked returns the live connection to addr, or nil; m.mu is
// held.
func (m *fwdMuxes) currentLocked(addr string) *muxClient {
	mc := m.conns[addr]
	if mc == nil {
		return nil
	}
	select {
	case <-mc.done:
		delete(m.conns, addr)
		return nil
	default:
		return mc
	}
}

func (m *fwdMuxes) closeAll() {
	m.mu.Lock()
	conns := m.conns
	m.conns = nil
	m.mu.Unlock()
	for _, mc := range conns {
		mc.fail(errors.New("the node is closing"))
	}
}

// fail ends the connection: every write waiting on it sees done.
func (mc *muxClient) fail(err error) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	if mc.err != nil {
		return
	}
	mc.err = err
	close(mc.done)
	mc.c.Close()
}

// readLoop hands each answer to the write waiting for it, until the
// connection fails.
func (mc *muxClient) readLoop(n *Node, addr string) {
	br := bufio.NewReader(mc.c)
	for {
		var resp fwdResponse
		if err := readMsg(br, &resp, maxFwdResponse); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && n.ctx.Err() == nil {
				n.logger.Printf("forwarding: the connection to the leader at %s failed: %v", addr, err)
			}
			mc.fail(fmt.Errorf("the connection to the leader at %s failed: %w", addr, err))
			return
		}
		mc.mu.Lock()
		ch := mc.calls[resp.ID]
		delete(mc.calls, resp.ID)
		mc.mu.Unlock()
		if ch != nil {
			ch <- resp // buffered: never blocks
		}
	}
}

// call sends req and waits up to timeout for its answer.
func (mc *muxClient) call(req fwdRequest, addr string, timeout time.Duration) (fwdResponse, error) {
	ch := make(chan fwdResponse, 1)
	mc.mu.Lock()
	if mc.err != nil {
		err := mc.err
		mc.mu.Unlock()
		return fwdResponse{}, fmt.Errorf("%w: %v", errUnsent, err)
	}
	mc.next++
	req.ID = mc.next
	mc.calls[req.ID] = ch
	mc.mu.Unlock()
	forget := func() {
		mc.mu.Lock()
		delete(mc.calls, req.ID)
		mc.mu.Unlock()
	}

	mc.wmu.Lock()
	mc.c.SetWriteDeadline(time.Now().Add(timeout))
	err := writeMsg(mc.c, req)
	mc.wmu.Unlock()
	if err != nil {
		// Not all of the message left: the leader reads no part of a
		// message it did not receive whole.
		forget()
		mc.fail(err)
		return fwdResponse{}, fmt.Errorf("%w: %v", errUnsent, err)
	}

	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case resp := <-ch:
		return resp, nil
	case <-mc.done:
		select {
		case resp := <-ch:
			return resp, nil
		default:
		}
		forget()
		return fwdResponse{}, fmt.Errorf("the leader at %s did not answer (%v): %w", addr, mc.err, errAmbiguous)
	case <-t.C:
		forget()
		mc.fail(fmt.Errorf("no answer within %v", timeout))
		return fwdResponse{}, fmt.Errorf("the leader at %s did not answer within %v: %w", addr, timeout, errAmbiguous)
	}
}

// serveForwardMux applies the commands a follower forwards on a
// multiplexed connection, each as it comes, and answers each once it is
// applied, those ready together in one write.
func (n *Node) serveForwardMux(c net.Conn) {
	c.SetWriteDeadline(time.Now().Add(handshakeTimeout))
	if _, err := c.Write([]byte{protoForwardMux}); err != nil {
		c.Close()
		return
	}
	c.SetWriteDeadline(time.Time{})
	w := newMuxWriter(c, n.lim.fwdMsg)
	var wg sync.WaitGroup
	defer func() {
		c.Close()
		wg.Wait()
	}()
	go func() {
		select {
		case <-n.ctx.Done():
			c.Close()
		case <-w.done:
		}
	}()
	slots := make(chan struct{}, fwdMuxInflight)
	br := bufio.NewReader(c)
	for {
		var req fwdRequest
		if _, err := readMsgTimed(br, c, &req, maxForward, n.lim.fwdIdle, n.lim.fwdMsg); err != nil {
			if errors.Is(err, errTooBig) {
				// No answer: the connection's writer owns it, and the
				// message has no ID yet. The follower sends no command
				// this large here (fwdMuxMax).
				n.logger.Printf("forwarding: %s: %v; closing", c.RemoteAddr(), err)
			} else {
				n.logForwardEnd(c, err)
			}
			w.close()
			return
		}
		if req.Read || len(req.Cmd) == 0 {
			n.logger.Printf("forwarding: %s sent a message that is no write on a multiplexed connection; closing", c.RemoteAddr())
			w.close()
			return
		}
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, tell := n.forwarded(req, c.RemoteAddr().String())
			resp.ID = req.ID
			w.send(resp)
			if tell != 0 {
				n.tellCommitted(raft.ServerID(req.From), raft.ServerAddress(req.Addr), tell)
			}
			<-slots
		}()
	}
}

// muxWriter writes the leader's answers on a multiplexed connection: one
// at a time, buffered, the last answer in line flushing, so answers ready
// together leave in one write. After a write error the connection is
// closed and later answers are dropped (their writes are ambiguous to the
// follower, which retries them).
type muxWriter struct {
	c       net.Conn
	bw      *bufio.Writer
	timeout time.Duration
	queued  atomic.Int32
	mu      sync.Mutex
	failed  bool
	done    chan struct{} // closed with failed
}

func newMuxWriter(c net.Conn, timeout time.Duration) *muxWriter {
	return &muxWriter{c: c, bw: bufio.NewWriter(c), timeout: timeout, done: make(chan struct{})}
}

// close ends the connection.
func (w *muxWriter) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.fail()
}

func (w *muxWriter) send(resp fwdResponse) {
	w.queued.Add(1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.failed {
		w.c.SetWriteDeadline(time.Now().Add(w.timeout))
		if err := writeMsg(w.bw, resp); err != nil {
			w.fail()
		}
	}
	if w.queued.Add(-1) == 0 && !w.failed {
		if err := w.bw.Flush(); err != nil {
			w.fail()
		}
	}
}

// fail is called with mu held.
func (w *muxWriter) fail() {
	if w.failed {
		return
	}
	w.failed = true
	close(w.done)
	w.c.Close()
}
