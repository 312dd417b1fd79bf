package breaker

import "sync"

type stateChange struct {
	host     string
	from, to State
}

// notifier delivers state changes to the OnChange callback outside
// the circuit's lock (held while changing state), one at a time
// and in order: changes are queued under the circuit's lock, and delivered
// after it by whichever goroutine finds no delivery under way. A callback
// that sends a request whose breaker changes state only queues the change;
// the delivering goroutine delivers it when the callback returns.
type notifier struct {
	fn func(host string, from, to State)

	mu         sync.Mutex
	queue      []stateChange
	delivering bool
}

func (n *notifier) push(c stateChange) {
	n.mu.Lock()
	n.queue = append(n.queue, c)
	n.mu.Unlock()
}

// flush delivers the queued changes, unless another goroutine is already
// doing so. A nil notifier has nothing to deliver.
func (n *notifier) flush() {
	if n == nil {
		return
	}
	n.mu.Lock()
	if n.delivering {
		n.mu.Unlock()
		return
	}
	n.delivering = true
	for len(n.queue) > 0 {
		c := n.queue[0]
		n.queue = n.queue[1:]
		n.mu.Unlock()
		n.deliver(c)
		n.mu.Lock()
	}
	n.delivering = false
	n.mu.Unlock()
}

// deliver calls the callback; if it panics, the next flush delivers again.
func (n *notifier) deliver(c stateChange) {
	returned := false
	defer func() {
		if !returned {
			n.mu.Lock()
			n.delivering = false
			n.mu.Unlock()
		}
	}()
	n.fn(c.host, c.from, c.to)
	returned = true
}
