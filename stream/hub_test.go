package stream

import (
	"testing"
	"time"
)

// One ticker beats for every subscriber at once, and stops with the last
// one: an idle server with many clients wakes once a heartbeat interval,
// and one with none not at all.
func TestHubBeatsAllAtOnce(t *testing.T) {
	h := NewHub(HubConfig{Heartbeat: 20 * time.Millisecond, Status: func() Status { return Status{} }})
	var subs []*sub
	for range 3 {
		s, _ := h.subscribe(0)
		subs = append(subs, s)
	}
	// beatAll marks every subscriber under h.mu: read under it, they are
	// all marked or none is.
	deadline := time.Now().Add(10 * time.Second)
	for rounds := 0; rounds < 3; {
		h.mu.Lock()
		marked := 0
		for _, s := range subs {
			s.mu.Lock()
			if s.beat {
				marked++
				s.beat = false
			}
			s.mu.Unlock()
		}
		h.mu.Unlock()
		switch marked {
		case len(subs):
			rounds++
		case 0:
		default:
			t.Fatalf("a heartbeat round marked %d of %d subscribers", marked, len(subs))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d heartbeat rounds within 10s, want 3", rounds)
		}
		time.Sleep(time.Millisecond)
	}
	for _, s := range subs {
		h.unsubscribe(s)
	}
	for {
		h.mu.Lock()
		beating := h.beating
		h.mu.Unlock()
		if !beating {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the heartbeat ticker still runs with no subscriber")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A new subscriber starts it again.
	s, _ := h.subscribe(0)
	defer h.unsubscribe(s)
	for {
		s.mu.Lock()
		beat := s.beat
		s.mu.Unlock()
		if beat {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no heartbeat for a subscriber that came after the ticker stopped")
		}
		time.Sleep(time.Millisecond)
	}
}
