package hostmap

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
)

// testValue is a map value whose idleness a test sets.
type testValue struct{ idle bool }

func (v *testValue) Idle() bool { return v.idle }
func (*testValue) Busy() bool   { return false }

// len returns the number of entries of h.
func (h *Map[V]) len() int {
	n := 0
	for i := range h.shards {
		s := &h.shards[i]
		s.mu.Lock()
		n += s.n
		s.mu.Unlock()
	}
	return n
}

// evictOne fills a one-shard map with one value per element of idle,
// evicts one and returns its index.
func evictOne(idle []bool) int {
	h := New(len(idle), func(Key) *testValue { return new(testValue) })
	h.shards = h.shards[:1]
	h.chains = 1
	for h.chains < len(idle) {
		h.chains *= 2
	}
	for i, v := range idle {
		h.GetOrCreate(Key{"http", strconv.Itoa(i)}).idle = v
	}
	s := &h.shards[0]
	s.mu.Lock()
	s.evict(*s.table.Load(), rand.Uint64())
	s.mu.Unlock()
	for i := range idle {
		if _, ok := h.Get(Key{"http", strconv.Itoa(i)}); !ok {
			return i
		}
	}
	return -1
}

func TestEvictsAnIdleValueFirst(t *testing.T) {
	// Of eight values, one is idle (for the budget, a full bucket):
	// forgetting it loses nothing, so it is the one evicted, whatever the
	// map's iteration order.
	for i := range 100 {
		idle := make([]bool, 8)
		idle[i%8] = true
		assert.Equal(t, i%8, evictOne(idle), "round %d", i)
	}
}
