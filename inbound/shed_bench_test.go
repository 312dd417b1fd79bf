package inbound_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/seed2409de8f/retryhttp/inbound"
	"github.com/stretchr/testify/assert"
)

// nopWriter is a ResponseWriter that keeps nothing, so that only the
// middleware's own cost is measured.
type nopWriter struct{ h http.Header }

func (w nopWriter) Header() http.Header       { return w.h }
func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }
func (nopWriter) WriteHeader(int)             {}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })

// shedderCases are the handlers the benchmark and the allocation test
// compare: the bare handler, and the handler behind each kind of shedder.
func shedderCases() []struct {
	name string
	h    http.Handler
} {
	return []struct {
		name string
		h    http.Handler
	}{
		{"bare", okHandler},
		{"fixed", inbound.NewLoadShedder(inbound.LoadShedderOptions{Limit: 1 << 20}).Handler(okHandler)},
		{"fixed+queue+hooks", inbound.NewLoadShedder(inbound.LoadShedderOptions{
			Limit: 1 << 20, MaxQueue: 10,
			MustPass:   func(r *http.Request) bool { return r.URL.Path == "/healthz" },
			OnDecision: func(inbound.ShedDecision) {},
		}).Handler(okHandler)},
		{"adaptive", inbound.NewLoadShedder(inbound.LoadShedderOptions{
			Adaptive: true, MinLimit: 1 << 20, MaxLimit: 1 << 20,
		}).Handler(okHandler)},
	}
}

// TestLoadShedderHappyPathAllocatesNothing: a request admitted at once
// costs no allocation, with any kind of limit.
func TestLoadShedderHappyPathAllocatesNothing(t *testing.T) {
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	w := nopWriter{h: http.Header{}}
	for _, tt := range shedderCases() {
		allocs := testing.AllocsPerRun(1000, func() { tt.h.ServeHTTP(w, req) })
		assert.Zero(t, allocs, tt.name)
	}
}

// BenchmarkLoadShedder compares a trivial handler, bare and behind each
// kind of shedder, from all the benchmark's goroutines at once (the
// shedder's counters are shared). go test -run '^$' -bench LoadShedder
// -cpu 1,2 .
func BenchmarkLoadShedder(b *testing.B) {
	for _, tt := range shedderCases() {
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				req := httptest.NewRequest(http.MethodGet, "/", nil)
				w := nopWriter{h: http.Header{}}
				for pb.Next() {
					tt.h.ServeHTTP(w, req)
				}
			})
		})
	}
}

// BenchmarkLoadShedderLoopback is BenchmarkLoadShedder through a real
// server and client on loopback: what a request costs with and without the
// shedder, in the units a service sees. go test -run '^$' -bench
// LoadShedderLoopback .
func BenchmarkLoadShedderLoopback(b *testing.B) {
	for _, tt := range shedderCases() {
		b.Run(tt.name, func(b *testing.B) {
			srv := httptest.NewServer(tt.h)
			defer srv.Close()
			tr := &http.Transport{MaxIdleConnsPerHost: 64}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					res, err := c.Get(srv.URL)
					if err != nil {
						b.Error(err)
						return
					}
					res.Body.Close()
				}
			})
		})
	}
}
