package retryhttp

import (
	"fmt"
	"math"
	"math/bits"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/breaker"
	"github.com/seed2409de8f/retryhttp/internal/budget"
	"github.com/seed2409de8f/retryhttp/internal/doccheck"
	"github.com/seed2409de8f/retryhttp/internal/quota"
	"github.com/seed2409de8f/retryhttp/internal/retryafter"
	"github.com/seed2409de8f/retryhttp/internal/tail"
	"github.com/stretchr/testify/require"
)

// TestDocNumbers holds every number in the doc comments of the package's
// exported API to the value it states (internal/doccheck): the rows tied
// to a constant are written from it, so that a change of the constant, or
// of the comment, fails here; the others are phrases whose numbers state
// no constant of the package (a protocol, an example, a measurement).
func TestDocNumbers(t *testing.T) {
	dur, n := doccheck.Dur, fmt.Sprint
	// The doc comments write the default jitter as a fraction, 1/3.
	require.Equal(t, 1.0/3, defaultJitterMagnitude, "the doc comments say 1/3")
	jittered := func(d time.Duration, by float64) string {
		return dur(time.Duration(math.Round(float64(d) * by)))
	}
	ra := 3 * time.Second // CustomizedDelayFnOptions.JitterMagnitude's example
	codes := fmt.Sprintf("%d and %d", defaultRetryableStatusCodes[0], defaultRetryableStatusCodes[1])
	require.Len(t, defaultRetryableStatusCodes, 2)

	tied := [][2]string{
		{"package", "up to " + n(DefaultMaxRetries) + " retries"},
		{"package", codes + " for requests guessed idempotent"},
		{"package", "with ±1/3 jitter"},
		{"package", "backoff from " + dur(defaultDelayBase) + " (" + dur(defaultThrottleBase) + " for a 429 that states no wait), capped at " + dur(defaultDelayCap)},
		{"package", "instead of " + n(DefaultMaxRetries+1) + "×"},

		{"CustomizedDelayFnOptions.Base", "the default, " + dur(defaultDelayBase) + "."},
		{"CustomizedDelayFnOptions.Cap", "the default, " + dur(defaultDelayCap) + "."},
		{"CustomizedDelayFnOptions.JitterMagnitude", "with 1/3 (the default"},
		{"CustomizedDelayFnOptions.JitterMagnitude", "a Retry-After of " + dur(ra) + " gives a wait uniform in [" +
			jittered(ra, 1-defaultJitterMagnitude) + ", " + jittered(ra, 1+defaultJitterMagnitude) + ")"},
		{"CustomizedDelayFnOptions.ThrottleBase", "drawn below " + dur(defaultThrottleBase) + " by default rather than " + dur(defaultDelayBase)},
		{"CustomizedDelayFnOptions.ThrottleBase", "the default, " + dur(defaultThrottleBase) + "."},
		{"CustomizedShouldRetryFnOptions.RetryableStatusCodes", codes + " by default"},
		{"DefaultDelayFn", "a number below " + pow(10, retryafter.EpochThreshold) + " is seconds"},
		{"DefaultDelayFn", "[0, min(" + dur(defaultDelayCap) + ", " + dur(defaultDelayBase) + "·2^(n−1)))"},
		{"DefaultDelayFn", "[0, min(" + dur(defaultDelayCap) + ", " + dur(defaultThrottleBase) + "·2^(n−1)))"},
		{"IdempotencyKeys.Honored", fmt.Sprintf("%ds and %ds", defaultRetryableStatusCodes[0], defaultRetryableStatusCodes[1])},
		{"WithMaxDelay", "the default, " + dur(defaultMaxDelay) + "."},
		{"WithBodyBufferLimit", "The default is " + n(defaultBodyBufferLimit>>20) + " MiB"},
		{"WithAdaptiveHedging", "clamped to [" + n(tail.MinQuantile) + ", " + n(tail.MaxQuantile) + "]"},

		{"Quotas", "at most " + n(quota.MaxScopes) + " scopes"},
		{"WithQuotaPacing", "wait for its answer, at most " + dur(quota.FirstContactWait) + ", so that"},
		{"Quotas", "and " + n(quota.MaxPolicies) + " quotas each"},

		{"RetryBudgetOptions.Capacity", "above " + pow(2, budget.MaxCapacity) + " are treated as " + pow(2, budget.MaxCapacity)},
		{"RetryBudgetOptions.MaxHosts", "The default is " + n(defaultRetryBudgetMaxHosts) + "."},
		{"RetryBudgetOptions.MaxParked", "The default is " + doccheck.Commas(defaultMaxParked) + "."},

		{"CircuitBreakerSettings", "FailureRatio " + n(breaker.DefaultFailureRatio) + " opens"},
		{"CircuitBreakerSettings", "MinRequests " + n(breaker.DefaultMinRequests) + " …and the window holds at least " + n(breaker.DefaultMinRequests) + " samples"},
		{"CircuitBreakerSettings", "Window " + dur(breaker.DefaultWindow) + " rolling window of the samples, in " + n(breaker.WindowBuckets) + " buckets"},
		{"CircuitBreakerSettings", "OpenTimeout " + dur(breaker.DefaultOpenTimeout) + " time open"},
		{"CircuitBreakerSettings", "HalfOpenProbes " + n(breaker.DefaultProbes) + " probes"},
		{"CircuitBreakerSettings", "MaxHosts " + n(breaker.DefaultMaxHosts) + " destinations"},
		{"CircuitBreakerSettings.FailureRatio", "NaN mean " + n(breaker.DefaultFailureRatio) + ";"},
		{"CircuitBreakerSettings.MinRequests", "negative means " + n(breaker.DefaultMinRequests) + "."},
		{"CircuitBreakerSettings.Window", "negative means " + dur(breaker.DefaultWindow) + "."},
		{"CircuitBreakerSettings.OpenTimeout", "negative means " + dur(breaker.DefaultOpenTimeout) + "."},
		{"CircuitBreakerSettings.HalfOpenProbes", "negative means " + n(breaker.DefaultProbes) + "."},
		{"CircuitBreakerSettings.MaxHosts", "negative means " + n(breaker.DefaultMaxHosts) + "."},
	}
	facts := [][2]string{
		{"package", "Timeout: 30 * time.Second"}, // the example's client timeout
		{"package", "about 1.0× its callers' requests"},
		{"AttemptHeader", `"2" on the second attempt of a request, "3" on the third`},
		{"CustomizedShouldRetryFnOptions.IdempotentMethods", "RFC 9110 §9.1"},
		{"DefaultDelayFn", `-tokens ("6m0s": the spent resource's`}, // the LLM APIs' form
		{"DefaultShouldRetryFn", "HTTP/2"},
		{"RetrySignalHeader", "503s"},
		{"WithAdaptiveHedging", "(0.95 for the 95th percentile)"},
		{"WithErrorOnGiveUp", "giving up after 4 attempts"},
		{"WithLogger", "rounded to 0.1 ms (to 1 µs below 1 ms): 9.2ms, not 9.159045ms"},
		{"WithPrepareRetry", "(attempt 2)"},
		{"QuotaWaitError.Error", "the window turns in 1h0m0s"},
	}
	doccheck.CheckNumbers(t, ".", append(tied, facts...))
}

// TestOptionsDocDefaults holds the defaults that docs/options.md's tables
// state to the constants they name (internal/doccheck).
func TestOptionsDocDefaults(t *testing.T) {
	dur, n := doccheck.Dur, fmt.Sprint
	ra := 3 * time.Second
	jittered := func(by float64) string { return dur(time.Duration(math.Round(float64(ra) * by))) }
	require.Equal(t, 1.0/3, defaultJitterMagnitude, "docs/options.md says 1/3")
	doccheck.CheckTableRows(t, "docs/options.md", [][2]string{
		{"`WithMaxRetries(", "`DefaultMaxRetries` = " + n(DefaultMaxRetries) + " (so up to " + n(DefaultMaxRetries+1) + " attempts)"},
		{"`WithMaxDelay(", "| " + dur(defaultMaxDelay) + " |"},
		{"`WithMaxDelay(", "the default, " + dur(defaultMaxDelay)},
		{"`WithBodyBufferLimit(", n(defaultBodyBufferLimit>>20) + " MiB (" + n(defaultBodyBufferLimit) + " bytes"},
		{"`WithRetryBudget(", "`Capacity` " + n(DefaultRetryBudgetCapacity) + " tokens"},
		{"`WithRetryBudget(", "`Ratio` " + n(DefaultRetryBudgetRatio)},
		{"`WithRetryBudget(", "`MaxHosts` " + n(defaultRetryBudgetMaxHosts)},
		{"`WithRetryBudget(", "`MaxWait` " + dur(DefaultMaxParkedWait)},
		{"`WithRetryBudget(", "`MaxParked` " + doccheck.Commas(defaultMaxParked)},
		{"`WithCircuitBreaker(", fmt.Sprintf("`FailureRatio` %v, `MinRequests` %d, `Window` %s, `OpenTimeout` %s, `HalfOpenProbes` %d, `MaxHosts` %d",
			breaker.DefaultFailureRatio, breaker.DefaultMinRequests, dur(breaker.DefaultWindow), dur(breaker.DefaultOpenTimeout),
			breaker.DefaultProbes, breaker.DefaultMaxHosts)},
		{"`WithAdaptiveHedging(", "clamped to [" + n(tail.MinQuantile) + ", " + n(tail.MaxQuantile) + "]"},
		{"`RetryableStatusCodes []int`", fmt.Sprintf("| `%d`, `%d` |", defaultRetryableStatusCodes[0], defaultRetryableStatusCodes[1])},
		{"`Base time.Duration`", "| " + dur(defaultDelayBase) + " |"},
		{"`Cap time.Duration`", "| " + dur(defaultDelayCap) + " |"},
		{"`JitterMagnitude float64`", "| 1/3 (a `Retry-After` of " + dur(ra) + " gives [" + jittered(2.0/3) + ", " + jittered(4.0/3) + "))"},
		{"`ThrottleBase time.Duration`", "| " + dur(defaultThrottleBase) + " |"},
	})
}

// pow writes v, a power of base, as doc comments do: 2^30, 10^9.
func pow[T int | int64](base int, v T) string {
	e := 0
	if base == 2 {
		e = bits.TrailingZeros64(uint64(v))
	} else {
		e = int(math.Round(math.Log10(float64(v))))
	}
	if math.Pow(float64(base), float64(e)) != float64(v) {
		return fmt.Sprintf("%d (not a power of %d)", v, base)
	}
	return fmt.Sprintf("%d^%d", base, e)
}
