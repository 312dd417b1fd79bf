package hostmap

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The map's last entry found (hostMap.last) answers a run of lookups of one
// host without the hash; it must never answer for another host, nor with an
// entry evicted since.

func TestHostMapLastIsTakenAndExact(t *testing.T) {
	h := New(4, func(Key) *testValue { return new(testValue) })
	a := h.GetOrCreate(Key{"http", "a.test"})
	got, ok := h.Get(Key{"http", "a.test"})
	require.True(t, ok)
	assert.Same(t, a, got)
	require.NotNil(t, h.last.Load(), "a lookup that found its host keeps it")
	assert.Same(t, a, h.last.Load().value)

	// The same host name under another scheme, and another host, are not
	// the last entry's.
	_, ok = h.Get(Key{"https", "a.test"})
	assert.False(t, ok)
	_, ok = h.Get(Key{"http", "b.test"})
	assert.False(t, ok)
	s := h.GetOrCreate(Key{"https", "a.test"})
	assert.NotSame(t, a, s)
	got, _ = h.Get(Key{"http", "a.test"})
	assert.Same(t, a, got)
	got, _ = h.Get(Key{"https", "a.test"})
	assert.Same(t, s, got)
}

func TestHostMapLastNotFoundOnceEvicted(t *testing.T) {
	h := New(1, func(Key) *testValue { return new(testValue) })
	a := h.GetOrCreate(Key{"http", "a.test"})
	_, ok := h.Get(Key{"http", "a.test"})
	require.True(t, ok)
	require.Same(t, a, h.last.Load().value)

	// A second host in a map of one evicts the first (idle: full bucket).
	h.GetOrCreate(Key{"http", "b.test"})
	assert.Equal(t, 1, h.len())
	_, ok = h.Get(Key{"http", "a.test"})
	assert.False(t, ok, "an evicted entry is not found through last")
	again := h.GetOrCreate(Key{"http", "a.test"})
	assert.NotSame(t, a, again, "a host evicted starts again with a state of its own")
}
