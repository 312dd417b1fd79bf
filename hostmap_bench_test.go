package retryhttp

import (
	"strconv"
	"testing"
)

// BenchmarkHostMapNewHost measures adding a destination to a host map
// that is full at 100,000 hosts, so that each new host also evicts one
// (issue 13's "a new destination host" row: O(1), at most 5µs):
//
//	go test -run '^$' -bench HostMap -benchtime 100000x .
func BenchmarkHostMapNewHost(b *testing.B) {
	const hosts = 100_000
	h := newHostMap(hosts, func(hostKey) *hostState { return &hostState{capacity: tokenScale} })
	for i := range hosts {
		h.getOrCreate(hostKey{"http", "host-" + strconv.Itoa(i) + ".example"})
	}
	keys := make([]hostKey, b.N)
	for i := range keys {
		keys[i] = hostKey{"http", "new-" + strconv.Itoa(i) + ".example"}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range keys {
		h.getOrCreate(keys[i])
	}
}

// BenchmarkHostMapGet measures finding a host among 100,000.
func BenchmarkHostMapGet(b *testing.B) {
	const hosts = 100_000
	h := newHostMap(hosts, func(hostKey) *hostState { return &hostState{capacity: tokenScale} })
	for i := range hosts {
		h.getOrCreate(hostKey{"http", "host-" + strconv.Itoa(i) + ".example"})
	}
	k := hostKey{"http", "host-4242.example"}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, ok := h.get(k); !ok {
			b.Fatal("missing")
		}
	}
}

// tinyValue is a host map value that costs nothing to make, to measure
// the map alone.
type tinyValue struct{}

func (*tinyValue) idle() bool { return false }
func (*tinyValue) busy() bool { return false }

// BenchmarkHostMapNewHostTiny is BenchmarkHostMapNewHost with values that
// cost nothing to make: the map's own share.
func BenchmarkHostMapNewHostTiny(b *testing.B) {
	const hosts = 100_000
	h := newHostMap(hosts, func(hostKey) *tinyValue { return &tinyValue{} })
	for i := range hosts {
		h.getOrCreate(hostKey{"http", "host-" + strconv.Itoa(i) + ".example"})
	}
	keys := make([]hostKey, b.N)
	for i := range keys {
		keys[i] = hostKey{"http", "new-" + strconv.Itoa(i) + ".example"}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range keys {
		h.getOrCreate(keys[i])
	}
}
