package blackbox

import (
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/inbound"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// servers is the number of servers of the chain client → S1 → … → S5: S1
// to S4 call the next one through a Transport, S5 is the tail.
const servers = 5

// chainConfig describes a five-hop chain.
type chainConfig struct {
	opts     []retryhttp.Option // options of every Transport, after noDelay
	bare     int                // the server (1 to 5) without Pushback; 0: none
	bareOpts []retryhttp.Option // more options for the bare server's Transport
	none     bool               // no server has Pushback
	// fakeTime gives every Transport a clock of its own, and its budget,
	// that jump to the end of every wait (onFakeTime): a dead tail's
	// parked retries then wait out their bounds (MaxWait) in microseconds,
	// in the order they would in real time; the attempts run in real time.
	fakeTime bool
}

// chain is a running five-hop chain on loopback.
type chain struct {
	client *http.Client
	url    string                // S1's
	hits   [servers]atomic.Int64 // requests seen by S1 to S5
}

// newChain starts the chain with tail as S5's handler. Every hop passes on
// the status it got, or 502 on an error, and the X-Request-Id header.
func newChain(t *testing.T, cfg chainConfig, tail http.HandlerFunc) *chain {
	t.Helper()
	c := &chain{}
	wrap := func(i int, h http.Handler) http.Handler {
		count := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c.hits[i-1].Add(1)
			h.ServeHTTP(w, r)
		})
		if cfg.none || cfg.bare == i {
			return count
		}
		return inbound.Pushback(count)
	}
	transport := func(i int) *retryhttp.Transport {
		opts := append([]retryhttp.Option{testkit.NoDelay}, cfg.opts...)
		if cfg.fakeTime {
			opts = append(opts, testkit.OnFakeTime())
		}
		if cfg.bare == i {
			opts = append(opts, cfg.bareOpts...)
		}
		return testkit.NewTransport(t, opts...)
	}
	next := startHopServer(t, wrap(servers, tail))
	for i := servers - 1; i >= 1; i-- {
		tr, target := transport(i), next
		next = startHopServer(t, wrap(i, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, target, nil)
			if !assert.NoError(t, err) {
				return
			}
			req.Header.Set("X-Request-Id", r.Header.Get("X-Request-Id"))
			res, err := tr.RoundTrip(req)
			if err != nil {
				w.WriteHeader(http.StatusBadGateway)
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			w.WriteHeader(res.StatusCode)
		})))
	}
	c.url = next
	c.client = &http.Client{Transport: transport(0)}
	return c
}

func startHopServer(t *testing.T, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// run sends n GETs through the chain from 8 goroutines and returns how
// many got a 200.
func (c *chain) run(t *testing.T, n int) int {
	var next, ok atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := next.Add(1); id <= int64(n); id = next.Add(1) {
				req, err := http.NewRequest(http.MethodGet, c.url, nil)
				if !assert.NoError(t, err) {
					return
				}
				req.Header.Set("X-Request-Id", strconv.FormatInt(id, 10))
				res, err := c.client.Do(req)
				if !assert.NoError(t, err) {
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode == http.StatusOK {
					ok.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return int(ok.Load())
}

func (c *chain) counts() [servers]int64 {
	var got [servers]int64
	for i := range got {
		got[i] = c.hits[i].Load()
	}
	return got
}

func deadTail(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }

var (
	budgetOff = retryhttp.WithRetryBudget(nil)
	signalOff = retryhttp.WithRetrySignal(false)
)

// TestChainDeadTail measures the requests each server of the five-hop
// chain sees when S5 answers everything with 503. With parking off, counts
// are exact even with concurrent requests: nothing succeeds, so each
// Transport's budget allows exactly its 10 retries, and the signal stops
// every other one. With parking on (the defaults), each budget adds at
// most the probes of its parked retries (testkit.MaxProbes): want is
// then a floor, and want plus MaxProbes per budget on the way a ceiling.
func TestChainDeadTail(t *testing.T) {
	// A budget of its own for each case: a budget shared by the cases
	// would find, when a closed server's port is given again to a later
	// case's server, the host's bucket spent by the earlier case.
	parkingOff := func() []retryhttp.Option {
		return []retryhttp.Option{testkit.NoParking(retryhttp.RetryBudgetOptions{})}
	}
	tests := []struct {
		name     string
		cfg      chainConfig
		requests int
		want     [servers]int64
		parking  bool // the hops' budgets park: counts within probes of want
	}{
		{
			name: "naive: budget off, signal off", requests: 1,
			cfg:  chainConfig{opts: []retryhttp.Option{budgetOff, signalOff}},
			want: [servers]int64{4, 16, 64, 256, 1024},
		},
		{
			name: "signal only, budget off: S4 alone retries", requests: 10,
			cfg:  chainConfig{opts: []retryhttp.Option{budgetOff}},
			want: [servers]int64{10, 10, 10, 10, 40},
		},
		{
			name: "budget only, parking off (no Pushback): 10 retries per hop", requests: 200,
			cfg:  chainConfig{none: true, opts: parkingOff()},
			want: [servers]int64{210, 220, 230, 240, 250},
		},
		{
			name: "budget only, parking off, fresh chain: the first request", requests: 1,
			cfg:  chainConfig{none: true, opts: parkingOff()},
			want: [servers]int64{4, 14, 24, 34, 44},
		},
		{
			name: "budget only (no Pushback): 10 retries and the probes per hop", requests: 200,
			cfg: chainConfig{none: true, fakeTime: true}, parking: true,
			want: [servers]int64{210, 220, 230, 240, 250},
		},
		{
			name: "budget and signal, fresh chain: the first request", requests: 1,
			want: [servers]int64{1, 1, 1, 1, 4},
		},
		{
			name: "budget and signal, parking off", requests: 1000,
			cfg:  chainConfig{opts: parkingOff()},
			want: [servers]int64{1000, 1000, 1000, 1000, 1010},
		},
		{
			name: "budget and signal", requests: 1000, parking: true,
			cfg:  chainConfig{fakeTime: true},
			want: [servers]int64{1000, 1000, 1000, 1000, 1010},
		},
		{
			name: "mixed: S3 without Pushback", requests: 200,
			cfg:  chainConfig{bare: 3, opts: parkingOff()},
			want: [servers]int64{200, 200, 210, 210, 220},
		},
		{
			name: "mixed: S3 unaware (no Pushback, signal off)", requests: 200,
			cfg:  chainConfig{bare: 3, opts: parkingOff(), bareOpts: []retryhttp.Option{signalOff}},
			want: [servers]int64{200, 200, 210, 220, 230},
		},
	}
	t.Parallel()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newChain(t, tt.cfg, deadTail)
			assert.Zero(t, c.run(t, tt.requests))
			got := c.counts()
			t.Logf("| %s | %d | %v | %.3f× |", tt.name, tt.requests, got, float64(got[servers-1])/float64(tt.requests))
			if !tt.parking {
				assert.Equal(t, tt.want, got)
				return
			}
			// Each budget that adds retries (one more per hop) adds at most
			// its probes, and may send a few retries fewer than its bucket
			// holds: a retry that saw a token, and whose delay ends after
			// its host is seen failing (ten failures in a row), parks
			// instead, as in TestAmplificationDeadBackend (S5: 1,008 to
			// 1,010 in 20 runs, since the first request to a host goes
			// alone and its failure is seen sooner).
			for i := range got {
				budgets := (tt.want[i] - int64(tt.requests) + 9) / 10
				unspent := budgets * int64(retryhttp.DefaultRetryBudgetCapacity/2)
				assert.GreaterOrEqual(t, got[i], tt.want[i]-unspent, "S%d", i+1)
				assert.LessOrEqual(t, got[i], tt.want[i]+budgets*int64(testkit.MaxProbes), "S%d", i+1)
			}
		})
	}
}

// TestChainDeadTailSignalReachesClient checks what the client sees: with
// Pushback everywhere, the tail's failure comes back marked, and the
// client does not retry it.
func TestChainDeadTailSignalReachesClient(t *testing.T) {
	c := newChain(t, chainConfig{}, deadTail)
	res, err := c.client.Get(c.url)
	require.NoError(t, err)
	testkit.ReadAll(t, res)
	assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	assert.True(t, retryhttp.HasRetrySignal(res.Header))
	assert.Equal(t, int64(1), c.hits[0].Load())
}

// flakyTail fails 5% of the requests it sees at random: whether it fails
// the k-th arrival of a request id is a hash of the seed, the id and k,
// so the outcome does not depend on the order in which requests arrive.
func flakyTail(seed string) http.HandlerFunc {
	var arrivals sync.Map // request id → *atomic.Int64
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		n, _ := arrivals.LoadOrStore(id, new(atomic.Int64))
		k := n.(*atomic.Int64).Add(1)
		h := fnv.New64a()
		fmt.Fprintf(h, "%s/%s/%d", seed, id, k)
		if h.Sum64()%100 < 5 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
}

// TestChainFlakyTail checks that the signal costs no successes when S5
// fails 5% of its responses: S4 retries them as before, and the success
// rate is within half a point of naive retries at every hop.
func TestChainFlakyTail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		cfg      chainConfig
		requests int
	}{
		{"naive: budget off, signal off", chainConfig{opts: []retryhttp.Option{budgetOff, signalOff}}, 500},
		{"budget and signal", chainConfig{}, 500},
		{"mixed: S3 without Pushback", chainConfig{bare: 3}, 200},
	}
	rates := make([]float64, len(tests))
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newChain(t, tt.cfg, flakyTail("crosshop"))
			ok := c.run(t, tt.requests)
			got := c.counts()
			n := int64(tt.requests)
			rates[i] = float64(ok) / float64(n)
			t.Logf("| %s | %d | %.1f%% | %v | %.3f× |", tt.name, n, 100*rates[i], got, float64(got[servers-1])/float64(n))
			// S4 recovers every failure, so no hop above it retries.
			assert.Equal(t, []int64{n, n, n, n}, got[:servers-1])
			assert.InDelta(t, 1.05, float64(got[servers-1])/float64(n), 0.03)
			assert.GreaterOrEqual(t, rates[i], 0.995)
		})
	}
	assert.InDelta(t, rates[0], rates[1], 0.005, "budget and signal against naive")
}
