package node

import (
	"net"
	"strings"
	"testing"

	"github.com/toolnode/toolnode/internal/netx"
	"github.com/toolnode/toolnode/internal/testport"
)

func TestPorts_LoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1": true, "127.3.2.1": true, "::1": true, "[::1]": true, "localhost": true, "LOCALHOST": true,
		"0.0.0.0": false, "::": false, "": false, "10.0.0.1": false, "192.0.2.1": false, "node1": false,
	} {
		if got := netx.LoopbackHost(host); got != want {
			t.Errorf("netx.LoopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
	for addr, want := range map[string]bool{
		"127.0.0.1:9565": true, "[::1]:9565": true, "localhost:1": true,
		":9565": false, "0.0.0.0:9565": false, "[::]:9565": false, "10.1.2.3:9565": false,
	} {
		if got := netx.LoopbackAddr(addr); got != want {
			t.Errorf("netx.LoopbackAddr(%q) = %v, want %v", addr, got, want)
		}
	}
}

// Each open port without its credential is refused, naming the flag to
// add; the same configuration with the credential, or with Insecure (the
// control: the check is what refuses), starts.
func TestPorts_RefusalsNameTheirFlag(t *testing.T) {
	key := make([]byte, 32)
	loop := Config{
		Name: "n", DataDir: t.TempDir(),
		P9Addr: "127.0.0.1:1", GossipAddr: "127.0.0.1:2", ClusterAddr: "127.0.0.1:3",
	}
	for _, tc := range []struct {
		name  string
		edit  func(*Config)
		flag  string // "" = accepted
		need  string
		fixed func(*Config) // adds the credential
	}{
		{"all loopback", func(*Config) {}, "", "", nil},
		{"gossip on all interfaces", func(c *Config) { c.GossipAddr = "0.0.0.0:7946" }, "-gossip", "-encrypt",
			func(c *Config) { c.EncryptKey = key }},
		{"gossip with an empty host", func(c *Config) { c.GossipAddr = ":7946" }, "-gossip", "-encrypt",
			func(c *Config) { c.EncryptKey = key }},
		{"advertise a LAN address", func(c *Config) { c.Advertise = "192.0.2.7" }, "-advertise", "-encrypt",
			func(c *Config) { c.EncryptKey = key }},
		{"advertise a host name", func(c *Config) { c.Advertise = "node1" }, "-advertise", "-encrypt",
			func(c *Config) { c.EncryptKey = key }},
		{"cluster on a LAN address", func(c *Config) { c.ClusterAddr = "10.0.0.5:9565" }, "-cluster", "-tls-cert",
			func(c *Config) { c.TLSCert, c.TLSKey, c.TLSCA = "c", "k", "ca" }},
		{"cluster on all interfaces, key", func(c *Config) { c.ClusterAddr = "[::]:9565" }, "-cluster", "-encrypt",
			func(c *Config) { c.EncryptKey = key }},
		{"9P on all interfaces", func(c *Config) { c.P9Addr = "0.0.0.0:9564" }, "-9p", "-9p-tls-cert",
			func(c *Config) { c.P9TLSCert, c.P9TLSKey = "c", "k" }},
		{"9P with the key is still open", func(c *Config) { c.P9Addr = "0.0.0.0:9564"; c.EncryptKey = key }, "-9p", "-9p-tls-key",
			func(c *Config) { c.P9TLSCert, c.P9TLSKey = "c", "k" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := loop
			tc.edit(&c)
			_, err := c.checkPorts()
			if tc.flag == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.flag+" ") || !strings.Contains(msg, tc.need) || !strings.Contains(msg, "-insecure") {
				t.Errorf("error %q does not name %s, %s and -insecure", msg, tc.flag, tc.need)
			}
			// Control: the same ports under Insecure start, and still
			// report what is open.
			ins := c
			ins.Insecure = true
			probs, err := ins.checkPorts()
			if err != nil || len(probs) == 0 {
				t.Errorf("Insecure: %v, %d open ports reported", err, len(probs))
			}
			// With the credential it is accepted.
			tc.fixed(&c)
			if _, err := c.checkPorts(); err != nil {
				t.Errorf("with the credential: %v", err)
			}
		})
	}
}

// New refuses before it binds anything: the port stays free.
func TestPorts_NewRefusesBeforeListening(t *testing.T) {
	addr := testport.One(t)
	_, err := New(Config{Name: "n", DataDir: t.TempDir(), P9Addr: addr, GossipAddr: "0.0.0.0:0", ClusterAddr: "127.0.0.1:0", LogOutput: testWriter{t}})
	if err == nil || !strings.Contains(err.Error(), "-gossip") {
		t.Fatalf("New = %v, want a refusal naming -gossip", err)
	}
	ln2, err := listenAt(addr)
	if err != nil {
		t.Fatalf("the 9P port was bound by a node that refused to start: %v", err)
	}
	ln2.Close()
}

func listenAt(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }
