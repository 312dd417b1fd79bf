package retryhttp_test

import (
	"net/http"
	"testing"

	"github.com/seed2409de8f/retryhttp"
)

// The breaker's cost on the happy path: a GET answered 200 at once by an
// in-memory base transport, through a Transport without and with a circuit
// breaker, as top-level benchmarks so that an instruction count (callgrind)
// of each can be taken alone:
//
//	go test -c -o /tmp/s.test .
//	GOGC=off GOMAXPROCS=1 GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off valgrind --tool=callgrind \
//	    /tmp/s.test -test.run '^$' -test.bench '^BenchmarkCostGetBreaker$' -test.benchtime=20000x
//
// at two counts; the difference over the difference of the counts is the
// cost of one request (issue 13's "happy GET with a circuit breaker" row).
// (valgrind does not know RDTSCP, which Go uses when the CPU has it.)

func BenchmarkCostGetPlain(b *testing.B) {
	benchGetOnce(b, retryhttp.New(retryhttp.WithTransport(memTransport{})))
}

func BenchmarkCostGetBreaker(b *testing.B) {
	benchGetOnce(b, retryhttp.New(retryhttp.WithTransport(memTransport{}),
		retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{})))
}

// benchGetOnce sends b.N GETs through rt, one request made beforehand.
func benchGetOnce(b *testing.B, rt http.RoundTripper) {
	req, err := http.NewRequest(http.MethodGet, "http://example.test/", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		res.Body.Close()
	}
}

// BenchmarkBreakerParallel sends GETs to one host from all the
// benchmark's goroutines (b.RunParallel: GOMAXPROCS of them), directly,
// through a Transport, and through a Transport with a circuit breaker: a
// closed circuit takes no lock, so the last should scale as the second
// does.
func BenchmarkBreakerParallel(b *testing.B) {
	for _, tr := range []struct {
		name string
		rt   http.RoundTripper
	}{
		{"bare", memTransport{}},
		{"retryhttp", retryhttp.New(retryhttp.WithTransport(memTransport{}))},
		{"breaker", retryhttp.New(retryhttp.WithTransport(memTransport{}),
			retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{}))},
	} {
		b.Run(tr.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				req, err := http.NewRequest(http.MethodGet, "http://example.test/", nil)
				if err != nil {
					b.Error(err)
					return
				}
				for pb.Next() {
					res, err := tr.rt.RoundTrip(req)
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
