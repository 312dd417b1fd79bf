package retryhttp_test

import (
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

// The cost rows of issue 13 off the happy path, each beside the bare
// in-memory transport doing the same work: one 503 then 200 (bare: two
// round trips), a 64 KiB POST that gets an injected key, a hedged GET
// whose hedge never fires. docs/performance.md reads them; callgrind turns
// them into instruction counts (bench/ has the script).

// flipTransport answers 503 and 200 in turn, in memory: every logical
// request of a sequential benchmark is one failure and one retry.
type flipTransport struct{ n atomic.Int64 }

func (f *flipTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	status := http.StatusOK
	if f.n.Add(1)%2 == 1 {
		status = http.StatusServiceUnavailable
	}
	return &http.Response{StatusCode: status, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
}

func zeroDelay(retryhttp.Attempt) time.Duration { return 0 }

// newRetrying is the Transport of the retry row: waits zero, and no budget
// (with half the attempts failing, a budget would rightly refuse most
// retries).
func newRetrying(base http.RoundTripper) *retryhttp.Transport {
	return retryhttp.New(retryhttp.WithTransport(base), retryhttp.WithDelayFn(zeroDelay), retryhttp.WithRetryBudget(nil))
}

// newHedging is the Transport of the hedge row: a hedge delay no test
// reaches.
func newHedging(base http.RoundTripper) *retryhttp.Transport {
	return retryhttp.New(retryhttp.WithTransport(base), retryhttp.WithHedging(time.Hour, 1))
}

// bareRetry sends what a retry costs the bare transport: two round trips,
// the first answered 503.
func bareRetry(rt http.RoundTripper, url string) error {
	req, err := newGET(url)
	if err != nil {
		return err
	}
	res, err := rt.RoundTrip(req)
	if err != nil {
		return err
	}
	res.Body.Close()
	return roundTripOnce(rt, url, newGET)
}

// costRows are the rows: name, the bare transport's work, ours.
func costRows() []struct {
	name       string
	bare, ours func(b *testing.B) error
} {
	const url = "http://example.test/"
	flip, flipOurs := &flipTransport{}, &flipTransport{}
	retrying := newRetrying(flipOurs)
	keyed := retryhttp.New(retryhttp.WithTransport(memTransport{}))
	hedging := newHedging(memTransport{})
	return []struct {
		name       string
		bare, ours func(b *testing.B) error
	}{
		{"Retry503",
			func(*testing.B) error { return bareRetry(flip, url) },
			func(*testing.B) error { return roundTripOnce(retrying, url, newGET) }},
		{"POST64KiBInjectedKey",
			func(*testing.B) error { return roundTripOnce(memTransport{}, url, newPOST) },
			func(*testing.B) error { return roundTripOnce(keyed, url, newPOST) }},
		{"HedgedGET",
			func(*testing.B) error { return roundTripOnce(memTransport{}, url, newGET) },
			func(*testing.B) error { return roundTripOnce(hedging, url, newGET) }},
	}
}

func benchCost(b *testing.B, row string, ours bool) {
	for _, r := range costRows() {
		if r.name != row {
			continue
		}
		f := r.bare
		if ours {
			f = r.ours
		}
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if err := f(b); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	b.Fatalf("no row %q", row)
}

// BenchmarkCost… are the rows, each a pair: the bare transport's work and
// ours. One name per benchmark, so that callgrind can run one alone.
func BenchmarkCostRetry503Bare(b *testing.B)             { benchCost(b, "Retry503", false) }
func BenchmarkCostRetry503(b *testing.B)                 { benchCost(b, "Retry503", true) }
func BenchmarkCostPOST64KiBInjectedKeyBare(b *testing.B) { benchCost(b, "POST64KiBInjectedKey", false) }
func BenchmarkCostPOST64KiBInjectedKey(b *testing.B)     { benchCost(b, "POST64KiBInjectedKey", true) }
func BenchmarkCostHedgedGETBare(b *testing.B)            { benchCost(b, "HedgedGET", false) }
func BenchmarkCostHedgedGET(b *testing.B)                { benchCost(b, "HedgedGET", true) }
