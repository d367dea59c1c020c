package calls

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// MaxCallWait bounds how long a call waits for a free slot when the node
// runs -max-calls calls already (less when the call timeout is shorter).
const MaxCallWait = 10 * time.Second

// ErrBusy is the error of a call that waited in vain.
var ErrBusy = errors.New("node busy")

// Queue bounds the calls a node runs at once. A call beyond the bound
// waits in a first-come, first-served queue, up to a bound, and then fails
// saying the node is busy; a waiting call whose context ends (Tflush, a
// closed connection) leaves the queue at once. Slots are handed over
// directly to the first waiter, so a newcomer can never overtake it.
type Queue struct {
	max  int
	wait time.Duration

	mu      sync.Mutex
	running int
	waiters []chan struct{} // closed when the slot is theirs
}

// NewQueue is a queue of max slots whose waiters wait up to wait.
func NewQueue(max int, wait time.Duration) *Queue {
	return &Queue{max: max, wait: wait}
}

// Acquire waits for a slot; Release must be called once when it returns nil.
func (q *Queue) Acquire(ctx context.Context) error {
	q.mu.Lock()
	if q.running < q.max && len(q.waiters) == 0 {
		q.running++
		q.mu.Unlock()
		return nil
	}
	ready := make(chan struct{})
	q.waiters = append(q.waiters, ready)
	q.mu.Unlock()

	timer := time.NewTimer(q.wait)
	defer timer.Stop()
	var err error
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
		err = fmt.Errorf("%w: %d calls running, %d more waiting; waited %s, try again", ErrBusy, q.max, q.Queued(), q.wait)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, w := range q.waiters {
		if w == ready {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			return err
		}
	}
	// The slot was handed over as we gave up: pass it on.
	q.releaseLocked()
	return err
}

// Queued is how many calls wait for a slot.
func (q *Queue) Queued() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiters)
}

// Release frees a slot, handing it to the first waiter if there is one.
func (q *Queue) Release() {
	q.mu.Lock()
	q.releaseLocked()
	q.mu.Unlock()
}

func (q *Queue) releaseLocked() {
	if len(q.waiters) > 0 {
		w := q.waiters[0]
		q.waiters = q.waiters[1:]
		close(w) // the slot passes on; running is unchanged
		return
	}
	q.running--
}
