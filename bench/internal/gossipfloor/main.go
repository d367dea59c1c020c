// Command gossipfloor is the floor of the scale benchmark: a process that
// runs the cluster package's gossip (memberlist at the node's settings)
// and nothing else, or, with -idle, a Go process that does nothing. It
// prints "alive=N" whenever the number of alive members it lists changes.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/toolnode/toolnode/cluster"
)

func main() {
	name := flag.String("name", "", "member name")
	bind := flag.String("gossip", "", "gossip address host:port")
	join := flag.String("join", "", "comma-separated addresses to join")
	idle := flag.Bool("idle", false, "do nothing at all")
	gi := flag.Duration("gossip-interval", 0, "memberlist's GossipInterval; 0: the cluster package's")
	pi := flag.Duration("probe-interval", 0, "memberlist's ProbeInterval; 0: the cluster package's")
	gn := flag.Int("gossip-nodes", 0, "memberlist's GossipNodes; 0: the cluster package's")
	compress := flag.Bool("compress", false, "memberlist's compression of every message (off in the cluster package)")
	flag.Parse()
	if *idle {
		fmt.Println("alive=0")
		select {}
	}
	c, err := cluster.Start(cluster.Config{Name: *name, BindAddr: *bind, Meta: cluster.Meta{Cluster: *bind}, GossipInterval: *gi, ProbeInterval: *pi, GossipNodes: *gn, Compress: *compress})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if *join != "" {
		for {
			if _, err := c.Join(strings.Split(*join, ",")); err == nil {
				break
			}
			// As a node's -join does: a refused join is tried again a
			// second later, not in a loop that spins on the cores the
			// cluster shares.
			time.Sleep(time.Second)
		}
	}
	last := -1
	for range c.Events() {
		alive := 0
		for _, m := range c.Members() {
			if m.State == "alive" {
				alive++
			}
		}
		if alive != last {
			fmt.Printf("alive=%d\n", alive)
			last = alive
		}
	}
}
