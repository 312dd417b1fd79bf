package storm

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed2409de8f/retryhttp"
)

// TestAdvertisedQuotas measures the pacing to advertised quotas (issue 37,
// docs/ratelimit.md "Advertised quotas") against a loopback server that
// states a quota of 50 per 2 s on every response, as a fixed window or as
// a token bucket (50 tokens, 25 per second; its reset is the time to a
// full bucket), in each dialect the transport reads, answering 429 without
// Retry-After over it. For each: a closed-loop batch of 200 GETs from 10
// workers through one Transport with the defaults (the LLM fields with
// WithQuotaScope, as the docs say), with an interactive caller beside it
// (one GET every 100 ms); then 4 client processes (this test binary run
// again) of 50 GETs from 10 workers each, sharing the quota. It logs, per
// row: successes, the server's 429s over all requests, the time over the
// quota's limit ((n - 50) / 25 per second), and the interactive caller's
// p99 and failures. About 3 minutes, on loopback only.
//
// cd bench/storm && go test -run TestAdvertisedQuotas -count=1 -v .
func TestAdvertisedQuotas(t *testing.T) {
	if os.Getenv("QUOTA_CLIENT_URL") != "" {
		quotaClientProcess(t)
		return
	}
	dialects := []string{"draft-11", "draft-07", "ratelimit-06", "x-ratelimit", "llm"}
	for _, bucket := range []bool{false, true} {
		for _, dialect := range dialects {
			shape := "window"
			if bucket {
				shape = "bucket"
			}
			t.Run(shape+"/"+dialect+"/1-client", func(t *testing.T) {
				srv := newAdvertisingServer(t, dialect, bucket)
				begin := time.Now()
				inter := startInteractive(srv.URL, dialect)
				ok := runBatch(srv.URL, dialect, 200, 10)
				took := time.Since(begin)
				p99, failed := inter.stop()
				served, refused := srv.counts()
				ratio := took.Seconds() / ((float64(served) - 50) / 25) // the interactive calls spend the quota too
				t.Logf("%-6s %-12s 1 client:  %3d/200 ok, 429s %5.1f%% of %d requests, %.2fx limit; interactive p99 %v, %d failed of %d",
					shape, dialect, ok, 100*float64(refused)/float64(served+refused), served+refused, ratio,
					p99.Round(time.Millisecond), failed, inter.sent())
				assert.Equal(t, 200, ok)
				assert.Zero(t, failed)
			})
			t.Run(shape+"/"+dialect+"/4-clients", func(t *testing.T) {
				srv := newAdvertisingServer(t, dialect, bucket)
				begin := time.Now()
				var wg sync.WaitGroup
				oks := make([]int, 4)
				for i := range 4 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						oks[i] = runClientProcess(t, srv.URL, dialect)
					}()
				}
				wg.Wait()
				took := time.Since(begin)
				served, refused := srv.counts()
				ratio := took.Seconds() / ((float64(served) - 50) / 25)
				t.Logf("%-6s %-12s 4 clients: %v ok of 50 each, 429s %5.1f%% of %d requests, last done %.2fx limit",
					shape, dialect, oks, 100*float64(refused)/float64(served+refused), served+refused, ratio)
				assert.Equal(t, []int{50, 50, 50, 50}, oks)
			})
		}
	}
}

// advertisingServer states its quota on every response in one dialect.
type advertisingServer struct {
	*httptest.Server
	mu              sync.Mutex
	served, refused int
}

func newAdvertisingServer(t *testing.T, dialect string, bucket bool) *advertisingServer {
	const limit, window = 50, 2 * time.Second
	const rate = float64(limit) / 2 // per second
	s := &advertisingServer{}
	start := time.Now()
	tokens, last := float64(limit), start
	var used int
	var index int64
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		now := time.Now()
		var remaining int
		var reset time.Duration
		ok := false
		if bucket {
			tokens = math.Min(limit, tokens+now.Sub(last).Seconds()*rate)
			last = now
			if tokens >= 1 {
				tokens--
				ok = true
			}
			remaining = int(tokens)
			reset = time.Duration((limit - tokens) / rate * float64(time.Second))
		} else {
			if i := int64(now.Sub(start) / window); i != index {
				index, used = i, 0
			}
			if used < limit {
				used++
				ok = true
			}
			remaining = limit - used
			reset = start.Add(time.Duration(index+1) * window).Sub(now)
		}
		if ok {
			s.served++
		} else {
			s.refused++
		}
		s.mu.Unlock()
		secs := int(math.Ceil(reset.Seconds()))
		h := w.Header()
		switch dialect {
		case "draft-11":
			h.Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=%d`, remaining, secs))
			h.Set("RateLimit-Policy", fmt.Sprintf(`"default";q=%d;w=%d`, limit, int(window/time.Second)))
		case "draft-07":
			h.Set("RateLimit", fmt.Sprintf("limit=%d, remaining=%d, reset=%d", limit, remaining, secs))
		case "ratelimit-06":
			h.Set("RateLimit-Limit", strconv.Itoa(limit))
			h.Set("RateLimit-Remaining", strconv.Itoa(remaining))
			h.Set("RateLimit-Reset", strconv.Itoa(secs))
		case "x-ratelimit":
			h.Set("X-RateLimit-Limit", strconv.Itoa(limit))
			h.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
			h.Set("X-RateLimit-Reset", strconv.FormatInt(now.Add(reset).Unix()+1, 10)) // an epoch, as GitHub's
		case "llm":
			h.Set("X-RateLimit-Limit-Requests", strconv.Itoa(limit))
			h.Set("X-RateLimit-Remaining-Requests", strconv.Itoa(remaining))
			h.Set("X-RateLimit-Reset-Requests", reset.Round(time.Millisecond).String())
		}
		if !ok {
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *advertisingServer) counts() (served, refused int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served, s.refused
}

// quotaTransport is the client of a dialect: the defaults, and a scope
// name for the LLM fields, which are read only for named scopes.
func quotaTransport(dialect string) *retryhttp.Transport {
	if dialect == "llm" {
		return retryhttp.New(retryhttp.WithQuotaScope(func(*http.Request) string { return "model" }))
	}
	return retryhttp.New()
}

// runBatch sends n GETs to url from workers closed loops, and returns how
// many succeeded.
func runBatch(url, dialect string, n, workers int) int {
	c := &http.Client{Transport: quotaTransport(dialect), Timeout: time.Minute}
	defer c.CloseIdleConnections()
	var next, ok atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				res, err := c.Get(url + "/v1/batch")
				if err != nil {
					continue
				}
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

// interactive is a caller sending one GET every 100 ms beside a batch.
type interactive struct {
	stopped   chan struct{}
	done      sync.WaitGroup
	mu        sync.Mutex
	latencies []time.Duration
	failed    int
}

func startInteractive(url, dialect string) *interactive {
	in := &interactive{stopped: make(chan struct{})}
	c := &http.Client{Transport: quotaTransport(dialect), Timeout: time.Minute}
	tick := time.NewTicker(100 * time.Millisecond)
	in.done.Add(1)
	go func() {
		defer in.done.Done()
		defer tick.Stop()
		var calls sync.WaitGroup
		defer calls.Wait()
		for {
			select {
			case <-in.stopped:
				return
			case <-tick.C:
			}
			calls.Add(1)
			go func() {
				defer calls.Done()
				begin := time.Now()
				res, err := c.Get(url + "/v1/interactive")
				ok := err == nil && res.StatusCode == http.StatusOK
				if err == nil {
					res.Body.Close()
				}
				in.mu.Lock()
				in.latencies = append(in.latencies, time.Since(begin))
				if !ok {
					in.failed++
				}
				in.mu.Unlock()
			}()
		}
	}()
	return in
}

// stop ends the caller, waits for its calls, and returns their p99 and
// failures.
func (in *interactive) stop() (time.Duration, int) {
	close(in.stopped)
	in.done.Wait()
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.latencies) == 0 {
		return 0, in.failed
	}
	slices.Sort(in.latencies)
	return in.latencies[(len(in.latencies)*99)/100], in.failed
}

func (in *interactive) sent() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.latencies)
}

// runClientProcess runs this test binary as a client process of url: a
// batch of 50 GETs from 10 workers, with a process-wide quota state of its
// own. It returns the successes the process reports.
func runClientProcess(t *testing.T, url, dialect string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestAdvertisedQuotas$", "-test.count=1")
	cmd.Env = append(os.Environ(), "QUOTA_CLIENT_URL="+url, "QUOTA_CLIENT_DIALECT="+dialect)
	out, err := cmd.Output()
	require.NoError(t, err, string(out))
	var r struct{ OK int }
	for _, line := range splitLines(out) {
		if json.Unmarshal(line, &r) == nil && r.OK > 0 {
			break
		}
	}
	return r.OK
}

// quotaClientProcess is the body of a client process.
func quotaClientProcess(t *testing.T) {
	ok := runBatch(os.Getenv("QUOTA_CLIENT_URL"), os.Getenv("QUOTA_CLIENT_DIALECT"), 50, 10)
	b, _ := json.Marshal(struct{ OK int }{ok})
	fmt.Println(string(b))
	assert.Positive(t, ok)
}

func splitLines(b []byte) [][]byte {
	var lines [][]byte
	for len(b) > 0 {
		i := slices.Index(b, '\n')
		if i < 0 {
			return append(lines, b)
		}
		lines, b = append(lines, b[:i]), b[i+1:]
	}
	return lines
}
