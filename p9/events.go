package p9

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
)

// events is an open events file. Each fid starts at the newest event at
// its open; a read returns the following events as whole lines, keeping
// what does not fit for the next read, and waits up to EventWait for one.
type events struct {
	s    *Server
	lock chan struct{} // serializes reads; a flushed read stops waiting

	next    uint64 // index of the last event read
	pending []byte // formatted lines not yet returned

	ctx    context.Context // cancelled by close: a clunk ends a waiting read
	cancel context.CancelFunc
}

func newEvents(s *Server) *events {
	ctx, cancel := context.WithCancel(s.ctx)
	return &events{s: s, lock: make(chan struct{}, 1), next: s.b.LastEvent(), ctx: ctx, cancel: cancel}
}

func (e *events) read(r *req, _ uint64, count uint32) ([]byte, error) {
	if err := acquire(e.lock, r); err != nil {
		return nil, err
	}
	defer func() { <-e.lock }()

	if len(e.pending) == 0 {
		rctx := r.context()
		ctx, stop := mergeCancel(rctx, e.ctx)
		ctx, cancel := context.WithTimeout(ctx, e.s.opt.EventWait)
		evs, err := e.s.b.Events(ctx, e.next)
		done := ctx.Err() != nil
		cancel()
		stop()
		if err != nil && !done {
			return nil, err
		}
		for _, ev := range evs {
			if ev.Index <= e.next {
				continue
			}
			e.next = ev.Index
			e.pending = strconv.AppendUint(e.pending, ev.Index, 10)
			e.pending = append(e.pending, ' ')
			e.pending = append(e.pending, ev.Kind...)
			e.pending = append(e.pending, ' ')
			e.pending = append(e.pending, oneLine(ev.Name)...)
			e.pending = append(e.pending, '\n')
		}
		if len(e.pending) == 0 {
			if rctx.Err() != nil || e.ctx.Err() != nil {
				return nil, errors.New("read of events interrupted")
			}
			return nil, nil // nothing within EventWait: EOF, read again
		}
	}
	// As many whole lines as fit in count.
	n := 0
	for n < len(e.pending) {
		i := bytes.IndexByte(e.pending[n:], '\n')
		if n+i+1 > int(count) {
			break
		}
		n += i + 1
	}
	if n == 0 {
		i := bytes.IndexByte(e.pending, '\n')
		return nil, fmt.Errorf("read of %d bytes is too small for the next event line (%d bytes)", count, i+1)
	}
	out := bytes.Clone(e.pending[:n])
	e.pending = append(e.pending[:0], e.pending[n:]...)
	return out, nil
}

func (e *events) write(*req, uint64, []byte) (int, error) {
	return 0, errors.New("events is read-only")
}
func (e *events) truncate() {}
func (e *events) close()    { e.cancel() }

// mergeCancel returns a context cancelled when a or b is; stop releases it.
func mergeCancel(a, b context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(a)
	unhook := context.AfterFunc(b, cancel)
	return ctx, func() { unhook(); cancel() }
}
