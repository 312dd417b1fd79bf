package destinations_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/destinations"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDestinationsApplyPerServer sends one GET to each of four loopback
// servers that always fail, through one Transport: the attempts each server
// sees show which policy applied to it.
func TestDestinationsApplyPerServer(t *testing.T) {
	payments := newCountingServer(t, always(http.StatusServiceUnavailable))
	search := newCountingServer(t, always(http.StatusServiceUnavailable))
	legacy := newCountingServer(t, always(http.StatusInternalServerError))
	other := newCountingServer(t, always(http.StatusServiceUnavailable))

	d, err := destinations.New(destinations.Config{
		Destinations: []destinations.Destination{
			{Name: "payments", Host: "payments.example.test", MaxRetries: ptr(0)},
			{Host: "*.search.example.test", MaxRetries: ptr(1)},
			// 500 is not retried by default; this destination retries it.
			{Host: "legacy.example.test", RetryableStatusCodes: []int{500}},
		},
	})
	require.NoError(t, err)
	tr := newTransport(t, retryhttp.WithTransport(loopbackNames(t)), noDelay, unlimitedBudget,
		retryhttp.WithMaxRetries(2), retryhttp.WithPolicyFunc(d.Policy))

	getVia(t, tr, "http://payments.example.test:"+payments.port()+"/")
	getVia(t, tr, "http://eu.search.example.test:"+search.port()+"/")
	getVia(t, tr, "http://legacy.example.test:"+legacy.port()+"/")
	getVia(t, tr, "http://other.example.test:"+other.port()+"/")

	assert.EqualValues(t, 1, payments.attempts.Load(), "payments: maxRetries 0")
	assert.EqualValues(t, 2, search.attempts.Load(), "search: maxRetries 1, through the wildcard")
	assert.EqualValues(t, 3, legacy.attempts.Load(), "legacy: the transport's 2 retries, on 500")
	assert.EqualValues(t, 3, other.attempts.Load(), "unmatched: the transport's 2 retries")
}

// TestDestinationsDefaultsApplyToEveryRequest checks that the defaults of a
// config reach unmatched requests and the destinations that leave the
// setting unset, over the transport's option (lookup_internal_test.go's
// TestInherit checks the fields one by one).
func TestDestinationsDefaultsApplyToEveryRequest(t *testing.T) {
	matched := newCountingServer(t, always(http.StatusServiceUnavailable))
	other := newCountingServer(t, always(http.StatusServiceUnavailable))
	d, err := destinations.New(destinations.Config{
		Defaults: destinations.Destination{MaxRetries: ptr(1), AttemptTimeout: ptr(time.Second)},
		Destinations: []destinations.Destination{
			{Host: "a.example.test", AttemptTimeout: ptr(2 * time.Second)},
		},
	})
	require.NoError(t, err)
	tr := newTransport(t, retryhttp.WithTransport(loopbackNames(t)), noDelay, unlimitedBudget,
		retryhttp.WithMaxRetries(5), retryhttp.WithPolicyFunc(d.Policy))

	getVia(t, tr, "http://a.example.test:"+matched.port()+"/")
	getVia(t, tr, "http://b.example.test:"+other.port()+"/")
	assert.EqualValues(t, 2, matched.attempts.Load(), "a destination: maxRetries inherited from the defaults")
	assert.EqualValues(t, 2, other.attempts.Load(), "unmatched: the defaults' maxRetries")
}

// TestDestinationsBudgets checks a destination's own budget, the budget
// turned off, and the transport's budget, on three loopback servers that
// always fail. Parking is off, so that the counts are the buckets'.
func TestDestinationsBudgets(t *testing.T) {
	own := newCountingServer(t, always(http.StatusServiceUnavailable))
	off := newCountingServer(t, always(http.StatusServiceUnavailable))
	shared := newCountingServer(t, always(http.StatusServiceUnavailable))
	d, err := destinations.New(destinations.Config{Destinations: []destinations.Destination{
		{Host: "own.test", Budget: &retryhttp.RetryBudgetOptions{Capacity: 2, NoParking: true}},
		{Host: "off.test", NoBudget: true},
	}})
	require.NoError(t, err)
	tr := newTransport(t, retryhttp.WithTransport(loopbackNames(t)), noDelay,
		noParking(retryhttp.RetryBudgetOptions{Capacity: 5}),
		retryhttp.WithPolicyFunc(d.Policy))
	for range 4 {
		getVia(t, tr, "http://own.test:"+own.port()+"/")
		getVia(t, tr, "http://off.test:"+off.port()+"/")
		getVia(t, tr, "http://shared.test:"+shared.port()+"/")
	}
	assert.EqualValues(t, 4+2, own.attempts.Load(), "own budget: 2 retries")
	assert.EqualValues(t, 4*4, off.attempts.Load(), "no budget: 3 retries for each")
	assert.EqualValues(t, 4+5, shared.attempts.Load(), "the transport's budget: 5 retries")
}

// TestDestinationsBudgetKeptAcrossSet checks that Set keeps the state of a
// destination's own budget when its options do not change, and starts a
// new one when they do.
func TestDestinationsBudgetKeptAcrossSet(t *testing.T) {
	srv := newCountingServer(t, always(http.StatusServiceUnavailable))
	cfg := func(capacity int) destinations.Config {
		return destinations.Config{Destinations: []destinations.Destination{
			{Host: "127.0.0.1", MaxRetries: ptr(5), Budget: &retryhttp.RetryBudgetOptions{Capacity: capacity, NoParking: true}},
		}}
	}
	d, err := destinations.New(cfg(2))
	require.NoError(t, err)
	tr := newTransport(t, noDelay, retryhttp.WithPolicyFunc(d.Policy))

	getVia(t, tr, srv.URL) // 1 + 2 retries: the budget is empty
	require.NoError(t, d.Set(cfg(2)))
	getVia(t, tr, srv.URL) // still empty: 1
	assert.EqualValues(t, 4, srv.attempts.Load())
	require.NoError(t, d.Set(cfg(3)))
	getVia(t, tr, srv.URL) // a new budget: 1 + 3
	assert.EqualValues(t, 8, srv.attempts.Load())
}

// TestDestinationsReloadUnderLoad replaces the policies again and again
// while requests run (run it with -race). Each request must run with one
// policy throughout: against a server that always fails, 1 attempt
// (maxRetries 0) or 3 (maxRetries 2), never another count.
func TestDestinationsReloadUnderLoad(t *testing.T) {
	var mu sync.Mutex
	perRequest := map[string]int{}
	srv := newCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		perRequest[r.Header.Get("X-Request-Id")]++
		mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	cfg := func(retries int) destinations.Config {
		return destinations.Config{Destinations: []destinations.Destination{
			{Host: "127.0.0.1", MaxRetries: ptr(retries), NoBudget: true},
		}}
	}
	d, err := destinations.New(cfg(0))
	require.NoError(t, err)
	// Each wait yields, so that reloads land between the attempts of one
	// request.
	yield := retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return time.Microsecond })
	tr := newTransport(t, yield, retryhttp.WithPolicyFunc(d.Policy))

	bad := filepath.Join(t.TempDir(), "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"destinations": [{"host": "127.0.0.1", "maxRetries": -1}]}`), 0o600))

	const workers, perWorker = 4, 50
	var stop atomic.Bool
	var reloads, badReloads atomic.Int64
	reloaded := make(chan struct{})
	go func() {
		defer close(reloaded)
		for i := 0; !stop.Load(); i++ {
			if i%10 == 9 {
				if d.LoadFile(bad) != nil {
					badReloads.Add(1)
				}
			} else if d.Set(cfg(2*(i%2))) == nil {
				reloads.Add(1)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				req := mustRequest(t, context.Background(), srv.URL)
				req.Header.Set("X-Request-Id", fmt.Sprintf("%d-%d", w, i))
				res, err := tr.RoundTrip(req)
				if assert.NoError(t, err) {
					res.Body.Close()
				}
			}
		}()
	}
	wg.Wait()
	stop.Store(true)
	<-reloaded

	counts := map[int]int{}
	mu.Lock()
	for _, n := range perRequest {
		counts[n]++
	}
	mu.Unlock()
	assert.Len(t, perRequest, workers*perWorker)
	assert.Equal(t, workers*perWorker, counts[1]+counts[3], "attempts per request: %v", counts)
	assert.Positive(t, counts[1], "requests that started under maxRetries 0")
	assert.Positive(t, counts[3], "requests that started under maxRetries 2")
	assert.Positive(t, reloads.Load())
	assert.Positive(t, badReloads.Load())
}

// TestDestinationsLoadFile checks that a valid file replaces the policies
// and that a bad one keeps them, with an error naming the file and the key.
func TestDestinationsLoadFile(t *testing.T) {
	srv := newCountingServer(t, always(http.StatusServiceUnavailable))
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	good := write("good.json", `{"destinations": [{"host": "a.test", "maxRetries": 1}]}`)
	bad := write("bad.json", `{"destinations": [{"host": "a.test", "backoff": {"base": "-1s"}}]}`)

	var d destinations.Table
	req := mustRequest(t, context.Background(), "http://a.test:"+srv.port()+"/")
	assert.Nil(t, d.Policy(req), "zero value: none")

	require.NoError(t, d.LoadFile(good))
	p := d.Policy(req)
	require.NotNil(t, p)
	tr := newTransport(t, retryhttp.WithTransport(loopbackNames(t)), noDelay, unlimitedBudget,
		retryhttp.WithPolicyFunc(d.Policy))
	getVia(t, tr, req.URL.String())
	assert.EqualValues(t, 2, srv.attempts.Load(), "the file's maxRetries")

	err := d.LoadFile(bad)
	require.Error(t, err)
	assert.Equal(t, `retryhttp: `+bad+`: destinations[0].backoff.base: must be a positive duration, got "-1s"`, err.Error())
	var ce *destinations.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "destinations[0].backoff.base", ce.Path)
	assert.Same(t, p, d.Policy(req), "the bad file changed nothing")

	err = d.LoadFile(filepath.Join(dir, "missing.json"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.Same(t, p, d.Policy(req))
}

// TestDestinationsPolicyNoAllocs checks that finding a request's policy
// allocates nothing, and neither does a GET through a Transport that has
// them: with a matching host, a host and port, a wildcard, and no match.
func TestDestinationsPolicyNoAllocs(t *testing.T) {
	d, err := destinations.New(destinations.Config{Destinations: []destinations.Destination{
		{Host: "exact.test", MaxRetries: ptr(1)},
		{Host: "port.test:8080", MaxRetries: ptr(1)},
		{Host: "*.wild.test", MaxRetries: ptr(1)},
	}})
	require.NoError(t, err)
	ours := retryhttp.New(retryhttp.WithTransport(memTransport{}), retryhttp.WithPolicyFunc(d.Policy))
	for _, url := range []string{"http://exact.test/", "http://port.test:8080/", "http://a.b.wild.test/", "http://other.test/"} {
		t.Run(url, func(t *testing.T) {
			req := mustRequest(t, context.Background(), url)
			assert.Zero(t, testing.AllocsPerRun(100, func() { d.Policy(req) }), "the lookup")
			require.NoError(t, roundTripOnce(ours, url))
			bare := testing.AllocsPerRun(100, mustRoundTrip(memTransport{}, url))
			got := testing.AllocsPerRun(100, mustRoundTrip(ours, url))
			assert.Positive(t, bare)
			assert.LessOrEqual(t, got, bare, "allocations per GET: bare %v, with destinations %v", bare, got)
		})
	}
}

// memTransport answers 200 to every request, in memory: for counting the
// allocations and the time of the transport's own work alone.
type memTransport struct{}

func (memTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
}

// roundTripOnce sends a GET to url through rt and closes the response.
func roundTripOnce(rt http.RoundTripper, url string) error {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := rt.RoundTrip(req)
	if err != nil {
		return err
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", res.StatusCode)
	}
	return nil
}

// mustRoundTrip is roundTripOnce for testing.AllocsPerRun.
func mustRoundTrip(rt http.RoundTripper, url string) func() {
	return func() {
		if err := roundTripOnce(rt, url); err != nil {
			panic(err)
		}
	}
}

// BenchmarkDestinations measures the happy path of a GET (in-memory base
// transport) through a Transport without destination policies, and with 100
// of them: exact hosts, host:port pairs and wildcards, the request matching
// the last wildcard or nothing.
func BenchmarkDestinations(b *testing.B) {
	var dests []destinations.Destination
	for i := range 100 {
		switch i % 3 {
		case 0:
			dests = append(dests, destinations.Destination{Host: fmt.Sprintf("svc%d.test", i), MaxRetries: ptr(1)})
		case 1:
			dests = append(dests, destinations.Destination{Host: fmt.Sprintf("svc%d.test:8080", i), MaxRetries: ptr(1)})
		default:
			dests = append(dests, destinations.Destination{Host: fmt.Sprintf("*.zone%d.test", i), MaxRetries: ptr(1)})
		}
	}
	d, err := destinations.New(destinations.Config{Destinations: dests})
	require.NoError(b, err)
	tests := []struct {
		name string
		tr   *retryhttp.Transport
		url  string
	}{
		{"none", retryhttp.New(retryhttp.WithTransport(memTransport{})), "http://a.zone98.test/"},
		{"100/exact", retryhttp.New(retryhttp.WithTransport(memTransport{}), retryhttp.WithPolicyFunc(d.Policy)), "http://svc99.test/"},
		{"100/wildcard", retryhttp.New(retryhttp.WithTransport(memTransport{}), retryhttp.WithPolicyFunc(d.Policy)), "http://a.b.zone98.test/"},
		{"100/unmatched", retryhttp.New(retryhttp.WithTransport(memTransport{}), retryhttp.WithPolicyFunc(d.Policy)), "http://a.b.other.test/"},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if err := roundTripOnce(tt.tr, tt.url); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// The lookup alone.
	for _, tt := range tests[1:] {
		req := mustRequest(b, context.Background(), tt.url)
		b.Run("lookup/"+strings.TrimPrefix(tt.name, "100/"), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				d.Policy(req)
			}
		})
	}
}
