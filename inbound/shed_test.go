package inbound_test

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/inbound"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gate is a handler whose requests block until the test lets them go. The
// path /fast answers at once.
type gate struct {
	started chan struct{} // one value per blocked request that began
	release chan struct{} // closed: every blocked request answers 200
	once    sync.Once
}

func newGate() *gate {
	return &gate{started: make(chan struct{}, 1000), release: make(chan struct{})}
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/fast" {
		g.started <- struct{}{}
		<-g.release
	}
	_, _ = io.WriteString(w, "ok")
}

func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

// shedServer serves h behind s on loopback, closed (after the gate opens)
// when the test ends.
func shedServer(t *testing.T, s *inbound.LoadShedder, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(s.Handler(h))
	t.Cleanup(srv.Close)
	return srv
}

// plainClient sends requests without retries.
func plainClient(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// getAsync sends a GET in a goroutine and returns a channel that receives
// its status (0 on an error) once it ends.
func getAsync(ctx context.Context, c *http.Client, url string) <-chan int {
	done := make(chan int, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		res, err := c.Do(req)
		if err != nil {
			done <- 0
			return
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		done <- res.StatusCode
	}()
	return done
}

// occupy sends n GETs that block in g, and waits until all are in the
// handler. It returns their results.
func occupy(t *testing.T, c *http.Client, url string, g *gate, n int) []<-chan int {
	t.Helper()
	var held []<-chan int
	for range n {
		held = append(held, getAsync(context.Background(), c, url))
		<-g.started
	}
	return held
}

func TestLoadShedderFixedLimitShedsTheExcess(t *testing.T) {
	var decisions []inbound.ShedDecision
	var mu sync.Mutex
	s := inbound.NewLoadShedder(inbound.LoadShedderOptions{
		Limit: 2,
		OnDecision: func(d inbound.ShedDecision) {
			mu.Lock()
			decisions = append(decisions, d)
			mu.Unlock()
		},
	})
	g := newGate()
	srv := shedServer(t, s, g)
	c := plainClient(t)
	held := occupy(t, c, srv.URL, g, 2)

	res, err := c.Get(srv.URL + "/fast")
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	assert.Contains(t, []string{"1", "2"}, res.Header.Get("Retry-After"), "default: 1s, jitter 1")
	assert.False(t, retryhttp.HasRetrySignal(res.Header), "a shed request may be retried by the hop above")
	assert.Equal(t, "overloaded: retry later\n", string(body))
	assert.Equal(t, inbound.LoadShedderStats{Limit: 2, InFlight: 2, Admitted: 2, Shed: 1}, s.Stats())

	g.open()
	for _, h := range held {
		assert.Equal(t, http.StatusOK, <-h)
	}
	res, err = c.Get(srv.URL + "/fast")
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusOK, res.StatusCode, "slots are given back")
	assert.Equal(t, inbound.LoadShedderStats{Limit: 2, Admitted: 3, Shed: 1}, s.Stats())

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, decisions, 4)
	shed := decisions[2]
	assert.True(t, shed.Shed)
	assert.Equal(t, inbound.ShedOverLimit, shed.Reason)
	assert.Equal(t, "/fast", shed.Req.URL.Path)
	assert.Equal(t, 2, shed.Limit)
	assert.Equal(t, 2, shed.InFlight)
	assert.False(t, decisions[3].Shed)
	assert.Equal(t, 1, decisions[3].InFlight)
}

func TestLoadShedderMustPassIsNeverShed(t *testing.T) {
	var mustPass atomic.Int64
	s := inbound.NewLoadShedder(inbound.LoadShedderOptions{
		Limit:    1,
		MustPass: func(r *http.Request) bool { return r.URL.Path == "/fast" },
		OnDecision: func(d inbound.ShedDecision) {
			if d.MustPass {
				mustPass.Add(1)
			}
		},
	})
	g := newGate()
	srv := shedServer(t, s, g)
	c := plainClient(t)
	held := occupy(t, c, srv.URL+"/slow", g, 1)

	for range 3 {
		res, err := c.Get(srv.URL + "/fast")
		require.NoError(t, err)
		res.Body.Close()
		assert.Equal(t, http.StatusOK, res.StatusCode)
	}
	res, err := c.Get(srv.URL + "/other")
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode, "the limit still holds for the rest")
	assert.Equal(t, int64(3), mustPass.Load())
	assert.Equal(t, 1, s.Stats().InFlight, "must-pass requests take no slot")

	g.open()
	assert.Equal(t, http.StatusOK, <-held[0])
}

// fakeTimers hands the queue's timers to the test, which fires them.
type fakeTimers struct {
	mu      sync.Mutex
	created []time.Duration
	chans   []chan time.Time
}

func (f *fakeTimers) newTimer(d time.Duration) (<-chan time.Time, func() bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan time.Time, 1)
	f.created = append(f.created, d)
	f.chans = append(f.chans, ch)
	return ch, func() bool { return true }
}

// fire fires the i-th timer created.
func (f *fakeTimers) fire(i int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.chans[i] <- time.Time{}
}

func (f *fakeTimers) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.created)
}

// timedQueue returns a shedder made with opts, its queue's timers handed
// to the test, serving a server whose handler blocks in g, a client, and
// the status of the request that holds the one slot; reasons receives
// every decision after that request's.
func timedQueue(t *testing.T, opts inbound.LoadShedderOptions) (*inbound.LoadShedder, *fakeTimers, *gate,
	*http.Client, *httptest.Server, <-chan int, chan inbound.ShedDecision) {
	t.Helper()
	reasons := make(chan inbound.ShedDecision, 100)
	opts.OnDecision = func(d inbound.ShedDecision) { reasons <- d }
	s := inbound.NewLoadShedder(opts)
	timers := &fakeTimers{}
	inbound.SetShedTimer(s, timers.newTimer)
	g := newGate()
	srv := shedServer(t, s, g)
	c := plainClient(t)
	held := occupy(t, c, srv.URL, g, 1)[0]
	<-reasons
	return s, timers, g, c, srv, held, reasons
}

func TestLoadShedderQueue(t *testing.T) {
	s, timers, g, c, srv, held, reasons := timedQueue(t, inbound.LoadShedderOptions{
		Limit: 1, MaxQueue: 1, MaxQueueWait: 250 * time.Millisecond,
	})

	// One request waits; the next finds the queue full.
	waiting := getAsync(context.Background(), c, srv.URL+"/fast")
	require.Eventually(t, func() bool { return timers.count() == 1 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, 250*time.Millisecond, timers.created[0])
	assert.Equal(t, 1, s.Stats().Queued)
	full := <-getAsync(context.Background(), c, srv.URL+"/fast")
	assert.Equal(t, http.StatusServiceUnavailable, full)
	assert.Equal(t, inbound.ShedOverLimit, (<-reasons).Reason)

	// A slot freed goes to the waiter.
	g.open()
	assert.Equal(t, http.StatusOK, <-held)
	assert.Equal(t, http.StatusOK, <-waiting)
	admitted := <-reasons
	assert.False(t, admitted.Shed)
	assert.Positive(t, admitted.Waited)
	assert.Equal(t, inbound.LoadShedderStats{Limit: 1, Admitted: 2, Shed: 1}, s.Stats())
}

func TestLoadShedderQueueTimeoutAndCancel(t *testing.T) {
	s, timers, g, c, srv, held, reasons := timedQueue(t, inbound.LoadShedderOptions{Limit: 1, MaxQueue: 5})

	// The queue's time runs out.
	timedOut := getAsync(context.Background(), c, srv.URL+"/fast")
	require.Eventually(t, func() bool { return timers.count() == 1 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, 100*time.Millisecond, timers.created[0], "the default MaxQueueWait")
	timers.fire(0)
	assert.Equal(t, http.StatusServiceUnavailable, <-timedOut)
	d := <-reasons
	assert.True(t, d.Shed)
	assert.Equal(t, inbound.ShedQueueTimeout, d.Reason)

	// The caller goes away while it waits.
	ctx, cancel := context.WithCancel(context.Background())
	gone := getAsync(ctx, c, srv.URL+"/fast")
	require.Eventually(t, func() bool { return timers.count() == 2 }, 5*time.Second, time.Millisecond)
	cancel()
	assert.Equal(t, 0, <-gone)
	d = <-reasons
	assert.Equal(t, inbound.ShedCanceled, d.Reason)
	assert.Zero(t, s.Stats().Queued)

	g.open()
	assert.Equal(t, http.StatusOK, <-held)
	assert.Equal(t, inbound.LoadShedderStats{Limit: 1, Admitted: 1, Shed: 2}, s.Stats())
}

// TestLoadShedderConcurrent runs many requests through a small limit and a
// small queue, under the race detector: the handler never sees more than
// the limit at once, every request is admitted or shed, and nothing is left
// in flight.
func TestLoadShedderConcurrent(t *testing.T) {
	const limit, requests = 4, 400
	for _, adaptive := range []bool{false, true} {
		t.Run("adaptive="+strconv.FormatBool(adaptive), func(t *testing.T) {
			s := inbound.NewLoadShedder(inbound.LoadShedderOptions{
				Limit: limit, MaxLimit: limit, Adaptive: adaptive, MaxQueue: 3, MaxQueueWait: time.Second,
			})
			var cur, peak atomic.Int64
			srv := shedServer(t, s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := cur.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				time.Sleep(100 * time.Microsecond)
				cur.Add(-1)
			}))
			c := plainClient(t)
			var ok, shed atomic.Int64
			var wg sync.WaitGroup
			for range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range requests / 16 {
						switch <-getAsync(context.Background(), c, srv.URL) {
						case http.StatusOK:
							ok.Add(1)
						case http.StatusServiceUnavailable:
							shed.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			assert.Equal(t, int64(requests), ok.Load()+shed.Load())
			assert.LessOrEqual(t, peak.Load(), int64(limit))
			st := s.Stats()
			assert.Equal(t, uint64(ok.Load()), st.Admitted)
			assert.Equal(t, uint64(shed.Load()), st.Shed)
			assert.Zero(t, st.InFlight)
			assert.Zero(t, st.Queued)
		})
	}
}

func TestLoadShedderRetryAfterRange(t *testing.T) {
	tests := []struct {
		name           string
		base           time.Duration
		jitter         float64
		wantLo, wantHi int
	}{
		{"defaults", 0, 0, 1, 2},
		{"negative base", -time.Second, 0, 1, 2},
		{"sub-second rounds up", 300 * time.Millisecond, 0, 1, 2},
		{"1.5s rounds up", 1500 * time.Millisecond, 0.5, 2, 3},
		{"10s, half", 10 * time.Second, 0.5, 10, 15},
		{"no jitter", 5 * time.Second, -1, 5, 5},
		{"NaN jitter is the default", 5 * time.Second, math.NaN(), 5, 10},
		{"+Inf jitter is clamped", 2 * time.Second, math.Inf(1), 2, 22},
		{"above an hour", 48 * time.Hour, -1, 3600, 3600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lo, hi := inbound.RetryAfterRange(tt.base, tt.jitter)
			assert.Equal(t, tt.wantLo, lo)
			assert.Equal(t, tt.wantHi, hi)
		})
	}
}

// TestLoadShedderRetryAfterJitter checks the values a shed request gets:
// every whole second in [RetryAfter, RetryAfter·(1+jitter)], uniformly, as
// the random numbers go.
func TestLoadShedderRetryAfterJitter(t *testing.T) {
	s := inbound.NewLoadShedder(inbound.LoadShedderOptions{Limit: 1, RetryAfter: 4 * time.Second, RetryAfterJitter: 0.5})
	var r atomic.Uint64 // r/100 is the next random number
	inbound.SetShedRand(s, func() float64 { return float64(r.Add(1)-1) / 100 })
	g := newGate()
	srv := shedServer(t, s, g)
	c := plainClient(t)
	held := occupy(t, c, srv.URL, g, 1)
	counts := map[string]int{}
	for range 100 {
		res, err := c.Get(srv.URL + "/fast")
		require.NoError(t, err)
		res.Body.Close()
		counts[res.Header.Get("Retry-After")]++
	}
	assert.Equal(t, map[string]int{"4": 34, "5": 33, "6": 33}, counts)
	g.open()
	<-held[0]
}

func TestLoadShedderOptionsClamped(t *testing.T) {
	tests := []struct {
		name string
		give inbound.LoadShedderOptions
		want int // Stats().Limit at the start
	}{
		{"fixed default", inbound.LoadShedderOptions{}, 100},
		{"fixed negative", inbound.LoadShedderOptions{Limit: -3}, 100},
		{"fixed", inbound.LoadShedderOptions{Limit: 7}, 7},
		{"fixed huge", inbound.LoadShedderOptions{Limit: math.MaxInt}, 1 << 20},
		{"adaptive starts probing at MinLimit", inbound.LoadShedderOptions{Adaptive: true}, 2},
		{"adaptive MinLimit", inbound.LoadShedderOptions{Adaptive: true, MinLimit: 9}, 9},
		{"adaptive MaxLimit below MinLimit", inbound.LoadShedderOptions{Adaptive: true, MinLimit: 9, MaxLimit: 3}, 9},
		{"adaptive negative MinLimit", inbound.LoadShedderOptions{Adaptive: true, MinLimit: -1}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, inbound.NewLoadShedder(tt.give).Stats().Limit)
		})
	}
}

func TestLoadShedderNil(t *testing.T) {
	var s *inbound.LoadShedder
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	rec := httptest.NewRecorder()
	s.Handler(h).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	assert.Equal(t, http.StatusTeapot, rec.Code, "a nil shedder passes everything")

	rec = httptest.NewRecorder()
	inbound.NewLoadShedder(inbound.LoadShedderOptions{}).Handler(nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	assert.Equal(t, http.StatusNotFound, rec.Code, "a nil handler answers 404")
}

func TestShedReasonString(t *testing.T) {
	assert.Equal(t, "none", inbound.ShedNone.String())
	assert.Equal(t, "over_limit", inbound.ShedOverLimit.String())
	assert.Equal(t, "queue_timeout", inbound.ShedQueueTimeout.String())
	assert.Equal(t, "canceled", inbound.ShedCanceled.String())
	assert.Equal(t, "too_late", inbound.ShedTooLate.String())
	assert.Equal(t, "expired", inbound.ShedExpired.String())
	assert.Equal(t, "ShedReason(9)", inbound.ShedReason(9).String())
}

// TestLoadShedderReleasesOnPanic: a handler that panics gives its slot
// back (net/http recovers the panic and closes the connection).
func TestLoadShedderReleasesOnPanic(t *testing.T) {
	s := inbound.NewLoadShedder(inbound.LoadShedderOptions{Limit: 1})
	srv := httptest.NewUnstartedServer(s.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic(http.ErrAbortHandler)
	})))
	srv.Start()
	t.Cleanup(srv.Close)
	// A connection per request: net/http would replay a GET that failed on
	// a reused one.
	tr := &http.Transport{DisableKeepAlives: true}
	c := &http.Client{Transport: tr}
	for range 3 {
		_, err := c.Get(srv.URL)
		assert.Error(t, err)
	}
	assert.Equal(t, inbound.LoadShedderStats{Limit: 1, Admitted: 3}, s.Stats())
}
