package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/seed2409de8f/retryhttp"
)

// library is one column of the comparison: an http.Client with a library's
// defaults and a connection pool of its own.
type library struct {
	name   string
	client *http.Client
}

// libraries are the clients compared, each with its defaults.
// justinrixx/retryhttp is not among them: its module is not reachable
// through the module proxy here.
func libraries() []library {
	rc := retryablehttp.NewClient()
	rc.Logger = nil // defaults otherwise: 4 retries, 1 s to 30 s backoff
	return []library{
		{"net/http (bare)", &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}},
		{"retryhttp defaults", &http.Client{Transport: retryhttp.New()}},
		{"go-retryablehttp defaults", rc.StandardClient()},
		{"failsafehttp defaults", &http.Client{Transport: failsafehttp.NewRoundTripper(
			http.DefaultTransport.(*http.Transport).Clone(), failsafehttp.NewRetryPolicyBuilder().Build())}},
	}
}

// outcome is what a client saw for one logical request.
type outcome struct {
	lib    int
	method string
	ok     bool
	reason string        // why it failed, in a few words
	sent   time.Duration // when it was sent, from the start of the load
}

// ledger holds every logical request's outcome, by X-Request-Id, and every
// side effect the backends recorded.
type ledger struct {
	mu       sync.Mutex
	outcomes map[string]outcome
	hits     map[string]int
}

func newLedger() *ledger {
	return &ledger{outcomes: make(map[string]outcome), hits: make(map[string]int)}
}

func (l *ledger) hit(id string) {
	l.mu.Lock()
	l.hits[id]++
	l.mu.Unlock()
}

func (l *ledger) done(id string, o outcome) {
	l.mu.Lock()
	l.outcomes[id] = o
	l.mu.Unlock()
}

// loadConfig bounds the load of one library.
type loadConfig struct {
	clients   int
	perClient int           // at most this many requests per client
	duration  time.Duration // and no new request after this long
	think     time.Duration // pause between a client's requests
	timeout   time.Duration // per logical request, all attempts included
}

var payload = bytes.Repeat([]byte(`{"order":"a-small-json-body"}`), 8)

// drive runs cfg.clients clients of lib against url; every fourth request
// is a GET, the others POSTs with a 232-byte body (http.NewRequest sets
// GetBody). It returns when every client has finished.
func drive(lib int, l library, url string, cfg loadConfig, led *ledger) {
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(cfg.duration)
	for c := 0; c < cfg.clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for seq := 0; seq < cfg.perClient && time.Now().Before(end); seq++ {
				method := http.MethodPost
				if seq%4 == 3 {
					method = http.MethodGet
				}
				id := fmt.Sprintf("L%d-C%d-S%d", lib, c, seq)
				sent := time.Since(start)
				o := send(l.client, method, url, id, cfg.timeout)
				o.lib, o.sent = lib, sent
				led.done(id, o)
				time.Sleep(cfg.think)
			}
		}(c)
	}
	wg.Wait()
}

// send makes one logical request and reports its outcome.
func send(client *http.Client, method, url, id string, timeout time.Duration) outcome {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var body io.Reader
	if method == http.MethodPost {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return outcome{method: method, reason: err.Error()}
	}
	req.Header.Set("X-Request-Id", id)
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := client.Do(req)
	if err != nil {
		return outcome{method: method, reason: classify(err)}
	}
	_, err = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	switch {
	case res.StatusCode != http.StatusOK:
		return outcome{method: method, reason: fmt.Sprintf("status %d", res.StatusCode)}
	case err != nil:
		return outcome{method: method, reason: "body: " + classify(err)}
	}
	return outcome{method: method, ok: true}
}

// classify names an error by its cause, for the table of failure reasons.
func classify(err error) string {
	if e := retrypolicy.AsExceededError(err); e != nil {
		// failsafehttp: the last attempt's error, or its response, which
		// nobody else will close.
		if e.LastError != nil {
			return "retries exceeded: " + classify(e.LastError)
		}
		if res, ok := e.LastResult.(*http.Response); ok && res != nil {
			_ = res.Body.Close()
			return fmt.Sprintf("retries exceeded: status %d", res.StatusCode)
		}
	}
	s := err.Error()
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, io.EOF), strings.HasSuffix(s, "EOF"):
		return "EOF"
	case strings.Contains(s, "connection refused"):
		return "connection refused"
	case strings.Contains(s, "connection reset"):
		return "connection reset"
	case strings.Contains(s, "server closed idle connection"):
		return "server closed idle connection"
	case strings.Contains(s, "budget"):
		return "retry budget refused"
	case strings.Contains(s, "giving up after"):
		return "gave up (retryablehttp)"
	}
	if len(s) > 60 {
		s = s[:60] + "..."
	}
	return s
}
