package testport

import (
	"net"
	"strconv"
	"testing"
)

func TestPick_DistinctBindableBelowEphemeral(t *testing.T) {
	addrs := Pick(t, 50)
	addrs = append(addrs, One(t))
	seen := map[string]bool{}
	for _, a := range addrs {
		if seen[a] {
			t.Fatalf("%s handed out twice", a)
		}
		seen[a] = true
		_, p, err := net.SplitHostPort(a)
		if err != nil {
			t.Fatal(err)
		}
		if port, _ := strconv.Atoi(p); port < floor {
			t.Fatalf("%s below %d", a, floor)
		}
		ln, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("bind %s: %v", a, err)
		}
		ln.Close()
	}
}
