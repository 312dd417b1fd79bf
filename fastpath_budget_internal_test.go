package retryhttp

import (
	"net/http"
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
// value only when keyOf's key of the second URL is the last entry's, and
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
			h := newHostMap(64, func(hostKey) *hostState { return newHostState(tokenScale, 0) })
			for _, u := range urls {
				h.getOrCreate(hostKey{u.Scheme, u.Host}.canonical())
			}
			want, ok := h.get(hostKey{first.Scheme, first.Host}.canonical())
			require.True(t, ok)
			require.Same(t, want, h.last.Load().value)

			got, found := h.lastOf(then)
			full, _ := h.get(hostKey{then.Scheme, then.Host}.canonical())
			if found {
				assert.Same(t, full, got, "%v then %v", first, then)
				assert.Same(t, want, got, "%v then %v: only the last entry", first, then)
			}
			thenKey := hostKey{then.Scheme, then.Host}.canonical()
			plain := thenKey.host == then.Host && thenKey.canonical() == thenKey
			if !found && plain && thenKey == (hostKey{first.Scheme, first.Host}).canonical() {
				t.Errorf("%v then %v: the last entry, plainly spelled, not found", first, then)
			}
		}
	}
	assert.False(t, func() bool {
		h := newHostMap(8, func(hostKey) *hostState { return newHostState(tokenScale, 0) })
		_, ok := h.lastOf(nil)
		return ok
	}(), "a nil URL has no last entry")
}

// TestLastOfNotAfterEviction checks that an evicted last entry is not
// found through lastOf either.
func TestLastOfNotAfterEviction(t *testing.T) {
	h := newHostMap(1, func(hostKey) *hostState { return newHostState(tokenScale, 0) })
	h.getOrCreate(hostKey{"http", "a.test"})
	_, ok := h.get(hostKey{"http", "a.test"})
	require.True(t, ok)
	_, ok = h.lastOf(&url.URL{Scheme: "http", Host: "a.test"})
	require.True(t, ok)
	h.getOrCreate(hostKey{"http", "b.test"}) // evicts a.test
	_, ok = h.lastOf(&url.URL{Scheme: "http", Host: "a.test"})
	assert.False(t, ok)
}

// TestSuccessInlineSameAnswer checks success, decided inline below 400,
// against its definition (failure.go) over every status class.
func TestSuccessInlineSameAnswer(t *testing.T) {
	assert.False(t, success(nil))
	for _, code := range []int{-1, 0, 100, 101, 200, 204, 301, 304, 399, 400, 404, 429, 499, 500, 503, 599, 600} {
		for _, retryAfter := range []string{"", "1"} {
			res := &http.Response{StatusCode: code, Header: http.Header{}}
			if retryAfter != "" {
				res.Header.Set("Retry-After", retryAfter)
			}
			want := !failedStatus(code) && (answered(code) || retryAfter == "")
			assert.Equal(t, want, success(res), "%d, Retry-After %q", code, retryAfter)
		}
	}
}
