package stream_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolnode/toolnode/raftfsm"
	"github.com/toolnode/toolnode/stream"
)

// countConn counts the bytes a server writes to one subscriber.
type countConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countConn) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return c.Conn.Write(p)
}

// BenchmarkHubFanout: one server's Hub pushes each entry (a tool_load
// command, as the log holds it) to K subscribed clients over loopback
// TCP; an op is one entry delivered to all K. It reports the bytes sent
// per client per entry and the time per entry per client, what a
// server pays for each client it serves.
func BenchmarkHubFanout(b *testing.B) {
	for _, k := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("clients=%d", k), func(b *testing.B) {
			var sent atomic.Int64
			hub := stream.NewHub(stream.HubConfig{
				Heartbeat: time.Hour, // entries only
				Status:    func() stream.Status { return stream.Status{} },
				Snapshot: func() (uint64, func(io.Writer) error, error) {
					return 0, func(io.Writer) error { return nil }, nil
				},
			})
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						hub.Serve(ctx, countConn{c, &sent})
					}()
				}
			}()
			var got atomic.Int64 // entries received, all clients
			var fwg sync.WaitGroup
			for i := range k {
				var last atomic.Uint64
				f := stream.NewFollower(stream.FollowerConfig{
					Name:    fmt.Sprintf("c%d", i),
					Servers: func() []string { return []string{ln.Addr().String()} },
					Dial: func(ctx context.Context, addr string) (net.Conn, error) {
						var d net.Dialer
						return d.DialContext(ctx, "tcp", addr)
					},
					Index: last.Load,
					Apply: func(index uint64, data []byte) error {
						last.Store(index)
						got.Add(1)
						return nil
					},
					Restore:   func(uint64, io.Reader) error { return nil },
					Heartbeat: time.Hour,
				})
				fwg.Add(1)
				go func() {
					defer fwg.Done()
					f.Run(ctx)
				}()
			}
			for deadline := time.Now().Add(30 * time.Second); hub.Subscribers() < k; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					b.Fatalf("%d of %d followers subscribed within 30s", hub.Subscribers(), k)
				}
			}
			data := raftfsm.MustEncode(raftfsm.CmdLoad, raftfsm.Load{Session: "s1", Agent: "a1", Names: []string{"bench_a"}})
			sent.Store(0)
			b.ResetTimer()
			for i := range b.N {
				hub.Publish(uint64(i+1), data)
			}
			// A fine poll (the wait is in the measured time), with a deadline.
			for deadline := time.Now().Add(time.Minute); got.Load() < int64(b.N*k); time.Sleep(100 * time.Microsecond) {
				if time.Now().After(deadline) {
					b.Fatalf("%d of %d entries delivered within a minute", got.Load(), b.N*k)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(sent.Load())/float64(b.N*k), "B/entry/client")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*k), "ns/entry/client")
			b.ReportMetric(float64(len(data)), "B/command")
			cancel()
			ln.Close()
			hub.Close()
			fwg.Wait()
			wg.Wait()
		})
	}
}
