package calls

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestCallQueue_FIFO(t *testing.T) {
	q := NewQueue(2, 10*time.Second)
	for range 2 {
		if err := q.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range 5 {
		// Queue them one at a time, so arrival order is known.
		n := q.Queued()
		wg.Go(func() {
			if err := q.Acquire(context.Background()); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			q.Release()
		})
		deadline := time.Now().Add(5 * time.Second)
		for q.Queued() == n {
			if time.Now().After(deadline) {
				t.Fatal("the waiter never queued")
			}
			time.Sleep(time.Millisecond)
		}
	}
	q.Release()
	wg.Wait()
	for i, v := range order {
		if v != i {
			t.Fatalf("served in order %v, want arrival order", order)
		}
	}
	q.Release()
	if q.running != 0 || len(q.waiters) != 0 {
		t.Errorf("running %d, waiters %d after all released", q.running, len(q.waiters))
	}
}

func TestCallQueue_BusyAndCancel(t *testing.T) {
	q := NewQueue(1, 200*time.Millisecond)
	if err := q.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	err := q.Acquire(context.Background())
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "node busy: 1 calls running") || !strings.Contains(err.Error(), "try again") {
		t.Fatalf("err = %v, want node busy", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- q.Acquire(ctx) }()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled wait: %v", err)
	}
	q.Release()
	if q.running != 0 || len(q.waiters) != 0 {
		t.Errorf("running %d, waiters %d", q.running, len(q.waiters))
	}
	// A slot is free again.
	if err := q.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestCallQueue_RaceHandover(t *testing.T) {
	q := NewQueue(3, 50*time.Millisecond)
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(time.Now().UnixNano()%40)*time.Millisecond)
			defer cancel()
			if q.Acquire(ctx) == nil {
				time.Sleep(5 * time.Millisecond)
				q.Release()
			}
		})
	}
	wg.Wait()
	if q.running != 0 || len(q.waiters) != 0 {
		t.Errorf("running %d, waiters %d after all done", q.running, len(q.waiters))
	}
}
