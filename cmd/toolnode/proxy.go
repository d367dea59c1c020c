package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/toolnode/toolnode/node"
	"github.com/toolnode/toolnode/p9proxy"
)

// proxy is `toolnode proxy -listen ADDR -to ADDR [-tls-ca FILE] [-token T]`:
// plain 9P on loopback for clients that cannot do TLS or tokens, forwarded
// to a node (over TLS given a CA) with the token in every attach.
func proxy(args []string) error {
	fs := newFlagSet("proxy", "proxy [-listen ADDR] -to ADDR [-tls-ca FILE] [-token T]")
	listen := fs.String("listen", node.DefaultP9Addr, "address to serve plain 9P on (loopback unless -insecure)")
	to := fs.String("to", "", "the node's 9P address, HOST:PORT")
	cred := credFlags(fs)
	insecure := fs.Bool("insecure", false, "allow a non-loopback -listen, or a non-loopback -to without TLS")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	tcfg, err := cred.tlsConfig(*to)
	if err != nil {
		return err
	}
	if err := checkProxyAddrs(*listen, *to, tcfg != nil, *insecure); err != nil {
		return err
	}
	logger := log.New(os.Stderr, "", log.LstdFlags)
	if *insecure {
		if !isLoopback(*listen) {
			logger.Printf("proxy: INSECURE: serving unauthenticated plain 9P on %s, a non-loopback address: anyone who reaches it acts with the proxy's token", *listen)
		}
		if tcfg == nil && !isLoopback(*to) {
			logger.Printf("proxy: INSECURE: 9P to %s crosses the network in clear, token included", *to)
		}
	}
	// Only a token given (-token, $TOOLNODE_TOKEN), never the admin token
	// of a data directory: every client of the proxy acts with it.
	token := cred.token
	if token == "" {
		token = os.Getenv("TOOLNODE_TOKEN")
	}
	p, err := p9proxy.New(p9proxy.Options{
		Dial:  func(ctx context.Context) (net.Conn, error) { return dialNode(ctx, *to, tcfg) },
		Token: token,
		Logf:  logger.Printf,
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("-listen: %w", err)
	}
	how := "plain 9P"
	if tcfg != nil {
		how = "TLS, server name " + tcfg.ServerName
	}
	who := "the clients' own attach names"
	if token != "" {
		who = "the proxy's token in every attach"
	}
	logger.Printf("proxy: serving 9P on %s for the node at %s (%s), %s", ln.Addr(), *to, how, who)
	// Check the way to the node once, so a wrong CA or address shows now
	// rather than as a failed mount; the node may also just not be up yet.
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	if c, err := dialNode(ctx, *to, tcfg); err != nil {
		logger.Printf("proxy: warning: %v", err)
	} else {
		c.Close()
	}
	cancel()

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	done := make(chan error, 1)
	go func() { done <- p.Serve(ln) }()
	select {
	case s := <-sig:
		logger.Printf("proxy: %v: shutting down", s)
		p.Close()
		<-done
		return nil
	case err := <-done:
		p.Close()
		return err
	}
}

// checkProxyAddrs refuses, unless insecure, a -listen that is not
// loopback (the proxy serves plain 9P with no credential of its own, and
// any client acts with its token) and a non-loopback -to reached without
// TLS (the token would cross the network in clear).
func checkProxyAddrs(listen, to string, useTLS, insecure bool) error {
	if to == "" {
		return errors.New("-to HOST:PORT, the node's 9P address, is required")
	}
	if _, _, err := net.SplitHostPort(to); err != nil {
		return fmt.Errorf("-to %q: %v", to, err)
	}
	if _, _, err := net.SplitHostPort(listen); err != nil {
		return fmt.Errorf("-listen %q: %v", listen, err)
	}
	if insecure {
		return nil
	}
	if !isLoopback(listen) {
		return fmt.Errorf("-listen %s is not a loopback address: the proxy serves plain 9P without credentials, "+
			"and every client of it acts with its token; listen on 127.0.0.1, or give -insecure", listen)
	}
	if !useTLS && !isLoopback(to) {
		return fmt.Errorf("-to %s is not a loopback address and no -tls-ca (or $TOOLNODE_CA) is given: "+
			"9P and the token would cross the network in clear; give the CA of the node's -9p-tls-cert, "+
			"or point -to at an ssh tunnel (ssh -L), or give -insecure", to)
	}
	return nil
}
