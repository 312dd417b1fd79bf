package storm

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/seed2409de8f/retryhttp/inbound"
	"github.com/stretchr/testify/assert"
)

const hops = 5 // retrying clients between the caller and the dead tail

// TestAmplificationChain prints the second table of docs/storms-lab.md: a chain
// caller → A → B → C → D → tail, where each of the five clients (the
// caller's and those of the four proxies A to D) is a library with its
// defaults, and the tail answers every request with 503. A proxy answers
// its caller with the status it got, or 502 on an error. Without a budget,
// each hop multiplies: (retries+1)^5 tail hits per logical request. With
// retryhttp's budget, each hop adds at most 10 retries over its lifetime.
// With the cross-hop signal as well (inbound.Pushback on every server),
// only the hop above the tail retries: its 10 retries in all.
func TestAmplificationChain(t *testing.T) {
	const signal = "retryhttp defaults + cross-hop signal"
	tests := []struct {
		lib      string
		requests int
		want     func(got float64) bool
	}{
		{lib: "no retries", requests: 20, want: func(got float64) bool { return got == 1 }},
		// Each hop's budget adds its 10 retries and at most the probes of
		// its parked retries.
		{lib: "retryhttp defaults", requests: 1, want: func(got float64) bool { return got <= 1+(10+probes)*hops }},
		{lib: "retryhttp defaults", requests: 100, want: func(got float64) bool { return got <= 1+(10+probes)*hops/100.0 }},
		{lib: "retryhttp defaults", requests: 1000, want: func(got float64) bool { return got <= 1+(10+probes)*hops/1000.0 }},
		{lib: signal, requests: 1, want: func(got float64) bool { return got >= 4 && got <= 4+probes }},
		{lib: signal, requests: 100, want: func(got float64) bool { return got >= 1+10/100.0 && got <= 1+(10+probes)/100.0 }},
		{lib: signal, requests: 1000, want: func(got float64) bool { return got >= 1+10/1000.0 && got <= 1+(10+probes)/1000.0 }},
		{lib: "retryhttp, budget off", requests: 1, want: func(got float64) bool { return got == 1024 }},
		{lib: "hashicorp/go-retryablehttp v0.7.8 defaults", requests: 1, want: func(got float64) bool { return got == 3125 }},
		{lib: "failsafe-go v0.9.8 failsafehttp defaults", requests: 1, want: func(got float64) bool { return got == 243 }},
	}
	libs := map[string]library{}
	for _, lib := range libraries() {
		libs[lib.name] = lib
	}
	libs[signal] = library{name: signal, newClient: libs["retryhttp defaults"].newClient, pushback: true}
	var table strings.Builder
	fmt.Fprintf(&table, "\nMeasured amplification through %d retrying hops, dead tail:\n\n", hops)
	fmt.Fprintf(&table, "| client at every hop | logical requests | tail hits per logical request |\n|---|---|---|\n")
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d", tt.lib, tt.requests), func(t *testing.T) {
			lib, ok := libs[tt.lib]
			if !assert.True(t, ok, tt.lib) {
				return
			}
			got := chain(t, lib, tt.requests)
			fmt.Fprintf(&table, "| %s | %d | %.2f× |\n", tt.lib, tt.requests, got)
			assert.True(t, tt.want(got), "got %.2f", got)
		})
	}
	t.Log(table.String())
}

// chain builds the chain with lib's clients (and inbound.Pushback on
// every server if lib says so), sends requests GETs through it one after
// the other, and returns the tail's hits per request.
func chain(t *testing.T, lib library, requests int) float64 {
	newClient := lib.newClient
	wrap := func(h http.HandlerFunc) http.Handler {
		if lib.pushback {
			return inbound.Pushback(h)
		}
		return h
	}
	var hits atomic.Int64
	tail := httptest.NewServer(wrap(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer tail.Close()

	next := tail.URL
	for range hops - 1 {
		c := newClient()
		defer c.close()
		target := next
		proxy := httptest.NewServer(wrap(func(w http.ResponseWriter, r *http.Request) {
			req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, target, nil)
			res, err := c.Do(req)
			if err != nil {
				w.WriteHeader(http.StatusBadGateway)
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			w.WriteHeader(res.StatusCode)
		}))
		defer proxy.Close()
		next = proxy.URL
	}

	caller := newClient()
	defer caller.close()
	for range requests {
		res, err := caller.Get(next)
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	}
	return float64(hits.Load()) / float64(requests)
}
