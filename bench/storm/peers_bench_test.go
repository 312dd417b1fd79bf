package storm

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/hashicorp/go-cleanhttp"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/seed2409de8f/retryhttp"
)

// The peer benchmarks: retryhttp against a bare transport,
// hashicorp/go-retryablehttp (RoundTripper mode) and failsafe-go's
// failsafehttp, each over the same base transport. Names are
// key=value, so that benchstat can put the libraries side by side
// (bench/run.sh: benchstat -col /lib).

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

// payload is the body of the POST rows: 64 KiB.
var payload = bytes.Repeat([]byte("0123456789abcdef"), 64<<10/16)

// peer is one column of the tables: a way to wrap a base transport.
type peer struct {
	name string
	wrap func(base http.RoundTripper) http.RoundTripper
}

// peers are the columns, retryhttp first: benchstat compares the others with
// the first. Waits are zero everywhere, for the retry path.
func peers() []peer {
	return []peer{
		{"retryhttp", func(base http.RoundTripper) http.RoundTripper {
			return retryhttp.New(retryhttp.WithTransport(base), retryhttp.WithDelayFn(noWait))
		}},
		{"retryhttp-nokeys", func(base http.RoundTripper) http.RoundTripper {
			return retryhttp.New(retryhttp.WithTransport(base), retryhttp.WithDelayFn(noWait), retryhttp.WithIdempotencyKeys(retryhttp.IdempotencyKeys{Disabled: true}))
		}},
		{"bare", func(base http.RoundTripper) http.RoundTripper { return base }},
		{"retryablehttp", func(base http.RoundTripper) http.RoundTripper {
			c := retryablehttp.NewClient()
			c.HTTPClient = &http.Client{Transport: base}
			c.Logger = nil
			c.RetryWaitMin, c.RetryWaitMax = 0, 0
			return &retryablehttp.RoundTripper{Client: c}
		}},
		{"failsafehttp", func(base http.RoundTripper) http.RoundTripper {
			return failsafehttp.NewRoundTripper(base, failsafehttp.NewRetryPolicyBuilder().WithDelay(0).Build())
		}},
	}
}

func noWait(retryhttp.Attempt) time.Duration { return 0 }

// request names a way to make the request of a row.
type request struct {
	name string
	make func(url string) (*http.Request, error)
}

// requests are the rows of the happy path and of the retry path.
// http.NewRequest sets GetBody for a *bytes.Reader.
var requests = []request{
	{"GET", newGET},
	{"POST64KiB", newPOST},
}

// keyedPOST is the 64 KiB POST with an Idempotency-Key set by the caller:
// a row of the in-memory happy path only.
var keyedPOST = request{"POST64KiBKeyed", func(url string) (*http.Request, error) {
	req, err := newPOST(url)
	if err == nil {
		req.Header["Idempotency-Key"] = []string{"8e03978e-40d5-43e8-bc93-6894a57f9324"}
	}
	return req, err
}}

// memRequests are the rows of the in-memory happy path.
var memRequests = append(append([]request(nil), requests...), keyedPOST)

func newGET(url string) (*http.Request, error) { return http.NewRequest(http.MethodGet, url, nil) }

func newPOST(url string) (*http.Request, error) {
	return http.NewRequest(http.MethodPost, url, bytes.NewReader(payload))
}

// once sends one request through rt and checks that it ended in a 200.
func once(rt http.RoundTripper, url string, make func(string) (*http.Request, error)) error {
	req, err := make(url)
	if err != nil {
		return err
	}
	res, err := rt.RoundTrip(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if err == nil && res.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %d", res.StatusCode)
	}
	return err
}

// BenchmarkHappyPath: a request answered 200 at once, by an in-memory base
// transport (via=mem) or by a server on loopback (via=loopback). The
// caller-keyed POST is a row of the in-memory path only.
func BenchmarkHappyPath(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer srv.Close()
	for _, via := range []string{"mem", "loopback"} {
		rows := memRequests
		if via == "loopback" {
			rows = requests
		}
		for _, rq := range rows {
			for _, p := range peers() {
				b.Run(fmt.Sprintf("via=%s/req=%s/lib=%s", via, rq.name, p.name), func(b *testing.B) {
					if via == "mem" {
						happyMem(rq.make, p)(b)
						return
					}
					tr := cleanhttp.DefaultPooledTransport()
					defer tr.CloseIdleConnections()
					sequential(p.wrap(tr), srv.URL, rq.make)(b)
				})
			}
		}
	}
}

// BenchmarkParallel: the in-memory GET from 64 goroutines at once, through
// one transport.
func BenchmarkParallel(b *testing.B) {
	for _, p := range peers() {
		b.Run("req=GET64/lib="+p.name, parallel64(p))
	}
}

// happyMem is the body of a via=mem row of BenchmarkHappyPath.
func happyMem(make func(string) (*http.Request, error), p peer) func(*testing.B) {
	return sequential(p.wrap(memTransport{}), "http://example.test/", make)
}

// sequential is the body of a benchmark sending requests made by make
// through rt one after the other.
func sequential(rt http.RoundTripper, url string, make func(string) (*http.Request, error)) func(*testing.B) {
	return func(b *testing.B) {
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if err := once(rt, url, make); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// parallel64 is the body of a row of BenchmarkParallel.
func parallel64(p peer) func(*testing.B) {
	return func(b *testing.B) {
		rt := p.wrap(memTransport{})
		b.ReportAllocs()
		b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := once(rt, "http://example.test/", requests[0].make); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
}

// BenchmarkRetry: the 503→200 path in memory, waits zero. In retryhttp's
// rows the budget is off (WithRetryBudget(nil)): with half the attempts
// failing, the budget would rightly refuse most retries. retryhttp retries a
// POST only when it is safe: here it injects its Idempotency-Key and is told
// that the server honours keys; there is no keys-off POST row, since
// without a key it does not retry a 503 to a POST (by design). The bare
// column is the base transport called twice (twice): what the two attempts
// cost without any library.
func BenchmarkRetry(b *testing.B) {
	for _, rq := range requests {
		for _, p := range peers() {
			if retryRow(rq.name, p.name) {
				b.Run(fmt.Sprintf("req=%s/lib=%s", rq.name, p.name), retry(rq.make, p))
			}
		}
	}
}

// retryRow reports whether BenchmarkRetry has a row for request req and
// library lib.
func retryRow(req, lib string) bool {
	switch {
	case lib == "retryhttp-nokeys" && req != "GET":
		return false
	}
	return true
}

// retry is the body of a row of BenchmarkRetry.
func retry(make func(string) (*http.Request, error), p peer) func(*testing.B) {
	return func(b *testing.B) {
		base := &flipTransport{}
		rt := p.wrap(base)
		if p.name == "bare" {
			rt = twice{base}
		}
		if _, ours := rt.(*retryhttp.Transport); ours {
			rt = retryhttp.New(retryhttp.WithTransport(base), retryhttp.WithDelayFn(noWait),
				retryhttp.WithRetryBudget(nil), retryhttp.WithIdempotencyKeys(retryhttp.IdempotencyKeys{Disabled: p.name != "retryhttp", Honored: true}))
		}
		sequential(rt, "http://example.test/", make)(b)
	}
}

// twice is the bare column of the retry rows: it sends every request twice
// through base, the body rewound through GetBody, and returns the second
// response, closing the first. It is no retry policy: only the two
// attempts' own cost, the floor of any library's.
type twice struct{ base http.RoundTripper }

func (t twice) RoundTrip(req *http.Request) (*http.Response, error) {
	first := req
	if req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		first = new(http.Request)
		*first = *req
		first.Body = body
	}
	res, err := t.base.RoundTrip(first)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return t.base.RoundTrip(req)
}

// BenchmarkStorm reports the amplification of the dead-backend storm of
// blackbox/storm_test.go (50 clients × 100 GETs, a Transport per client, each
// library's defaults but for waits of 1ms) as the metric hits/req. One
// iteration is one whole storm.
func BenchmarkStorm(b *testing.B) {
	names := map[string]string{
		"retryhttp defaults":                         "retryhttp",
		"hashicorp/go-retryablehttp v0.7.8 defaults": "retryablehttp",
		"failsafe-go v0.9.8 failsafehttp defaults":   "failsafehttp",
		"no retries": "bare",
	}
	for _, lib := range libraries() {
		name, ok := names[lib.name]
		if !ok {
			continue
		}
		b.Run("req=dead503/lib="+name, func(b *testing.B) {
			total := 0.0
			for range b.N {
				total += amplification(b, lib.newClient)
			}
			b.ReportMetric(total/float64(b.N), "hits/req")
		})
	}
}
