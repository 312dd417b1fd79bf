package destinations

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDestinationsMatchOrder checks which destination a URL gets: the first
// in order that matches, by exact host, host and port, wildcard or Match
// (want: its index; -1 for none).
func TestDestinationsMatchOrder(t *testing.T) {
	byHeader := func(r *http.Request) bool { return r.Header.Get("X-Tier") == "batch" }
	one := 1
	d, err := New(Config{Destinations: []Destination{
		{Host: "api.example.com:8443", MaxRetries: &one},
		{Match: byHeader, MaxRetries: &one},
		{Host: "api.example.com", MaxRetries: &one},
		{Host: "*.eu.example.com", MaxRetries: &one},
		{Host: "*.example.com", MaxRetries: &one},
		{Host: "[::1]:9000", MaxRetries: &one},
		{Host: "10.0.0.1", MaxRetries: &one},
	}})
	require.NoError(t, err)
	ds := d.current.Load()
	tests := []struct {
		give  string
		batch bool
		want  int
	}{
		{"https://api.example.com:8443/", false, 0},
		{"https://api.example.com:8443/", true, 0}, // the port rule comes before Match
		{"https://api.example.com/", true, 1},      // Match comes before the any-port rule
		{"https://api.example.com/", false, 2},
		{"https://API.Example.COM./x", false, 2}, // case and a trailing dot don't matter
		{"http://api.example.com:8443/", false, 0},
		{"https://a.eu.example.com/", false, 3},
		{"https://a.b.eu.example.com/", false, 3}, // any depth
		{"https://eu.example.com/", false, 4},     // *.eu does not match eu itself
		{"https://example.com/", false, -1},       // nor *.example.com example.com
		{"http://[::1]:9000/", false, 5},
		{"http://[::1]:9001/", false, -1},
		{"http://10.0.0.1:1234/", false, 6},
		{"http://10.0.0.2/", false, -1},
		{"http://notexample.com/", false, -1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s batch=%v", tt.give, tt.batch), func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, tt.give, nil)
			require.NoError(t, err)
			if tt.batch {
				req.Header.Set("X-Tier", "batch")
			}
			got := ds.lookup(req)
			if tt.want < 0 {
				assert.Nil(t, got)
				assert.Nil(t, d.Policy(req))
				return
			}
			assert.Same(t, ds.policies[tt.want], got)
			assert.Same(t, ds.policies[tt.want].policy, d.Policy(req))
		})
	}
}

// TestInherit checks that a destination takes each setting it leaves unset
// from the defaults, and keeps its own.
func TestInherit(t *testing.T) {
	one, two := 1, 2
	second, hedge := time.Second, &Hedging{Delay: time.Millisecond, MaxHedges: 1}
	def := Destination{MaxRetries: &one, AttemptTimeout: &second, Hedging: hedge,
		Backoff: &retryhttp.CustomizedDelayFnOptions{Base: time.Millisecond}, RetryableStatusCodes: []int{500}}
	tests := []struct {
		name string
		give Destination
		want Destination
	}{
		{"all inherited", Destination{Host: "a.test"}, Destination{Host: "a.test", MaxRetries: &one,
			AttemptTimeout: &second, Hedging: hedge, Backoff: def.Backoff, RetryableStatusCodes: []int{500}}},
		{"own kept", Destination{Host: "a.test", MaxRetries: &two, RetryableStatusCodes: []int{}, Hedging: &Hedging{}},
			Destination{Host: "a.test", MaxRetries: &two, AttemptTimeout: &second, Hedging: &Hedging{},
				Backoff: def.Backoff, RetryableStatusCodes: []int{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, inherit(tt.give, def))
		})
	}
	assert.Empty(t, options(Destination{}), "nothing set: no options")
	assert.Len(t, options(def), 5, "one option per setting")
}
