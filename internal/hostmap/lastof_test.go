package hostmap

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The budget's success path (settle) finds the host of a run of requests
// to one host by hostMap.lastOf, without making the request's key. These
// tests prove it answers as the full lookup would, or not at all.

// TestLastOfAnswersAsKeyOf checks, for every pair of URLs (one looked up,
// which becomes the map's last entry, then another), that lastOf finds a
// value only when KeyOf's key of the second URL is the last entry's, and
// then the same value as the full lookup.
func TestLastOfAnswersAsKeyOf(t *testing.T) {
	urls := []*url.URL{
		{Scheme: "http", Host: "a.test"},
		{Scheme: "http", Host: "a.test:80"},
		{Scheme: "http", Host: "a.test:"},
		{Scheme: "https", Host: "a.test"},
		{Scheme: "https", Host: "a.test:80"},
		{Scheme: "http", Host: "a.test:8080"},
		{Scheme: "http", Host: "[::1]"},
		{Scheme: "http", Host: "[::1]:80"},
		{Scheme: "http", Host: "a.test:80:80"}, // not canonical once stripped: never plain
		{Scheme: "http", Host: "::80"},
		{Scheme: "ftp", Host: "a.test"},
		{Scheme: "", Host: ""},
	}
	for _, first := range urls {
		for _, then := range urls {
			h := New(64, func(Key) *testValue { return new(testValue) })
			for _, u := range urls {
				h.GetOrCreate(Key{u.Scheme, u.Host}.canonical())
			}
			want, ok := h.Get(Key{first.Scheme, first.Host}.canonical())
			require.True(t, ok)
			require.Same(t, want, h.last.Load().value)

			got, found := h.LastOf(then)
			full, _ := h.Get(Key{then.Scheme, then.Host}.canonical())
			if found {
				assert.Same(t, full, got, "%v then %v", first, then)
				assert.Same(t, want, got, "%v then %v: only the last entry", first, then)
			}
			thenKey := Key{then.Scheme, then.Host}.canonical()
			plain := thenKey.Host == then.Host && thenKey.canonical() == thenKey
			if !found && plain && thenKey == (Key{first.Scheme, first.Host}).canonical() {
				t.Errorf("%v then %v: the last entry, plainly spelled, not found", first, then)
			}
		}
	}
	assert.False(t, func() bool {
		h := New(8, func(Key) *testValue { return new(testValue) })
		_, ok := h.LastOf(nil)
		return ok
	}(), "a nil URL has no last entry")
}

// TestLastOfNotAfterEviction checks that an evicted last entry is not
// found through lastOf either.
func TestLastOfNotAfterEviction(t *testing.T) {
	h := New(1, func(Key) *testValue { return new(testValue) })
	h.GetOrCreate(Key{"http", "a.test"})
	_, ok := h.Get(Key{"http", "a.test"})
	require.True(t, ok)
	_, ok = h.LastOf(&url.URL{Scheme: "http", Host: "a.test"})
	require.True(t, ok)
	h.GetOrCreate(Key{"http", "b.test"}) // evicts a.test
	_, ok = h.LastOf(&url.URL{Scheme: "http", Host: "a.test"})
	assert.False(t, ok)
}
