package retryhttp_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/inbound"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// memTransport is an in-memory base transport: it reads and closes the
// request body and answers 200 with no body.
type memTransport struct{}

func (memTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, err := io.Copy(io.Discard, req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
}

// happyPayload is the body of the POST happy path: 64 KiB.
var happyPayload = bytes.Repeat([]byte("0123456789abcdef"), 64<<10/16)

// happyRequests are the requests of the happy path, built the same way for
// the bare transport and ours so that the difference is the transport's.
// http.NewRequest sets GetBody for a *bytes.Reader.
var happyRequests = []struct {
	name string
	give func(url string) (*http.Request, error)
}{
	{"GET", newGET},
	{"POST64KiB", newPOST},
	{"POST64KiBWithKey", newPOSTWithKey},
}

func newGET(url string) (*http.Request, error) {
	return http.NewRequest(http.MethodGet, url, nil)
}

func newPOST(url string) (*http.Request, error) {
	return http.NewRequest(http.MethodPost, url, bytes.NewReader(happyPayload))
}

func newPOSTWithKey(url string) (*http.Request, error) {
	req, err := newPOST(url)
	if err == nil {
		req.Header["Idempotency-Key"] = []string{"8e03978e-40d5-43e8-bc93-6894a57f9324"}
	}
	return req, err
}

// roundTripOnce sends one request built by newReq through rt and closes the
// response.
func roundTripOnce(rt http.RoundTripper, url string, newReq func(string) (*http.Request, error)) error {
	req, err := newReq(url)
	if err != nil {
		return err
	}
	res, err := rt.RoundTrip(req)
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		res.Body.Close()
		return &statusError{res.StatusCode}
	}
	_, err = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return err
}

type statusError struct{ code int }

func (e *statusError) Error() string { return http.StatusText(e.code) }

func benchmarkHappyPath(b *testing.B, url string, bare, ours http.RoundTripper) {
	transports := []struct {
		name string
		rt   http.RoundTripper
	}{
		{"bare", bare},
		{"retryhttp", ours},
	}
	for _, tr := range transports {
		b.Run(tr.name, func(b *testing.B) {
			for _, rq := range happyRequests {
				b.Run(rq.name, func(b *testing.B) {
					b.ReportAllocs()
					for i := 0; i < b.N; i++ {
						if err := roundTripOnce(tr.rt, url, rq.give); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}

// BenchmarkHappyPath measures a request answered 200 at once by an in-memory
// base transport, sent directly and through a Transport.
func BenchmarkHappyPath(b *testing.B) {
	benchmarkHappyPath(b, "http://example.test/", memTransport{}, retryhttp.New(retryhttp.WithTransport(memTransport{})))
}

// BenchmarkHappyPathLoopback is BenchmarkHappyPath over a real httptest
// server on loopback, with a pooled base transport of each side's own.
func BenchmarkHappyPathLoopback(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	bare := cleanhttp.DefaultPooledTransport()
	defer bare.CloseIdleConnections()
	ours := retryhttp.New(retryhttp.WithTransport(cleanhttp.DefaultPooledTransport()))
	defer ours.CloseIdleConnections()

	benchmarkHappyPath(b, srv.URL, bare, ours)
}

// bytesPerRun is testing.AllocsPerRun for bytes: the average number of bytes
// allocated by one call of f, after a warm-up call.
func bytesPerRun(runs int, f func()) uint64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	f()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < runs; i++ {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / uint64(runs)
}

// writeWatchAllocs bounds what watching the writes of a request not
// guessed idempotent costs, once per request, through a base transport
// other than *http.Transport (writewatch.go): the watch with its trace, the
// trace's callback, the context that carries the trace and the request
// copy that carries the context; one more for margin.
const writeWatchAllocs = 5

// TestHappyPathAddsNoAllocs checks that on the happy path (200 on the first
// attempt) the transport allocates nothing beyond what the base transport
// does: not for a GET, and no copy of a 64 KiB body that has GetBody. A POST
// without an idempotency key is measured with key injection off, since an
// injected key needs a copy of the request and its header; through this
// in-memory base, which the transport cannot know not to replay requests by
// itself, it costs the write watch and nothing else.
func TestHappyPathAddsNoAllocs(t *testing.T) {
	const url = "http://example.test/"
	bare := memTransport{}
	ours := retryhttp.New(retryhttp.WithTransport(memTransport{}))
	noKeys := retryhttp.New(retryhttp.WithTransport(memTransport{}), retryhttp.WithIdempotencyKeys(retryhttp.IdempotencyKeys{Disabled: true}))
	tests := []struct {
		name  string
		ours  *retryhttp.Transport
		give  func(string) (*http.Request, error)
		extra float64 // allocations added on purpose
	}{
		{"GET", ours, newGET, 0},
		{"POST64KiB with key", ours, newPOSTWithKey, 0},
		{"POST64KiB keys off", noKeys, newPOST, writeWatchAllocs},
		{"GET keys off", noKeys, newGET, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, roundTripOnce(tt.ours, url, tt.give))
			bareAllocs := testing.AllocsPerRun(100, mustRoundTrip(bare, url, tt.give))
			ourAllocs := testing.AllocsPerRun(100, mustRoundTrip(tt.ours, url, tt.give))
			assert.Positive(t, bareAllocs) // the measure works
			assert.LessOrEqual(t, ourAllocs, bareAllocs+tt.extra, "allocations per request: bare %v, retryhttp %v", bareAllocs, ourAllocs)

			bareBytes := bytesPerRun(100, mustRoundTrip(bare, url, tt.give))
			ourBytes := bytesPerRun(100, mustRoundTrip(tt.ours, url, tt.give))
			assert.Less(t, ourBytes, bareBytes+256+uint64(tt.extra)*256, "bytes per request: bare %d, retryhttp %d", bareBytes, ourBytes)
		})
	}
}

// TestHappyPathDoesNotCopyBody checks that a POST that gets an injected
// idempotency key (the default) still costs no copy of its 64 KiB body, and
// only the few allocations of the key and the request copy that carries it.
func TestHappyPathDoesNotCopyBody(t *testing.T) {
	const url = "http://example.test/"
	bare := memTransport{}
	ours := retryhttp.New(retryhttp.WithTransport(memTransport{}))
	require.NoError(t, roundTripOnce(ours, url, newPOST))

	bareAllocs := testing.AllocsPerRun(100, mustRoundTrip(bare, url, newPOST))
	ourAllocs := testing.AllocsPerRun(100, mustRoundTrip(ours, url, newPOST))
	assert.LessOrEqual(t, ourAllocs, bareAllocs+8+writeWatchAllocs, "allocations per request: bare %v, retryhttp %v", bareAllocs, ourAllocs)

	bareBytes := bytesPerRun(100, mustRoundTrip(bare, url, newPOST))
	ourBytes := bytesPerRun(100, mustRoundTrip(ours, url, newPOST))
	assert.Less(t, ourBytes, bareBytes+2048, "bytes per request: bare %d, retryhttp %d", bareBytes, ourBytes)
}

// mustRoundTrip returns a function that sends one request through rt and
// panics on failure, for testing.AllocsPerRun.
func mustRoundTrip(rt http.RoundTripper, url string, newReq func(string) (*http.Request, error)) func() {
	return func() {
		if err := roundTripOnce(rt, url, newReq); err != nil {
			panic(err)
		}
	}
}

// TestPushbackHappyPathAddsNoAllocs checks that a request whose context carries
// no Pushback, or one that succeeds, costs nothing: the transport's
// happy path with a Pushback context allocates as it does without.
func TestPushbackHappyPathAddsNoAllocs(t *testing.T) {
	tr := retryhttp.New(retryhttp.WithTransport(memTransport{}))
	var ctx context.Context
	h := inbound.Pushback(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { ctx = r.Context() }))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	get := func(ctx context.Context) func(string) (*http.Request, error) {
		return func(url string) (*http.Request, error) {
			return http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		}
	}
	const url = "http://example.test/"
	plain := testing.AllocsPerRun(100, mustRoundTrip(tr, url, get(context.Background())))
	inside := testing.AllocsPerRun(100, mustRoundTrip(tr, url, get(ctx)))
	assert.Equal(t, plain, inside)
}

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
