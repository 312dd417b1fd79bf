package retryhttp_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/seed2409de8f/retryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ptr[T any](v T) *T { return &v }

// loopbackNames returns a base transport that dials 127.0.0.1 whatever the
// host name of the URL, keeping its port: so that tests on loopback can name
// servers api.example.test, db.example.test and so on.
func loopbackNames(t *testing.T) *http.Transport {
	base := cleanhttp.DefaultPooledTransport()
	var d net.Dialer
	base.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
	}
	t.Cleanup(base.CloseIdleConnections)
	return base
}

// getVia sends a GET to url through rt and closes the response.
func getVia(t *testing.T, rt http.RoundTripper, url string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	res, err := rt.RoundTrip(req)
	require.NoError(t, err)
	res.Body.Close()
}

// TestDestinationsApplyPerServer sends one GET to each of four loopback
// servers that always fail, through one Transport: the attempts each server
// sees show which policy applied to it.
func TestDestinationsApplyPerServer(t *testing.T) {
	payments := newCountingServer(t, always(http.StatusServiceUnavailable))
	search := newCountingServer(t, always(http.StatusServiceUnavailable))
	legacy := newCountingServer(t, always(http.StatusInternalServerError))
	other := newCountingServer(t, always(http.StatusServiceUnavailable))

	d, err := retryhttp.NewDestinations(retryhttp.DestinationConfig{
		Destinations: []retryhttp.Destination{
			{Name: "payments", Host: "payments.example.test", MaxRetries: ptr(0)},
			{Host: "*.search.example.test", MaxRetries: ptr(1)},
			// 500 is not retried by default; this destination retries it.
			{Host: "legacy.example.test", RetryableStatusCodes: []int{500}},
		},
	})
	require.NoError(t, err)
	tr := newTransport(t, retryhttp.WithTransport(loopbackNames(t)), noDelay, unlimitedBudget,
		retryhttp.WithMaxRetries(2), retryhttp.WithDestinations(d))

	getVia(t, tr, "http://payments.example.test:"+payments.port()+"/")
	getVia(t, tr, "http://eu.search.example.test:"+search.port()+"/")
	getVia(t, tr, "http://legacy.example.test:"+legacy.port()+"/")
	getVia(t, tr, "http://other.example.test:"+other.port()+"/")

	assert.EqualValues(t, 1, payments.attempts.Load(), "payments: maxRetries 0")
	assert.EqualValues(t, 2, search.attempts.Load(), "search: maxRetries 1, through the wildcard")
	assert.EqualValues(t, 3, legacy.attempts.Load(), "legacy: the transport's 2 retries, on 500")
	assert.EqualValues(t, 3, other.attempts.Load(), "unmatched: the transport's 2 retries")
}

func (s *countingServer) port() string {
	_, port, _ := net.SplitHostPort(s.Listener.Addr().String())
	return port
}

// TestDestinationsDefaultsApplyToEveryRequest checks that the defaults of a
// config reach unmatched requests and fill what a destination leaves unset.
func TestDestinationsDefaultsApplyToEveryRequest(t *testing.T) {
	d, err := retryhttp.NewDestinations(retryhttp.DestinationConfig{
		Defaults: retryhttp.Destination{MaxRetries: ptr(1), AttemptTimeout: ptr(time.Second)},
		Destinations: []retryhttp.Destination{
			{Host: "a.test", AttemptTimeout: ptr(2 * time.Second)},
		},
	})
	require.NoError(t, err)
	tr := retryhttp.New(retryhttp.WithMaxRetries(5), retryhttp.WithDestinations(d))

	a := retryhttp.SettingsFor(tr, mustRequest(t, context.Background(), "http://a.test/"))
	assert.Equal(t, 1, a.MaxRetries, "inherited from the defaults")
	assert.Equal(t, 2*time.Second, a.AttemptTimeout, "the destination's own")

	other := retryhttp.SettingsFor(tr, mustRequest(t, context.Background(), "http://b.test/"))
	assert.Equal(t, 1, other.MaxRetries)
	assert.Equal(t, time.Second, other.AttemptTimeout)
}

func mustRequest(t testing.TB, ctx context.Context, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	return req
}

// TestDestinationsPrecedence checks the order documented in
// docs/options.md: context override, destination policy, transport option,
// default.
func TestDestinationsPrecedence(t *testing.T) {
	d, err := retryhttp.NewDestinations(retryhttp.DestinationConfig{Destinations: []retryhttp.Destination{{
		Host:           "policy.test",
		MaxRetries:     ptr(1),
		AttemptTimeout: ptr(time.Second),
		Hedging:        &retryhttp.DestinationHedging{Delay: time.Millisecond, MaxHedges: 2},
		NoBudget:       true,
	}}})
	require.NoError(t, err)
	withOption := retryhttp.New(retryhttp.WithMaxRetries(5), retryhttp.WithAttemptTimeout(3*time.Second),
		retryhttp.WithHedging(time.Hour, 1), retryhttp.WithDestinations(d))
	withoutOption := retryhttp.New(retryhttp.WithDestinations(d))
	override := func(ctx context.Context) context.Context {
		ctx = retryhttp.SetMaxRetries(ctx, 7)
		ctx = retryhttp.SetAttemptTimeout(ctx, 4*time.Second)
		return retryhttp.SetHedging(ctx, 0, 0)
	}
	tests := []struct {
		name        string
		tr          *retryhttp.Transport
		url         string
		ctx         func(context.Context) context.Context
		wantRetries int
		wantTimeout time.Duration
		wantHedges  int
		wantBudget  bool
	}{
		{"context beats policy", withOption, "http://policy.test/", override, 7, 4 * time.Second, 0, false},
		{"policy beats option", withOption, "http://policy.test/", nil, 1, time.Second, 2, false},
		{"option when unmatched", withOption, "http://other.test/", nil, 5, 3 * time.Second, 1, true},
		{"default when unmatched", withoutOption, "http://other.test/", nil, retryhttp.DefaultMaxRetries, 0, 0, true},
		{"context when unmatched", withoutOption, "http://other.test/", override, 7, 4 * time.Second, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.ctx != nil {
				ctx = tt.ctx(ctx)
			}
			s := retryhttp.SettingsFor(tt.tr, mustRequest(t, ctx, tt.url))
			assert.Equal(t, tt.wantRetries, s.MaxRetries)
			assert.Equal(t, tt.wantTimeout, s.AttemptTimeout)
			assert.Equal(t, tt.wantHedges, s.MaxHedges)
			assert.Equal(t, tt.wantBudget, s.Budget != nil)
		})
	}
}

// TestDestinationsMatchOrder checks which destination a URL gets: the first
// in order that matches, by exact host, host and port, wildcard or Match.
func TestDestinationsMatchOrder(t *testing.T) {
	byHeader := func(r *http.Request) bool { return r.Header.Get("X-Tier") == "batch" }
	d, err := retryhttp.NewDestinations(retryhttp.DestinationConfig{Destinations: []retryhttp.Destination{
		{Host: "api.example.com:8443", MaxRetries: ptr(0)},
		{Match: byHeader, MaxRetries: ptr(1)},
		{Host: "api.example.com", MaxRetries: ptr(2)},
		{Host: "*.eu.example.com", MaxRetries: ptr(3)},
		{Host: "*.example.com", MaxRetries: ptr(4)},
		{Host: "[::1]:9000", MaxRetries: ptr(5)},
		{Host: "10.0.0.1", MaxRetries: ptr(6)},
	}})
	require.NoError(t, err)
	tr := retryhttp.New(retryhttp.WithMaxRetries(9), retryhttp.WithDestinations(d))
	tests := []struct {
		give  string
		batch bool
		want  int
	}{
		{"https://api.example.com:8443/", false, 0},
		{"https://api.example.com:8443/", true, 0}, // the port rule comes before Match
		{"https://api.example.com/", true, 1},      // Match comes before the any-port rule
		{"https://api.example.com/", false, 2},
		{"https://API.Example.COM./x", false, 2}, // case and a trailing dot don't matter
		{"http://api.example.com:8443/", false, 0},
		{"https://a.eu.example.com/", false, 3},
		{"https://a.b.eu.example.com/", false, 3}, // any depth
		{"https://eu.example.com/", false, 4},     // *.eu does not match eu itself
		{"https://example.com/", false, 9},        // nor *.example.com example.com
		{"http://[::1]:9000/", false, 5},
		{"http://[::1]:9001/", false, 9},
		{"http://10.0.0.1:1234/", false, 6},
		{"http://10.0.0.2/", false, 9},
		{"http://notexample.com/", false, 9},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s batch=%v", tt.give, tt.batch), func(t *testing.T) {
			req := mustRequest(t, context.Background(), tt.give)
			if tt.batch {
				req.Header.Set("X-Tier", "batch")
			}
			assert.Equal(t, tt.want, retryhttp.SettingsFor(tr, req).MaxRetries)
		})
	}
}

// TestDestinationsBudgets checks a destination's own budget, the budget
// turned off, and the transport's budget, on three loopback servers that
// always fail. Parking is off, so that the counts are the buckets'.
func TestDestinationsBudgets(t *testing.T) {
	own := newCountingServer(t, always(http.StatusServiceUnavailable))
	off := newCountingServer(t, always(http.StatusServiceUnavailable))
	shared := newCountingServer(t, always(http.StatusServiceUnavailable))
	d, err := retryhttp.NewDestinations(retryhttp.DestinationConfig{Destinations: []retryhttp.Destination{
		{Host: "own.test", Budget: &retryhttp.RetryBudgetOptions{Capacity: 2, NoParking: true}},
		{Host: "off.test", NoBudget: true},
	}})
	require.NoError(t, err)
	tr := newTransport(t, retryhttp.WithTransport(loopbackNames(t)), noDelay,
		noParking(retryhttp.RetryBudgetOptions{Capacity: 5}),
		retryhttp.WithDestinations(d))
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
	cfg := func(capacity int) retryhttp.DestinationConfig {
		return retryhttp.DestinationConfig{Destinations: []retryhttp.Destination{
			{Host: "127.0.0.1", MaxRetries: ptr(5), Budget: &retryhttp.RetryBudgetOptions{Capacity: capacity, NoParking: true}},
		}}
	}
	d, err := retryhttp.NewDestinations(cfg(2))
	require.NoError(t, err)
	tr := newTransport(t, noDelay, retryhttp.WithDestinations(d))

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
	cfg := func(retries int) retryhttp.DestinationConfig {
		return retryhttp.DestinationConfig{Destinations: []retryhttp.Destination{
			{Host: "127.0.0.1", MaxRetries: ptr(retries), NoBudget: true},
		}}
	}
	d, err := retryhttp.NewDestinations(cfg(0))
	require.NoError(t, err)
	// Each wait yields, so that reloads land between the attempts of one
	// request.
	yield := retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return time.Microsecond })
	tr := newTransport(t, yield, retryhttp.WithDestinations(d))

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
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	good := write("good.json", `{"destinations": [{"host": "a.test", "maxRetries": 1}]}`)
	bad := write("bad.json", `{"destinations": [{"host": "a.test", "backoff": {"base": "-1s"}}]}`)

	var d retryhttp.Destinations
	tr := retryhttp.New(retryhttp.WithDestinations(&d))
	req := mustRequest(t, context.Background(), "http://a.test/")
	assert.Equal(t, retryhttp.DefaultMaxRetries, retryhttp.SettingsFor(tr, req).MaxRetries, "zero value: none")

	require.NoError(t, d.LoadFile(good))
	assert.Equal(t, 1, retryhttp.SettingsFor(tr, req).MaxRetries)

	err := d.LoadFile(bad)
	require.Error(t, err)
	assert.Equal(t, `retryhttp: `+bad+`: destinations[0].backoff.base: must be a positive duration, got "-1s"`, err.Error())
	var ce *retryhttp.DestinationConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "destinations[0].backoff.base", ce.Path)
	assert.Equal(t, 1, retryhttp.SettingsFor(tr, req).MaxRetries, "the bad file changed nothing")

	err = d.LoadFile(filepath.Join(dir, "missing.json"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.Equal(t, 1, retryhttp.SettingsFor(tr, req).MaxRetries)
}

// TestParseDestinationsErrors is the table of invalid files and their
// messages.
func TestParseDestinationsErrors(t *testing.T) {
	tests := []struct {
		name string
		give string
		want string
	}{
		{"not JSON", `{"destinations": [}`, "retryhttp: not valid JSON: line 1, column 19: invalid character '}' looking for beginning of value"},
		{"syntax error on line 3", "{\n \"destinations\": [\n  {,}]}", "retryhttp: not valid JSON: line 3, column 4: invalid character ',' looking for beginning of object key string"},
		{"not an object", `[]`, "retryhttp: top level: must be an object, got an array"},
		{"unknown top key", `{"destination": []}`, "retryhttp: destination: unknown key (known keys: defaults, destinations)"},
		{"unknown key", `{"destinations": [{"host": "a.test", "maxRetry": 1}]}`,
			"retryhttp: destinations[0].maxRetry: unknown key (known keys: name, host, maxRetries, backoff, attemptTimeout, hedging, retryableStatusCodes, budget)"},
		{"keys are case-sensitive", `{"destinations": [{"Host": "a.test"}]}`,
			"retryhttp: destinations[0].Host: unknown key (known keys: name, host, maxRetries, backoff, attemptTimeout, hedging, retryableStatusCodes, budget)\n" +
				"retryhttp: destinations[0].host: required: a host such as api.example.com, api.example.com:8443 or *.example.com"},
		{"unknown nested key", `{"destinations": [{"host": "a.test", "backoff": {"max": "1s"}}]}`,
			"retryhttp: destinations[0].backoff.max: unknown key (known keys: base, cap, jitter)"},
		{"repeated key", `{"destinations": [{"host": "a.test", "host": "b.test"}]}`, "retryhttp: destinations[0].host: repeated key"},
		{"host in defaults", `{"defaults": {"host": "a.test"}}`,
			"retryhttp: defaults.host: unknown key (known keys: maxRetries, backoff, attemptTimeout, hedging, retryableStatusCodes, budget)"},
		{"destinations not an array", `{"destinations": {"host": "a.test"}}`, "retryhttp: destinations: must be an array, got an object"},
		{"missing host", `{"destinations": [{"maxRetries": 1}]}`,
			"retryhttp: destinations[0].host: required: a host such as api.example.com, api.example.com:8443 or *.example.com"},
		{"URL as host", `{"destinations": [{"host": "https://a.test/"}]}`,
			`retryhttp: destinations[0].host: must be a host such as api.example.com, api.example.com:8443 or *.example.com, not a URL, got "https://a.test/"`},
		{"bad port", `{"destinations": [{"host": "a.test:99999"}]}`, `retryhttp: destinations[0].host: must have a port from 1 to 65535, got "a.test:99999"`},
		{"wildcard with port", `{"destinations": [{"host": "*.a.test:80"}]}`, `retryhttp: destinations[0].host: a wildcard host takes no port, got "*.a.test:80"`},
		{"wildcard address", `{"destinations": [{"host": "*.[::1]"}]}`, `retryhttp: destinations[0].host: a wildcard takes a host name, not an address, got "*.[::1]"`},
		{"bad IPv6", `{"destinations": [{"host": "[10.0.0.1]:80"}]}`, `retryhttp: destinations[0].host: must hold an IPv6 address in its brackets, got "[10.0.0.1]:80"`},
		{"wildcard inside", `{"destinations": [{"host": "a.*.test"}]}`, `retryhttp: destinations[0].host: '*' is allowed only as the first label, as in *.example.com, got "a.*.test"`},
		{"duplicate host", `{"destinations": [{"host": "a.test"}, {"host": "b.test"}, {"host": "A.test"}]}`,
			`retryhttp: destinations[2].host: "A.test" repeats destinations[0].host`},
		{"shadowed by a wildcard", `{"destinations": [{"host": "*.test"}, {"host": "a.test:8080"}]}`,
			`retryhttp: destinations[1].host: "a.test:8080" is never used: destinations[0].host ("*.test") matches it first`},
		{"shadowed by any port", `{"destinations": [{"host": "a.test"}, {"host": "a.test:8080"}]}`,
			`retryhttp: destinations[1].host: "a.test:8080" is never used: destinations[0].host ("a.test") matches it first`},
		{"duplicate name", `{"destinations": [{"name": "x", "host": "a.test"}, {"name": "x", "host": "b.test"}]}`,
			`retryhttp: destinations[1].name: "x" repeats destinations[0].name`},
		{"negative retries", `{"destinations": [{"host": "a.test", "maxRetries": -1}]}`, "retryhttp: destinations[0].maxRetries: must not be negative, got -1"},
		{"retries as a string", `{"destinations": [{"host": "a.test", "maxRetries": "3"}]}`, `retryhttp: destinations[0].maxRetries: must be a whole number, got "3"`},
		{"fractional retries", `{"defaults": {"maxRetries": 1.5}}`, "retryhttp: defaults.maxRetries: must be a whole number, got 1.5"},
		{"bad duration", `{"destinations": [{"host": "a.test", "attemptTimeout": "fast"}]}`,
			`retryhttp: destinations[0].attemptTimeout: must be a duration such as "250ms" or "2s", got "fast"`},
		{"duration as a number", `{"destinations": [{"host": "a.test", "attemptTimeout": 5}]}`,
			`retryhttp: destinations[0].attemptTimeout: must be a duration string such as "250ms" or "2s", got 5`},
		{"negative base", `{"destinations": [{"host": "a.test"}, {"host": "b.test"}, {"host": "c.test", "backoff": {"base": "-1s"}}]}`,
			`retryhttp: destinations[2].backoff.base: must be a positive duration, got "-1s"`},
		{"zero cap", `{"defaults": {"backoff": {"cap": "0s"}}}`, `retryhttp: defaults.backoff.cap: must be a positive duration, got "0s"`},
		{"cap below base", `{"defaults": {"backoff": {"base": "1s", "cap": "500ms"}}}`,
			`retryhttp: defaults.backoff.cap: must not be below backoff.base ("1s"), got "500ms"`},
		{"jitter above 1", `{"defaults": {"backoff": {"jitter": 1.5}}}`, "retryhttp: defaults.backoff.jitter: must be a number from 0 to 1, got 1.5"},
		{"hedging without delay", `{"defaults": {"hedging": {"maxHedges": 2}}}`, "retryhttp: defaults.hedging.delay: required when maxHedges is above 0"},
		{"hedging word", `{"defaults": {"hedging": "on"}}`, `retryhttp: defaults.hedging: must be "off" or an object, got "on"`},
		{"budget word", `{"defaults": {"budget": "none"}}`, `retryhttp: defaults.budget: must be "transport", "off" or an object, got "none"`},
		{"budget capacity", `{"defaults": {"budget": {"capacity": 0}}}`, "retryhttp: defaults.budget.capacity: must be a positive whole number, got 0"},
		{"budget ratio", `{"defaults": {"budget": {"ratio": -0.1}}}`, "retryhttp: defaults.budget.ratio: must be a positive number, got -0.1"},
		{"budget noParking", `{"defaults": {"budget": {"noParking": "yes"}}}`, `retryhttp: defaults.budget.noParking: must be true or false, got "yes"`},
		{"budget maxWait", `{"defaults": {"budget": {"maxWait": "0s"}}}`, `retryhttp: defaults.budget.maxWait: must be a positive duration, got "0s"`},
		{"budget maxWait number", `{"defaults": {"budget": {"maxWait": 2}}}`,
			`retryhttp: defaults.budget.maxWait: must be a duration string such as "250ms" or "2s", got 2`},
		{"budget maxParked", `{"destinations": [{"host": "a.test", "budget": {"maxParked": -1}}]}`,
			"retryhttp: destinations[0].budget.maxParked: must be a positive whole number, got -1"},
		{"status code", `{"defaults": {"retryableStatusCodes": [503, 200]}}`,
			"retryhttp: defaults.retryableStatusCodes[1]: must be a status code from 400 to 599, got 200"},
		{"status code twice", `{"defaults": {"retryableStatusCodes": [503, 503]}}`, "retryhttp: defaults.retryableStatusCodes[1]: 503 is listed twice"},
		{"two problems", `{"destinations": [{"host": "a.test", "maxRetries": -1, "hedging": {"delay": "x"}}]}`,
			"retryhttp: destinations[0].maxRetries: must not be negative, got -1\n" +
				`retryhttp: destinations[0].hedging.delay: must be a duration such as "250ms" or "2s", got "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := retryhttp.ParseDestinations([]byte(tt.give))
			require.Error(t, err)
			assert.Equal(t, tt.want, err.Error())
			assert.Zero(t, cfg)
			var ce *retryhttp.DestinationConfigError
			assert.ErrorAs(t, err, &ce)
		})
	}
}

// Regression: a value that could not be read (here maxRetries as a string)
// hid every check of the whole config, so a URL as host, cap below base and
// a shadowed host went unreported until the first problem was fixed.
func TestParseDestinationsReportsEveryProblemInOnePass(t *testing.T) {
	_, err := retryhttp.ParseDestinations([]byte(`{"destinations": [
		{"host": "a.test", "maxRetries": "3", "backoff": {"base": "1s", "cap": "500ms"}},
		{"host": "https://b.test/"},
		{"host": "a.test:8080", "attemptTimeout": 5},
		{"host": 7}
	]}`))
	require.Error(t, err)
	assert.Equal(t, `retryhttp: destinations[0].maxRetries: must be a whole number, got "3"`+"\n"+
		`retryhttp: destinations[2].attemptTimeout: must be a duration string such as "250ms" or "2s", got 5`+"\n"+
		`retryhttp: destinations[3].host: must be a string, got 7`+"\n"+
		`retryhttp: destinations[0].backoff.cap: must not be below backoff.base ("1s"), got "500ms"`+"\n"+
		`retryhttp: destinations[1].host: must be a host such as api.example.com, api.example.com:8443 or *.example.com, not a URL, got "https://b.test/"`+"\n"+
		`retryhttp: destinations[2].host: "a.test:8080" is never used: destinations[0].host ("a.test") matches it first`,
		err.Error())
}

// TestParseDestinationsFull reads a file that uses every key.
func TestParseDestinationsFull(t *testing.T) {
	cfg, err := retryhttp.ParseDestinations([]byte(`{
		"defaults": {"maxRetries": 2, "budget": {"ratio": 0.2, "capacity": 20, "maxHosts": 64,
			"noParking": false, "maxWait": "1500ms", "maxParked": 500}},
		"destinations": [
			{"name": "payments", "host": "payments.internal:8443", "maxRetries": 0, "hedging": "off", "budget": "off"},
			{"host": "*.search.internal", "attemptTimeout": "800ms",
			 "backoff": {"base": "50ms", "cap": "2s", "jitter": 0},
			 "hedging": {"delay": "100ms", "maxHedges": 1},
			 "retryableStatusCodes": [502, 503, 504], "budget": "transport"},
			{"host": "legacy.internal", "retryableStatusCodes": [], "backoff": null},
			{"host": "batch.internal", "budget": {"noParking": true}}
		]
	}`))
	require.NoError(t, err)
	want := retryhttp.DestinationConfig{
		Defaults: retryhttp.Destination{MaxRetries: ptr(2),
			Budget: &retryhttp.RetryBudgetOptions{Ratio: 0.2, Capacity: 20, MaxHosts: 64,
				MaxWait: 1500 * time.Millisecond, MaxParked: 500}},
		Destinations: []retryhttp.Destination{
			{Name: "payments", Host: "payments.internal:8443", MaxRetries: ptr(0),
				Hedging: &retryhttp.DestinationHedging{}, NoBudget: true},
			{Host: "*.search.internal", AttemptTimeout: ptr(800 * time.Millisecond),
				Backoff:              &retryhttp.CustomizedDelayFnOptions{Base: 50 * time.Millisecond, Cap: 2 * time.Second, JitterMagnitude: -1},
				Hedging:              &retryhttp.DestinationHedging{Delay: 100 * time.Millisecond, MaxHedges: 1},
				RetryableStatusCodes: []int{502, 503, 504}},
			{Host: "legacy.internal", RetryableStatusCodes: []int{}},
			{Host: "batch.internal", Budget: &retryhttp.RetryBudgetOptions{NoParking: true}},
		},
	}
	assert.Equal(t, want, cfg)
}

// TestDestinationsSetErrors checks the problems of configs built in Go,
// which ParseDestinations cannot produce.
func TestDestinationsSetErrors(t *testing.T) {
	match := func(*http.Request) bool { return true }
	tests := []struct {
		name string
		give retryhttp.DestinationConfig
		want string
	}{
		{"host and match", retryhttp.DestinationConfig{Destinations: []retryhttp.Destination{{Host: "a.test", Match: match}}},
			"retryhttp: destinations[0]: set host or match, not both"},
		{"match in defaults", retryhttp.DestinationConfig{Defaults: retryhttp.Destination{Match: match}},
			"retryhttp: defaults.match: not allowed in defaults: defaults apply to every request"},
		{"budget and no budget", retryhttp.DestinationConfig{Defaults: retryhttp.Destination{Budget: &retryhttp.RetryBudgetOptions{}, NoBudget: true}},
			"retryhttp: defaults.budget: set a budget of its own or no budget, not both"},
		{"negative maxWait", retryhttp.DestinationConfig{Defaults: retryhttp.Destination{Budget: &retryhttp.RetryBudgetOptions{MaxWait: -time.Second}}},
			`retryhttp: defaults.budget.maxWait: must be a positive duration (zero means the default, 2s), got "-1s"`},
		{"negative maxParked", retryhttp.DestinationConfig{Defaults: retryhttp.Destination{Budget: &retryhttp.RetryBudgetOptions{MaxParked: -1}}},
			"retryhttp: defaults.budget.maxParked: must be positive (zero means the default, 10000), got -1"},
		{"negative timeout", retryhttp.DestinationConfig{Defaults: retryhttp.Destination{AttemptTimeout: ptr(-time.Second)}},
			`retryhttp: defaults.attemptTimeout: must not be negative (zero means none), got "-1s"`},
		{"negative hedges", retryhttp.DestinationConfig{Defaults: retryhttp.Destination{Hedging: &retryhttp.DestinationHedging{MaxHedges: -1}}},
			"retryhttp: defaults.hedging.maxHedges: must not be negative (zero turns hedging off), got -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d retryhttp.Destinations
			err := d.Set(tt.give)
			require.Error(t, err)
			assert.Equal(t, tt.want, err.Error())
			_, err = retryhttp.NewDestinations(tt.give)
			assert.Error(t, err)
		})
	}
}

// TestDestinationsAddNoAllocs checks that finding a request's policy
// allocates nothing: with a matching host, a wildcard, and no match.
func TestDestinationsAddNoAllocs(t *testing.T) {
	d, err := retryhttp.NewDestinations(retryhttp.DestinationConfig{Destinations: []retryhttp.Destination{
		{Host: "exact.test", MaxRetries: ptr(1)},
		{Host: "port.test:8080", MaxRetries: ptr(1)},
		{Host: "*.wild.test", MaxRetries: ptr(1)},
	}})
	require.NoError(t, err)
	ours := retryhttp.New(retryhttp.WithTransport(memTransport{}), retryhttp.WithDestinations(d))
	for _, url := range []string{"http://exact.test/", "http://port.test:8080/", "http://a.b.wild.test/", "http://other.test/"} {
		t.Run(url, func(t *testing.T) {
			require.NoError(t, roundTripOnce(ours, url, newGET))
			bare := testing.AllocsPerRun(100, mustRoundTrip(memTransport{}, url, newGET))
			got := testing.AllocsPerRun(100, mustRoundTrip(ours, url, newGET))
			assert.Positive(t, bare)
			assert.LessOrEqual(t, got, bare, "allocations per GET: bare %v, with destinations %v", bare, got)
		})
	}
}

// FuzzParseDestinations checks that no input makes ParseDestinations panic,
// that every error it returns is made of DestinationConfigErrors, and that
// what it accepts, Set accepts.
func FuzzParseDestinations(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"defaults": {"maxRetries": 2, "backoff": {"base": "10ms", "cap": "1s", "jitter": 0.5}}}`,
		`{"destinations": [{"name": "p", "host": "a.test:8443", "maxRetries": 0, "budget": "off", "hedging": "off"}]}`,
		`{"destinations": [{"host": "*.a.test", "hedging": {"delay": "5ms", "maxHedges": 2}, "budget": {"capacity": 3}}]}`,
		`{"defaults": {"budget": {"noParking": true, "maxWait": "1s", "maxParked": 5}}}`,
		`{"destinations": [{"host": "[::1]:80", "retryableStatusCodes": [502]}, {"host": "*.a.test"}]}`,
		`{"destinations": [{"host": "a.test", "backoff": {"base": "-1s"}}]}`,
		`[1, 2]`, `"x"`, `{"destinations": null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := retryhttp.ParseDestinations(data)
		if err != nil {
			for _, e := range unjoin(err) {
				var ce *retryhttp.DestinationConfigError
				if !errors.As(e, &ce) {
					t.Fatalf("error %q is not a DestinationConfigError", e)
				}
			}
			return
		}
		var d retryhttp.Destinations
		if err := d.Set(cfg); err != nil {
			t.Fatalf("ParseDestinations accepted what Set refuses: %v", err)
		}
		for _, h := range cfg.Destinations {
			url := "http://" + strings.TrimPrefix(h.Host, "*.")
			if req, err := http.NewRequest(http.MethodGet, url, nil); err == nil {
				retryhttp.LookupDestination(&d, req)
			}
		}
	})
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// BenchmarkDestinations measures the happy path of a GET (in-memory base
// transport) through a Transport without destination policies, and with 100
// of them: exact hosts, host:port pairs and wildcards, the request matching
// the last wildcard or nothing.
func BenchmarkDestinations(b *testing.B) {
	var dests []retryhttp.Destination
	for i := range 100 {
		switch i % 3 {
		case 0:
			dests = append(dests, retryhttp.Destination{Host: fmt.Sprintf("svc%d.test", i), MaxRetries: ptr(1)})
		case 1:
			dests = append(dests, retryhttp.Destination{Host: fmt.Sprintf("svc%d.test:8080", i), MaxRetries: ptr(1)})
		default:
			dests = append(dests, retryhttp.Destination{Host: fmt.Sprintf("*.zone%d.test", i), MaxRetries: ptr(1)})
		}
	}
	d, err := retryhttp.NewDestinations(retryhttp.DestinationConfig{Destinations: dests})
	require.NoError(b, err)
	tests := []struct {
		name string
		tr   *retryhttp.Transport
		url  string
	}{
		{"none", retryhttp.New(retryhttp.WithTransport(memTransport{})), "http://a.zone98.test/"},
		{"100/exact", retryhttp.New(retryhttp.WithTransport(memTransport{}), retryhttp.WithDestinations(d)), "http://svc99.test/"},
		{"100/wildcard", retryhttp.New(retryhttp.WithTransport(memTransport{}), retryhttp.WithDestinations(d)), "http://a.b.zone98.test/"},
		{"100/unmatched", retryhttp.New(retryhttp.WithTransport(memTransport{}), retryhttp.WithDestinations(d)), "http://a.b.other.test/"},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if err := roundTripOnce(tt.tr, tt.url, newGET); err != nil {
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
				retryhttp.LookupDestination(d, req)
			}
		})
	}
}
