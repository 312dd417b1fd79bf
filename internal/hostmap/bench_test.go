package hostmap

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
	h := New(hosts, func(Key) *testValue { return new(testValue) })
	for i := range hosts {
		h.GetOrCreate(Key{"http", "host-" + strconv.Itoa(i) + ".example"})
	}
	keys := make([]Key, b.N)
	for i := range keys {
		keys[i] = Key{"http", "new-" + strconv.Itoa(i) + ".example"}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range keys {
		h.GetOrCreate(keys[i])
	}
}

// BenchmarkHostMapGet measures finding a host among 100,000.
func BenchmarkHostMapGet(b *testing.B) {
	const hosts = 100_000
	h := New(hosts, func(Key) *testValue { return new(testValue) })
	for i := range hosts {
		h.GetOrCreate(Key{"http", "host-" + strconv.Itoa(i) + ".example"})
	}
	k := Key{"http", "host-4242.example"}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, ok := h.Get(k); !ok {
			b.Fatal("missing")
		}
	}
}
