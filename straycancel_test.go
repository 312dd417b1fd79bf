package retryhttp_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
)

// TestStrayCancellationIsRetried reproduces net/http's stray cancellation
// (straycancel.go) and checks that no request pays for another's: half the
// clients have their request cancelled by the server just after it sent its
// bodiless answer, the moment at which net/http may close the connection
// after handing it to another request; the other half never cancel, and
// every one of their requests must succeed. The base transport has one
// connection, so that a request waits for it each time it is freed. It runs
// until the base transport has returned 3 stray cancellations, or for 3 s,
// through the retry loop, then with hedging.
func TestStrayCancellationIsRetried(t *testing.T) {
	t.Run("retry loop", func(t *testing.T) { testStrayCancellation(t) })
	t.Run("hedged", func(t *testing.T) { testStrayCancellation(t, retryhttp.WithHedging(time.Millisecond, 1)) })
}

func testStrayCancellation(t *testing.T, opts ...retryhttp.Option) {
	var cancels sync.Map // X-Cancel value: the context.CancelFunc of that request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := cancels.Load(r.Header.Get("X-Cancel"))
		if !ok {
			return
		}
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		spin := time.Duration(rand.IntN(60)) * time.Microsecond // land anywhere in the window
		for start := time.Now(); time.Since(start) < spin; {
		}
		c.(context.CancelFunc)()
	}))
	defer srv.Close()
	base := &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}
	defer base.CloseIdleConnections()
	var strays atomic.Int64 // seen below retryhttp: context.Canceled, own context live
	counting := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		res, err := base.RoundTrip(r)
		if errors.Is(err, context.Canceled) && r.Context().Err() == nil {
			strays.Add(1)
		}
		return res, err
	})
	tr := testkit.NewTransport(t, append([]retryhttp.Option{retryhttp.WithTransport(counting), testkit.UnlimitedBudget,
		retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 })}, opts...)...)
	client := &http.Client{Transport: tr}

	var next, sent atomic.Int64
	var failedMu sync.Mutex
	var failed []error // requests of the clients that never cancel
	deadline := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for strays.Load() < 3 && time.Now().Before(deadline) {
				ctx, cancel := context.WithCancel(context.Background())
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
				id := strconv.FormatInt(next.Add(1), 10)
				if g%2 == 1 {
					cancels.Store(id, cancel)
					req.Header.Set("X-Cancel", id)
				}
				res, err := client.Do(req)
				if err == nil {
					err = res.Body.Close()
				}
				cancels.Delete(id)
				cancel()
				if g%2 == 0 {
					sent.Add(1)
					if err != nil {
						failedMu.Lock()
						failed = append(failed, err)
						failedMu.Unlock()
					}
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d requests never cancelled, %d stray cancellations met below retryhttp", sent.Load(), strays.Load())
	if sent.Load() == 0 {
		t.Fatal("no request sent")
	}
	for i, err := range failed {
		if i == 3 {
			t.Errorf("... and %d more", len(failed)-3)
			break
		}
		t.Errorf("a request nobody cancelled failed: %v", err)
	}
}

// TestStrayCancelJudgedAsLostConnection checks the judgement of a stray
// cancellation: retried for an idempotent request, marked so that errors.Is
// reaches context.Canceled; a cancellation of the attempt's own context is
// not retried.
func TestStrayCancelJudgedAsLostConnection(t *testing.T) {
	var calls atomic.Int32
	stray := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		calls.Add(1)
		return nil, context.Canceled // the attempt's context is live
	})
	tr := testkit.NewTransport(t, retryhttp.WithTransport(stray), testkit.UnlimitedBudget, retryhttp.WithMaxRetries(2),
		retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 }))
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:1/", nil)
	_, err := tr.RoundTrip(req)
	if got := calls.Load(); got != 3 {
		t.Errorf("GET: %d attempts, want 3", got)
	}
	if !errors.Is(err, context.Canceled) || !errors.Is(err, retryhttp.ErrRetriesExhausted) {
		t.Errorf("GET: error %v, want one that wraps context.Canceled and ErrRetriesExhausted", err)
	}

	calls.Store(0)
	post, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/", nil)
	if _, err := tr.RoundTrip(post); !errors.Is(err, context.Canceled) || calls.Load() != 1 {
		t.Errorf("POST: %d attempts, error %v; want 1, context.Canceled (it may have been sent)", calls.Load(), err)
	}

	calls.Store(0)
	ctx, cancel := context.WithCancel(context.Background())
	own := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		calls.Add(1)
		cancel()
		return nil, context.Canceled
	})
	tr = testkit.NewTransport(t, retryhttp.WithTransport(own), testkit.UnlimitedBudget)
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:1/", nil)
	if _, err := tr.RoundTrip(req); !errors.Is(err, context.Canceled) || calls.Load() != 1 {
		t.Errorf("cancelled by its caller: %d attempts, error %v; want 1, context.Canceled", calls.Load(), err)
	}
}
