package destinations_test

import (
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/destinations"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParseErrors is the table of invalid files and their
// messages.
func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		give string
		want string
	}{
		{"not JSON", `{"destinations": [}`, "retryhttp: not valid JSON: line 1, column 19: invalid character '}' looking for beginning of value"},
		{"syntax error on line 3", "{\n \"destinations\": [\n  {,}]}", "retryhttp: not valid JSON: line 3, column 4: invalid character ',' looking for beginning of object key string"},
		{"not an object", `[]`, "retryhttp: top level: must be an object, got an array"},
		{"unknown top key", `{"destination": []}`, "retryhttp: destination: unknown key (known keys: defaults, destinations)"},
		{"holdDuringPause not a boolean", `{"destinations": [{"host": "a.test", "holdDuringPause": "yes"}]}`,
			`retryhttp: destinations[0].holdDuringPause: must be true or false, got "yes"`},
		{"unknown key", `{"destinations": [{"host": "a.test", "maxRetry": 1}]}`,
			"retryhttp: destinations[0].maxRetry: unknown key (known keys: name, host, maxRetries, backoff, attemptTimeout, hedging, retryableStatusCodes, budget, holdDuringPause)"},
		{"keys are case-sensitive", `{"destinations": [{"Host": "a.test"}]}`,
			"retryhttp: destinations[0].Host: unknown key (known keys: name, host, maxRetries, backoff, attemptTimeout, hedging, retryableStatusCodes, budget, holdDuringPause)\n" +
				"retryhttp: destinations[0].host: required: a host such as api.example.com, api.example.com:8443 or *.example.com"},
		{"unknown nested key", `{"destinations": [{"host": "a.test", "backoff": {"max": "1s"}}]}`,
			"retryhttp: destinations[0].backoff.max: unknown key (known keys: base, cap, jitter)"},
		{"repeated key", `{"destinations": [{"host": "a.test", "host": "b.test"}]}`, "retryhttp: destinations[0].host: repeated key"},
		{"host in defaults", `{"defaults": {"host": "a.test"}}`,
			"retryhttp: defaults.host: unknown key (known keys: maxRetries, backoff, attemptTimeout, hedging, retryableStatusCodes, budget, holdDuringPause)"},
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
			cfg, err := destinations.Parse([]byte(tt.give))
			require.Error(t, err)
			assert.Equal(t, tt.want, err.Error())
			assert.Zero(t, cfg)
			var ce *destinations.ConfigError
			assert.ErrorAs(t, err, &ce)
		})
	}
}

// Regression: a value that could not be read (here maxRetries as a string)
// hid every check of the whole config, so a URL as host, cap below base and
// a shadowed host went unreported until the first problem was fixed.
func TestParseReportsEveryProblemInOnePass(t *testing.T) {
	_, err := destinations.Parse([]byte(`{"destinations": [
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

// TestParseFull reads a file that uses every key.
func TestParseFull(t *testing.T) {
	cfg, err := destinations.Parse([]byte(`{
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
	want := destinations.Config{
		Defaults: destinations.Destination{MaxRetries: ptr(2),
			Budget: &retryhttp.RetryBudgetOptions{Ratio: 0.2, Capacity: 20, MaxHosts: 64,
				MaxWait: 1500 * time.Millisecond, MaxParked: 500}},
		Destinations: []destinations.Destination{
			{Name: "payments", Host: "payments.internal:8443", MaxRetries: ptr(0),
				Hedging: &destinations.Hedging{}, NoBudget: true},
			{Host: "*.search.internal", AttemptTimeout: ptr(800 * time.Millisecond),
				Backoff:              &retryhttp.CustomizedDelayFnOptions{Base: 50 * time.Millisecond, Cap: 2 * time.Second, JitterMagnitude: -1},
				Hedging:              &destinations.Hedging{Delay: 100 * time.Millisecond, MaxHedges: 1},
				RetryableStatusCodes: []int{502, 503, 504}},
			{Host: "legacy.internal", RetryableStatusCodes: []int{}},
			{Host: "batch.internal", Budget: &retryhttp.RetryBudgetOptions{NoParking: true}},
		},
	}
	assert.Equal(t, want, cfg)
}

// TestDestinationsSetErrors checks the problems of configs built in Go,
// which Parse cannot produce.
func TestDestinationsSetErrors(t *testing.T) {
	match := func(*http.Request) bool { return true }
	tests := []struct {
		name string
		give destinations.Config
		want string
	}{
		{"host and match", destinations.Config{Destinations: []destinations.Destination{{Host: "a.test", Match: match}}},
			"retryhttp: destinations[0]: set host or match, not both"},
		{"match in defaults", destinations.Config{Defaults: destinations.Destination{Match: match}},
			"retryhttp: defaults.match: not allowed in defaults: defaults apply to every request"},
		{"budget and no budget", destinations.Config{Defaults: destinations.Destination{Budget: &retryhttp.RetryBudgetOptions{}, NoBudget: true}},
			"retryhttp: defaults.budget: set a budget of its own or no budget, not both"},
		{"negative maxWait", destinations.Config{Defaults: destinations.Destination{Budget: &retryhttp.RetryBudgetOptions{MaxWait: -time.Second}}},
			`retryhttp: defaults.budget.maxWait: must be a positive duration (zero means the default, 2s), got "-1s"`},
		{"negative maxParked", destinations.Config{Defaults: destinations.Destination{Budget: &retryhttp.RetryBudgetOptions{MaxParked: -1}}},
			"retryhttp: defaults.budget.maxParked: must be positive (zero means the default, 10000), got -1"},
		{"negative timeout", destinations.Config{Defaults: destinations.Destination{AttemptTimeout: ptr(-time.Second)}},
			`retryhttp: defaults.attemptTimeout: must not be negative (zero means none), got "-1s"`},
		{"negative hedges", destinations.Config{Defaults: destinations.Destination{Hedging: &destinations.Hedging{MaxHedges: -1}}},
			"retryhttp: defaults.hedging.maxHedges: must not be negative (zero turns hedging off), got -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d destinations.Table
			err := d.Set(tt.give)
			require.Error(t, err)
			assert.Equal(t, tt.want, err.Error())
			_, err = destinations.New(tt.give)
			assert.Error(t, err)
		})
	}
}

// FuzzParse checks that no input makes Parse panic,
// that every error it returns is made of ConfigErrors, and that
// what it accepts, Set accepts.
func FuzzParse(f *testing.F) {
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
		cfg, err := destinations.Parse(data)
		if err != nil {
			for _, e := range unjoin(err) {
				var ce *destinations.ConfigError
				if !errors.As(e, &ce) {
					t.Fatalf("error %q is not a ConfigError", e)
				}
			}
			return
		}
		var d destinations.Table
		if err := d.Set(cfg); err != nil {
			t.Fatalf("Parse accepted what Set refuses: %v", err)
		}
		for _, h := range cfg.Destinations {
			url := "http://" + strings.Replace(h.Host, "*", "x", 1)
			req, err := http.NewRequest(http.MethodGet, url, nil)
			if err == nil && d.Policy(req) == nil {
				t.Fatalf("no policy for %s, a URL of destination %q", url, h.Host)
			}
		}
	})
}

// TestHedgingQuantileInvalid checks the checks of an adaptive hedging's
// quantile, in a file and in Go.
func TestHedgingQuantileInvalid(t *testing.T) {
	tests := []struct {
		name, give, want string
	}{
		{"quantile too high", `{"hedging": {"quantile": 1, "maxHedges": 1}}`, "defaults.hedging.quantile: must be a number from 0.5 to 0.999"},
		{"quantile too low", `{"hedging": {"quantile": 0.2, "maxHedges": 1}}`, "defaults.hedging.quantile: must be a number from 0.5 to 0.999"},
		{"quantile and delay", `{"hedging": {"quantile": 0.95, "delay": "10ms", "maxHedges": 1}}`, "defaults.hedging.delay: must be zero with a quantile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := destinations.Parse([]byte(`{"defaults": ` + tt.give + `}`))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
	_, err := destinations.New(destinations.Config{Defaults: destinations.Destination{
		Hedging: &destinations.Hedging{Quantile: math.NaN(), MaxHedges: 1}}})
	if err == nil || !strings.Contains(err.Error(), "hedging.quantile") {
		t.Errorf("NaN quantile: error %v, want one about hedging.quantile", err)
	}
}

// TestParseHoldDuringPause: "holdDuringPause" sets HoldDuringPause, and a
// destination without it inherits the defaults'.
func TestParseHoldDuringPause(t *testing.T) {
	cfg, err := destinations.Parse([]byte(`{"defaults": {"holdDuringPause": true},
		"destinations": [{"host": "a.test", "holdDuringPause": false}, {"host": "b.test"}]}`))
	require.NoError(t, err)
	require.NotNil(t, cfg.Defaults.HoldDuringPause)
	assert.True(t, *cfg.Defaults.HoldDuringPause)
	require.NotNil(t, cfg.Destinations[0].HoldDuringPause)
	assert.False(t, *cfg.Destinations[0].HoldDuringPause)
	assert.Nil(t, cfg.Destinations[1].HoldDuringPause)
}
