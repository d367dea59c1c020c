package blobs

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/toolnode/toolnode/blobstore"
)

// Answers to a blob request: the size and bytes follow Have.
const (
	Have    byte = 'Y'
	Missing byte = 'N'
	Busy    byte = 'W'
)

// fetchFrom asks the node at addr for blob d and stores what it sends
// if it is the blob: size bytes (when size > 0) whose SHA-256 is d.
func (s *Service) fetchFrom(addr, d string, size int64) error {
	c, err := s.cfg.Dial(addr, requestTimeout)
	if err != nil {
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(s.ctx, func() { c.Close() })
	defer stop()
	c.SetWriteDeadline(time.Now().Add(requestTimeout))
	if _, err := io.WriteString(c, d+"\n"); err != nil {
		return err
	}
	c.SetDeadline(time.Now().Add(Idle))
	br := bufio.NewReader(c)
	answer, err := br.ReadByte()
	if err != nil {
		return fmt.Errorf("no answer: %v", err)
	}
	switch answer {
	case Missing:
		return errors.New("not stored there")
	case Busy:
		return errors.New("busy sending others")
	case Have:
	default:
		return fmt.Errorf("answered %#x, not a blob", answer)
	}
	var hdr [8]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return fmt.Errorf("no size: %v", err)
	}
	got := int64(binary.BigEndian.Uint64(hdr[:]))
	if size > 0 && got != size {
		return fmt.Errorf("%w: it has %d bytes, the log says %d", blobstore.ErrDigest, got, size)
	}
	if got > s.cfg.MaxExec {
		return fmt.Errorf("it has %d bytes, over this node's %d-byte -max-exec-size", got, s.cfg.MaxExec)
	}
	_, _, err = s.cfg.Store.Put(&idleReader{c: c, r: br}, d, got, s.cfg.MaxExec)
	return err
}

// idleReader reads a connection with a deadline that moves with each
// read: a transfer may take long, but may not stall.
type idleReader struct {
	c net.Conn
	r io.Reader
}

func (r *idleReader) Read(p []byte) (int, error) {
	r.c.SetReadDeadline(time.Now().Add(Idle))
	return r.r.Read(p)
}

// idleWriter is idleReader's other side.
type idleWriter struct{ c net.Conn }

func (w idleWriter) Write(p []byte) (int, error) {
	w.c.SetWriteDeadline(time.Now().Add(Idle))
	return w.c.Write(p)
}

// Serve answers one blob request on c, which the caller has
// authenticated, and closes it.
func (s *Service) Serve(c net.Conn) {
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(requestTimeout))
	var req [65]byte
	if _, err := io.ReadFull(c, req[:]); err != nil {
		s.cfg.Logf("cluster port: %s: blob request: %v", c.RemoteAddr(), err)
		return
	}
	d := string(req[:64])
	if req[64] != '\n' || !blobstore.ValidDigest(d) {
		s.cfg.Logf("cluster port: %s: a blob request that is not a digest; closing", c.RemoteAddr())
		return
	}
	w := idleWriter{c}
	select {
	case s.serve <- struct{}{}:
		defer func() { <-s.serve }()
	default:
		s.cfg.Metrics.BlobServed("busy")
		w.Write([]byte{Busy})
		return
	}
	f, err := s.cfg.Store.Open(d)
	if err != nil {
		s.cfg.Metrics.BlobServed("missing")
		w.Write([]byte{Missing})
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		s.cfg.Metrics.BlobServed("missing")
		w.Write([]byte{Missing})
		return
	}
	var hdr [9]byte
	hdr[0] = Have
	binary.BigEndian.PutUint64(hdr[1:], uint64(fi.Size()))
	if _, err := w.Write(hdr[:]); err != nil {
		return
	}
	if _, err := io.Copy(w, io.LimitReader(f, fi.Size())); err != nil {
		s.cfg.Metrics.BlobServed("error")
		s.cfg.Logf("cluster port: sending executable %s to %s: %v", Short(d), c.RemoteAddr(), err)
		return
	}
	s.cfg.Metrics.BlobServed("sent")
}
