package testport

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
)

// floor is the lowest port handed out: below it are the ports services
// on a developer's machine tend to use.
const floor = 10000

var handedOut = struct {
	sync.Mutex
	m map[int]bool
}{m: map[int]bool{}}

// Pick returns n loopback addresses ("127.0.0.1:port"), each free for
// both TCP and UDP when picked. Where the ephemeral range leaves too
// little room below it, they come from the kernel (port 0) instead.
func Pick(tb testing.TB, n int) []string {
	tb.Helper()
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		fmt.Sscan(string(b), &low)
	}
	if low-floor < 2000 {
		return fromKernel(tb, n)
	}
	handedOut.Lock()
	defer handedOut.Unlock()
	var out []string
	for tries := 0; len(out) < n; tries++ {
		if tries > 1000+100*n {
			tb.Fatal("testport: cannot find free loopback ports")
		}
		port := floor + rand.IntN(low-floor)
		if handedOut.m[port] {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if !free(addr) {
			continue
		}
		handedOut.m[port] = true
		out = append(out, addr)
	}
	return out
}

// One is Pick(tb, 1)[0].
func One(tb testing.TB) string {
	tb.Helper()
	return Pick(tb, 1)[0]
}

func free(addr string) bool {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	defer ln.Close()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	pc.Close()
	return true
}

// fromKernel holds every port it is given until all n are picked, so the
// kernel does not hand the same one out twice.
func fromKernel(tb testing.TB, n int) []string {
	tb.Helper()
	var out []string
	var held []io.Closer
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for tries := 0; len(out) < n; tries++ {
		if tries > 100+10*n {
			tb.Fatal("testport: cannot find free loopback ports")
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		held = append(held, ln)
		addr := ln.Addr().String()
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			continue
		}
		held = append(held, pc)
		out = append(out, addr)
	}
	return out
}
