package retryhttp_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSoak sends 10,000 logical requests (1,000 with -short) from 64
// goroutines through one Transport to a loopback server that fails 20% of
// the attempts at random (a seeded PCG), and accounts for every one: each
// request has exactly one outcome, successes and failures add up, the server
// saw exactly the attempts the policy was asked about, every upload arrived
// whole, and goroutines and heap return to their baseline.
func TestSoak(t *testing.T) {
	total := 10000
	if testing.Short() {
		total = 1000
	}
	const workers = 64
	goroutinesBefore, heapBefore := baseline()

	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(2409, 6)) // deterministic sequence of failures
	fail := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return rng.IntN(5) == 0
	}
	var badBodies atomic.Int64
	srv := newCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if sum := sha256.Sum256(b); r.Header.Get("X-Sum") != hex.EncodeToString(sum[:]) {
			badBodies.Add(1)
		}
		if fail() {
			w.WriteHeader(503)
			_, _ = io.WriteString(w, "busy")
			return
		}
		_, _ = io.WriteString(w, r.Header.Get("X-Request-Id"))
	})
	base := &http.Transport{MaxIdleConnsPerHost: workers}
	var asked atomic.Int64 // attempts the policy was asked about
	tr := retryhttp.New(retryhttp.WithTransport(base), noDelay,
		retryhttp.WithShouldRetryFn(func(a retryhttp.Attempt) bool {
			asked.Add(1)
			return retryhttp.DefaultShouldRetryFn(a)
		}))
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}

	outcomes := make([]atomic.Int32, total) // per request: outcomes seen
	var successes, failures, errs atomic.Int64
	var next atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < total; i = int(next.Add(1) - 1) {
				status, err := soakRequest(client, srv.URL, i)
				outcomes[i].Add(1)
				switch {
				case err != nil:
					errs.Add(1)
				case status == 200:
					successes.Add(1)
				default:
					failures.Add(1) // four 503s: retries exhausted
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)

	for i := range outcomes {
		require.Equal(t, int32(1), outcomes[i].Load(), "request %d has exactly one outcome", i)
	}
	assert.Zero(t, errs.Load(), "no transport errors")
	assert.Equal(t, int64(total), successes.Load()+failures.Load(), "successes + failures = total")
	assert.Equal(t, srv.attempts.Load(), asked.Load(), "the server saw exactly the attempts the policy was asked about")
	assert.Zero(t, badBodies.Load(), "every upload arrived whole")
	assert.LessOrEqual(t, srv.conns.Load(), int64(2*workers), "connections stay bounded")
	t.Logf("%d requests, %d attempts, %d failed after 4 attempts, %d connections, in %v",
		total, srv.attempts.Load(), failures.Load(), srv.conns.Load(), elapsed.Round(time.Millisecond))

	base.CloseIdleConnections()
	srv.Close()
	assert.Eventually(t, func() bool { return runtime.NumGoroutine() <= goroutinesBefore+2 }, 5*time.Second, 10*time.Millisecond,
		"goroutines back to baseline (%d)", goroutinesBefore)
	_, heapAfter := baseline()
	assert.Less(t, int64(heapAfter)-int64(heapBefore), int64(8<<20), "heap back near baseline")
	t.Logf("goroutines %d → %d, heap %d KiB → %d KiB", goroutinesBefore, runtime.NumGoroutine(), heapBefore>>10, heapAfter>>10)
}

// soakRequest sends logical request i: a GET, or every fourth a PUT with a
// body and its checksum. It returns the final status.
func soakRequest(client *http.Client, url string, i int) (int, error) {
	method, body := http.MethodGet, []byte(nil)
	if i%4 == 0 {
		method, body = http.MethodPut, payload(1024+i%512)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	sum := sha256.Sum256(body)
	req.Header.Set("X-Sum", hex.EncodeToString(sum[:]))
	id := fmt.Sprint(i)
	req.Header.Set("X-Request-Id", id)
	res, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	got, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, err
	}
	if res.StatusCode == 200 && string(got) != id {
		return 0, fmt.Errorf("request %d got the answer to %q", i, got)
	}
	return res.StatusCode, nil
}

// baseline returns the number of goroutines and the live heap, after a
// garbage collection.
func baseline() (int, uint64) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return runtime.NumGoroutine(), m.HeapAlloc
}
