package stream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Defaults of a Hub.
const (
	DefaultWindowEntries = 4096
	DefaultWindowBytes   = 64 << 20
	DefaultHeartbeat     = 10 * time.Second
	writeTimeout         = 30 * time.Second // one frame to a subscriber
	helloWait            = 10 * time.Second // a client's hello, after it connects
)

// Entry is one committed command.
type Entry struct {
	Index uint64
	Data  []byte
}

// HubConfig configures a Hub.
type HubConfig struct {
	// Snapshot captures the state, consistently with the entries
	// published: it returns the index of the last entry the capture
	// includes and a function that writes the capture's encoding.
	Snapshot func() (index uint64, persist func(io.Writer) error, err error)
	// Status is the cluster as this server sees it, sent with each
	// heartbeat.
	Status func() Status
	Logf   func(format string, args ...any)

	WindowEntries int           // entries kept for resuming; default DefaultWindowEntries
	WindowBytes   int           // their bytes; default DefaultWindowBytes
	Heartbeat     time.Duration // default DefaultHeartbeat
}

// Hub serves the change stream on a server.
type Hub struct {
	cfg HubConfig

	mu     sync.Mutex
	window []Entry // ascending
	bytes  int
	floor  uint64 // entries at or below it may be missing from the window
	last   uint64 // the last index published (or the floor)
	subs   map[*sub]struct{}
	// beating: the heartbeat ticker runs (beat), while there are
	// subscribers.
	beating bool
}

// NewHub returns a Hub whose window starts empty at index 0.
func NewHub(cfg HubConfig) *Hub {
	if cfg.WindowEntries <= 0 {
		cfg.WindowEntries = DefaultWindowEntries
	}
	if cfg.WindowBytes <= 0 {
		cfg.WindowBytes = DefaultWindowBytes
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	return &Hub{cfg: cfg, subs: map[*sub]struct{}{}}
}

// sub is one subscriber's queue of entries not yet sent.
type sub struct {
	mu    sync.Mutex
	q     []Entry
	bytes int
	gone  string // why the subscriber must be closed; "" while it may go on
	beat  bool   // send a heartbeat now: the status changed
	wake  chan struct{}
}

func (s *sub) kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *sub) drop(why string) {
	s.mu.Lock()
	if s.gone == "" {
		s.gone, s.q, s.bytes = why, nil, 0
	}
	s.mu.Unlock()
	s.kick()
}

// Publish adds the entry the FSM just applied. Entries come in log order
// (Raft's FSM goroutine is one). It never blocks: a subscriber whose
// queue is over the window's bounds is dropped and resumes later.
func (h *Hub) Publish(index uint64, data []byte) {
	e := Entry{Index: index, Data: data}
	h.mu.Lock()
	defer h.mu.Unlock()
	if index <= h.last {
		return
	}
	h.window = append(h.window, e)
	h.bytes += len(data)
	h.last = index
	for len(h.window) > 1 && (len(h.window) > h.cfg.WindowEntries || h.bytes > h.cfg.WindowBytes) {
		h.floor = h.window[0].Index
		h.bytes -= len(h.window[0].Data)
		h.window[0] = Entry{}
		h.window = h.window[1:]
	}
	for s := range h.subs {
		s.mu.Lock()
		switch {
		case s.gone != "":
		case len(s.q) >= h.cfg.WindowEntries || s.bytes+len(data) > h.cfg.WindowBytes:
			s.gone, s.q, s.bytes = "it fell behind by more than the window", nil, 0
		default:
			s.q = append(s.q, e)
			s.bytes += len(data)
		}
		s.mu.Unlock()
		s.kick()
	}
}

// Reset empties the window after the state was replaced (a snapshot
// installed) at index, and closes every subscriber: each resumes, from a
// snapshot if it must.
func (h *Hub) Reset(index uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.window, h.bytes, h.floor, h.last = nil, 0, index, index
	for s := range h.subs {
		s.drop("the server's state was replaced by a snapshot")
	}
}

// StatusChanged sends every subscriber a heartbeat now, with the new
// status (a new leader, a server added or removed), instead of at its
// next interval: clients learn where to forward writes at once.
func (h *Hub) StatusChanged() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.beatAll()
}

// beatAll has every subscriber send a heartbeat now. h.mu is held.
func (h *Hub) beatAll() {
	for s := range h.subs {
		s.mu.Lock()
		s.beat = true
		s.mu.Unlock()
		s.kick()
	}
}

// beat has every subscriber send a heartbeat each Heartbeat, from one
// ticker for all: an idle server wakes once an interval however many
// clients follow it, where a ticker per subscriber woke it once per
// client (each wake-up of an idle process costs more than its work). It
// runs while there are subscribers (subscribe starts it).
func (h *Hub) beat() {
	t := time.NewTicker(h.cfg.Heartbeat)
	defer t.Stop()
	for range t.C {
		h.mu.Lock()
		if len(h.subs) == 0 {
			h.beating = false
			h.mu.Unlock()
			return
		}
		h.beatAll()
		h.mu.Unlock()
	}
}

// Last is the index of the last entry published.
func (h *Hub) Last() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

// Subscribers is how many clients follow this server now.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// Close drops every subscriber; their Serve calls return.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		s.drop("the server is stopping")
	}
}

// subscribe registers a subscriber that has applied have: its queue
// starts with the window's entries after have when the window covers it
// (fromWindow), else it needs a snapshot first.
func (h *Hub) subscribe(have uint64) (s *sub, fromWindow bool) {
	s = &sub{wake: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if have >= h.floor {
		fromWindow = true
		for _, e := range h.window {
			if e.Index > have {
				s.q = append(s.q, e)
				s.bytes += len(e.Data)
			}
		}
	}
	h.subs[s] = struct{}{}
	if !h.beating {
		h.beating = true
		go h.beat()
	}
	return s, fromWindow
}

func (h *Hub) unsubscribe(s *sub) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
}

// Serve streams to one client on c until the client goes, ctx ends, or
// the subscriber is dropped; it closes c. The client's hello must arrive
// within helloWait.
func (h *Hub) Serve(ctx context.Context, c net.Conn) error {
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	c.SetReadDeadline(time.Now().Add(helloWait))
	var hello [helloSize]byte
	if _, err := io.ReadFull(c, hello[:]); err != nil {
		return fmt.Errorf("no hello: %w", err)
	}
	c.SetReadDeadline(time.Time{})
	have := binary.BigEndian.Uint64(hello[:])
	// A client sends nothing more; its closing the connection ends the
	// stream at the next write, and a read that returns wakes us sooner.
	closed := make(chan struct{})
	go func() {
		io.Copy(io.Discard, c)
		close(closed)
	}()

	s, fromWindow := h.subscribe(have)
	defer h.unsubscribe(s)
	bw := bufio.NewWriterSize(c, 64<<10)
	send := func(kind byte, index uint64, data []byte) error {
		c.SetWriteDeadline(time.Now().Add(writeTimeout))
		return writeFrame(bw, kind, index, data)
	}
	flush := func() error {
		c.SetWriteDeadline(time.Now().Add(writeTimeout))
		return bw.Flush()
	}
	cur := have
	if !fromWindow {
		index, persist, err := h.cfg.Snapshot()
		if err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
		var buf bytes.Buffer
		if err := persist(&buf); err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
		if err := send(frameSnapshot, index, buf.Bytes()); err != nil {
			return err
		}
		cur = index
	}
	heartbeat := func() error {
		if err := send(frameHeartbeat, h.Last(), encodeStatus(h.cfg.Status())); err != nil {
			return err
		}
		return flush()
	}
	if err := heartbeat(); err != nil { // the status at once: where the leader is
		return err
	}
	for {
		s.mu.Lock()
		q, gone, beat := s.q, s.gone, s.beat
		s.q, s.bytes, s.beat = nil, 0, false
		s.mu.Unlock()
		if gone != "" {
			return errors.New(gone)
		}
		for _, e := range q {
			if e.Index <= cur {
				continue
			}
			if err := send(frameEntry, e.Index, e.Data); err != nil {
				return err
			}
			cur = e.Index
		}
		if beat {
			if err := heartbeat(); err != nil {
				return err
			}
		} else if len(q) > 0 {
			if err := flush(); err != nil {
				return err
			}
		}
		select {
		case <-s.wake: // entries, a heartbeat (beat, StatusChanged), or gone
		case <-closed:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
