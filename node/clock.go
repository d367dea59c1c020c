package node

import "time"

// nowNano stamps commands that carry a time; the FSM never reads a clock.
func nowNano() int64 { return time.Now().UnixNano() }
