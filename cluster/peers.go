package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"
)

// A peers file (DATA/peers.json) holds the gossip addresses of the
// members a node last saw alive: a node restarted without -join joins
// them again (and, having been in a cluster, does not bootstrap one of
// its own).
//
// Every join a node hears of changes the list, and while N nodes form a
// cluster each hears N joins: rewriting the file at each (a write and a
// rename, ~1 ms of CPU on a loaded host) would be N² writes across the
// cluster, ~10 % of a client's start at N=50. The file is written at the first
// join at once, so that a node killed right after it joined still knows
// it has been in a cluster; later changes at most every PeersSaveEvery,
// and whatever is pending once more as the node stops.

// PeersSaveEvery bounds how often DATA/peers.json is rewritten.
const PeersSaveEvery = 5 * time.Second

// PeerSaves decides when the members' addresses are written. It is used
// by one goroutine and holds no lock.
type PeerSaves struct {
	last  time.Time        // the last write; zero: none yet
	dirty bool             // a change since the last write
	timer <-chan time.Time // the pending write, nil: none
}

// Changed records a change of the members and writes at once when no
// write happened in the last PeersSaveEvery. save reports whether it
// wrote (a node's own join, the first event, has nothing to write).
func (p *PeerSaves) Changed(now time.Time, save func() bool) {
	p.dirty = true
	if p.last.IsZero() || now.Sub(p.last) >= PeersSaveEvery {
		p.write(now, save)
		return
	}
	if p.timer == nil {
		p.timer = time.After(p.last.Add(PeersSaveEvery).Sub(now))
	}
}

// Due fires when a coalesced write is due (nil, which never fires, when
// none is pending).
func (p *PeerSaves) Due() <-chan time.Time { return p.timer }

// Flush writes a pending change now.
func (p *PeerSaves) Flush(save func() bool) {
	p.timer = nil
	if p.dirty {
		p.write(time.Now(), save)
	}
}

func (p *PeerSaves) write(now time.Time, save func() bool) {
	p.timer = nil
	if save() {
		p.dirty, p.last = false, now
	}
}

// SavePeers writes addrs to the peers file at path, atomically (a
// temporary file renamed over it).
func SavePeers(path string, addrs []string) error {
	b, err := json.Marshal(addrs)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// LoadPeers reads the peers file at path: nil and no error when there is
// none, an error when it cannot be read as one.
func LoadPeers(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var addrs []string
	if err := json.Unmarshal(b, &addrs); err != nil {
		return nil, fmt.Errorf("%s is not a list of addresses: %w", path, err)
	}
	return addrs, nil
}
