package node

import (
	"github.com/toolnode/toolnode/p9"
	"github.com/toolnode/toolnode/raftfsm"
)

// Changed is the FSM observer: it records the events of an applied entry
// and refreshes this node's view of the tools it names.
func (n *Node) Changed(events []raftfsm.Event) {
	var tools []string
	trust := false
	seen := make([]p9.Event, 0, len(events))
	for _, e := range events {
		switch e.Kind {
		case "token+":
			continue // tokens are not in the events file
		case "token-":
			n.tokenRevoked(e.Name)
			continue
		case "trust+", "trust-":
			trust = true // nor are trusted keys
			continue
		case "server+", "server-":
			n.upstreamChanged()
		}
		seen = append(seen, p9.Event{Kind: e.Kind, Name: e.Name})
		if e.Kind == "tool+" || e.Kind == "tool-" {
			tools = append(tools, e.Name)
		}
		if e.Kind == "tool+" {
			n.observePublished(e.Name)
		}
	}
	n.events.AddAll(seen)
	if len(tools) > 0 {
		n.catalog.Update(tools, n.liveTool)
		kick(n.metaKick)
	}
	if trust {
		n.trustChanged()
	}
}

// capsChanged is cluster.Config.CapsChanged: the nodes that can run
// these tools changed, which the events file says as tool+ (the tool's
// entry in the catalog changed), so that watchers such as MCP sessions
// learn it without asking cluster/where.
func (n *Node) capsChanged(tools []string) {
	evs := make([]p9.Event, len(tools))
	for i, t := range tools {
		evs[i] = p9.Event{Kind: "tool+", Name: t}
	}
	n.events.AddAll(evs)
}

// trustChanged re-resolves every tool against the keys trusted now: a
// tool whose live version no trusted key signed leaves t/ here, with a
// log line naming it, and one signed by a key just added comes back.
func (n *Node) trustChanged() {
	if !n.catalog.IsHeld() {
		n.catalog.Rebuild(n.liveTools, n.liveTool)
	}
	for _, t := range n.fsm.Tools() {
		if !t.Published() {
			continue
		}
		if err := n.fsm.TrustError(t); err != nil {
			n.logger.Printf("tool %s is not served or run here: %v", t.Name, err)
		}
	}
	kick(n.metaKick)
}

// Restored is the FSM observer for a snapshot restore: everything is
// re-resolved.
func (n *Node) Restored() {
	if !n.catalog.IsHeld() {
		n.catalog.Rebuild(n.liveTools, n.liveTool)
	}
	n.blobs.MarkRescan() // its tools' indexes may be older than any seen
	n.upstreamChanged()
	kick(n.metaKick)
	n.tokensRestored()
}
